"""Write drafts, as the replica's codec makes them from the wire, against metadata with a table
of every column type (keyspaces ``ks`` and ``tracked``, RF 1): shared by the tests of
``prepare_write`` and of the checks on what peers send."""

from __future__ import annotations

import uuid

from epochal.replica.mutations import CellDraft, RowDraft, WriteDraft
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
from epochal.wire.values import encode, to_proto

LIMITS = {"max_value_bytes": 1000, "max_mutation_bytes": 100_000}
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


def cell(column: str, value: object, column_type: ColumnType | None = None) -> CellDraft:
    """A cell as the codec drafts it from the wire (``value`` None: delete the cell)."""
    if value is None:
        return CellDraft(column, None, None)
    proto = to_proto(column, column_type or REGULAR[column], value)
    kind = proto.WhichOneof("kind")
    return CellDraft(column, kind, encode(proto), proto.int if kind == "int" else None)


def write(*rows: RowDraft, keyspace: str = "ks", table: str = "t", **changes) -> WriteDraft:
    fields = {
        "keyspace": keyspace,
        "table": table,
        "partition_key": ("k", 1),
        "rows": rows,
    } | changes
    return WriteDraft(**fields)


def row(*cells: CellDraft, clustering=(5, b"x"), delete: bool = False) -> RowDraft:
    return RowDraft(clustering, cells, delete)
