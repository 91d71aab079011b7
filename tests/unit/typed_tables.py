"""Metadata with a table of every column type: keyspaces ``ks`` and ``tracked`` (RF 1), each
with table ``t`` (partition key p, q; clustering c, d; a regular column ``v_<type>`` of every
type), and in ``ks`` the tables ``by_name`` and ``typed`` (a partition-key column of every type).
Shared by the tests of the replica's write drafts and of the SDK's encoding."""

from __future__ import annotations

import uuid

from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    InitializeCMS,
    ReplicationParams,
    ReplicationType,
    apply_transformation,
)

REGULAR = {f"v_{t.value}": t for t in ColumnType}
SAMPLES = {
    ColumnType.TEXT: "hello",
    ColumnType.INT: -(2**31),
    ColumnType.BIGINT: 2**40,
    ColumnType.BOOLEAN: True,
    ColumnType.DOUBLE: -0.5,
    ColumnType.BLOB: b"\x00\xff",
    ColumnType.UUID: uuid.UUID(int=7),
    ColumnType.TIMESTAMP: 1_700_000_000_000,
}


def build_metadata() -> ClusterMetadata:
    metadata = ClusterMetadata.empty()
    for transformation in (
        InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),)),
        CreateKeyspace(name="ks", replication=ReplicationParams.simple(1)),
        CreateKeyspace(
            name="tracked",
            replication=ReplicationParams.simple(1),
            replication_type=ReplicationType.TRACKED,
        ),
        *(
            CreateTable(
                keyspace=keyspace,
                name="t",
                columns=(
                    Column("p", ColumnType.TEXT),
                    Column("q", ColumnType.INT),
                    Column("c", ColumnType.BIGINT),
                    Column("d", ColumnType.BLOB),
                    *(Column(name, t) for name, t in REGULAR.items()),
                ),
                partition_key=("p", "q"),
                clustering_key=("c", "d"),
            )
            for keyspace in ("ks", "tracked")
        ),
        CreateTable(
            keyspace="ks",
            name="by_name",
            columns=(Column("name", ColumnType.TEXT), Column("v", ColumnType.INT)),
            partition_key=("name",),
        ),
        CreateTable(
            keyspace="ks",
            name="typed",
            columns=tuple(Column(f"k_{t.value}", t) for t in ColumnType),
            partition_key=tuple(f"k_{t.value}" for t in ColumnType),
        ),
    ):
        metadata = apply_transformation(metadata, transformation)
    return metadata


METADATA = build_metadata()
