"""A replica's local side (``LocalReplica``) over real SQLite storage, following a metadata built
in the test (a ``seed_ring.Cluster``, such as ``one_node``) as if it had applied it from the
log: for the tests that drive a replica's handlers without a process."""

from __future__ import annotations

import asyncio

from epochal.mtrack import MutationId
from epochal.replica.codec import mutation_to_body
from epochal.replica.local_replica import LocalReplica, Outcome, PeerReply
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import Mutation, RowWrite
from epochal.replica.settings import settings_from
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import (
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    ReplicationParams,
    ReplicationType,
)
from epochal.tcm.tokens import TokenRange
from epochal.wire.channels import Channels
from epochal.wire.log import LogClient

from .seed_ring import Cluster


def one_node(replication_type: ReplicationType = ReplicationType.UNTRACKED) -> Cluster:
    """Node A alone at token 100 (it replicates every token: the whole ring is one range),
    keyspace ``tr`` (RF 1) with table ``t`` (k text, v int)."""
    made = Cluster({})
    made.apply(
        CreateKeyspace(
            name="tr", replication=ReplicationParams.simple(1), replication_type=replication_type
        ),
        CreateTable(
            keyspace="tr",
            name="t",
            columns=(Column("k", ColumnType.TEXT), Column("v", ColumnType.INT)),
            partition_key=("k",),
        ),
    )
    made.join("A", 100)
    return made


def local_replica(storage: ReplicaStorage, made: Cluster, node: str = "A") -> LocalReplica:
    settings = settings_from(["--listen", "127.0.0.1:1", "--cms", "127.0.0.1:2"], {})
    metrics = ReplicaMetrics()
    follower = MetadataFollower(
        settings.follower,
        storage.metadata,
        LogClient(Channels()),
        metrics.follower,
        service="replica",
    )
    follower._set(made.md, ())  # the metadata as if applied from the log
    local = LocalReplica(settings, storage, follower, metrics)
    local.node_id = made.ids[node]
    return local


# The tests of one tracked node's reconciliation marks, cohorts and purge.

RING = TokenRange(100, 100)  # one node at token 100: the whole ring is one range


def cluster() -> Cluster:
    """``one_node`` with ``tr`` tracked."""
    return one_node(ReplicationType.TRACKED)


def replica(storage: ReplicaStorage, made: Cluster) -> LocalReplica:
    local = local_replica(storage, made)
    local.write_floor = lambda: 0  # type: ignore[method-assign]  # these ids are from 1970
    return local


def mutation(made: Cluster, sequence: int, hlc: int, token: int = 50) -> Mutation:
    table = made.md.keyspaces["tr"].tables["t"]
    return Mutation(
        id=MutationId(node=1, log=1, sequence=sequence, hlc=hlc),
        keyspace="tr",
        table_id=table.id,
        token=token,
        partition_key=f"k{sequence}".encode(),
        rows=(RowWrite(b"", (("v", b"\x00\x00\x00\x01"),)),),
        tracked=True,
    )


def submit(local: LocalReplica, m: Mutation, *, delivered: bool = False) -> asyncio.Future:
    epoch = local.follower.epoch
    return local.apply_soon(epoch, m, mutation_to_body(m), repair=delivered, prepared=True)


def outcomes(replies: list[PeerReply]) -> list[Outcome]:
    return [r.outcome for r in replies]
