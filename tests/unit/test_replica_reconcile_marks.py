"""The reconciliation marks where a replica admits writes to its log (epochal.replica.
reconcile_ops through LocalReplica's group commit, on a real SQLite file): a fence refuses new
writes below it from its place in the queue on and is acknowledged after the writes queued
before it are durable; deliveries pass it; a lease token below the highest seen is refused; a
low bound is advanced only when the agreed digests match, deletes the log below it (never at
it; the data stays) and from then on drops deliveries below it; every mark survives a restart;
a range split from a fenced range inherits the fence."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from epochal.mtrack import MutationId
from epochal.mtrack.reconciliation import agreed_digests
from epochal.replica.codec import mutation_to_body
from epochal.replica.local_replica import LocalReplica, Outcome, PartitionRead, PeerReply
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import Mutation, RowWrite
from epochal.replica.reconcile_ops import AdvanceLowBound, RaiseFence
from epochal.replica.reconcile_store import MarkKind
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
from epochal.tcm.keys import EVERYTHING
from epochal.tcm.tokens import TokenRange
from epochal.wire.channels import Channels
from epochal.wire.log import LogClient

from .seed_ring import Cluster

RING = TokenRange(100, 100)  # one node at token 100: the whole ring is one range


def cluster() -> Cluster:
    made = Cluster({})
    made.apply(
        CreateKeyspace(
            name="tr",
            replication=ReplicationParams.simple(1),
            replication_type=ReplicationType.TRACKED,
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


@pytest.fixture
def storage(tmp_path) -> Iterator[ReplicaStorage]:
    opened = ReplicaStorage(f"sqlite:///{tmp_path}/replica.db")
    yield opened
    opened.close()


def replica(storage: ReplicaStorage, made: Cluster) -> LocalReplica:
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
    local.node_id = made.ids["A"]
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


def test_a_fence_refuses_new_writes_below_it_from_its_place_in_the_queue_on(storage) -> None:
    made = cluster()

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        before = submit(local, mutation(made, 1, hlc=500))  # queued before the fence
        fence = asyncio.ensure_future(
            local.perform(epoch, RaiseFence(keyspace="tr", range=RING, hlc=1000, token=7))
        )
        await asyncio.sleep(0)  # the fence is queued now, behind the first write
        after = [
            submit(local, mutation(made, 2, hlc=999)),  # a new write below it: refused
            submit(local, mutation(made, 3, hlc=1000)),  # at it: admitted
            submit(local, mutation(made, 4, hlc=10), delivered=True),  # a delivery: passes
        ]
        replies = await asyncio.gather(before, fence, *after)
        assert outcomes(replies) == [Outcome.OK] * 2 + [Outcome.FENCED] + [Outcome.OK] * 2
        assert "below the reconciliation fence 1000" in replies[2].message
        held = {i.sequence for i in storage.data.range_ids("tr", 0, 0)}
        assert held == {1, 3, 4}
        # Later writes, in a pass of their own, meet the committed fence.
        assert (await submit(local, mutation(made, 5, hlc=999))).outcome is Outcome.FENCED
        # A token below the highest seen is refused and changes nothing.
        stale = RaiseFence(keyspace="tr", range=RING, hlc=2000, token=6)
        refused = await local.perform(epoch, stale)
        assert refused.outcome is Outcome.SUPERSEDED and "below 7" in refused.message
        assert storage.reconcile.marks("tr", MarkKind.FENCE).of(RING) == 1000

    asyncio.run(scenario())
    reopened = ReplicaStorage(storage.url)
    try:
        assert reopened.reconcile.marks("tr", MarkKind.FENCE).of(RING) == 1000
        assert reopened.reconcile.marks("tr", MarkKind.LEASE).of(RING) == 7
    finally:
        reopened.close()


def test_a_low_bound_needs_the_agreed_digests_and_collects_the_log_below_it(storage) -> None:
    made = cluster()
    written = [mutation(made, s, hlc=100 * s) for s in range(1, 8)]  # hlc 100 .. 700

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        assert (
            outcomes(await asyncio.gather(*(submit(local, m) for m in written))) == [Outcome.OK] * 7
        )
        ids = [m.id for m in written]
        wrong = agreed_digests(ids[1:], old_bound=0, new_bound=400)  # misses one held here
        refused = await local.perform(
            epoch,
            AdvanceLowBound(
                keyspace="tr", range=RING, old_bound=0, new_bound=400, digests=wrong, token=3
            ),
        )
        assert refused.outcome is Outcome.MISMATCH
        assert len(storage.data.range_ids("tr", 0, 0)) == 7  # nothing collected
        agreed = agreed_digests(ids, old_bound=0, new_bound=400)
        done = await local.perform(
            epoch,
            AdvanceLowBound(
                keyspace="tr", range=RING, old_bound=0, new_bound=400, digests=agreed, token=3
            ),
        )
        assert done.outcome is Outcome.OK and done.examined == 3  # ids 100, 200, 300
        assert [i.hlc for i in storage.data.range_ids("tr", 0, 0)] == [400, 500, 600, 700]
        collected = written[0]  # its log entry is gone, its cells stay
        cells = storage.data.read_cells(
            collected.table_id, collected.token, collected.partition_key, EVERYTHING
        )
        assert [c.hlc for c in cells if c.column == "v"] == [100]
        # A read's summary covers the ids at or above the bound, and names it.
        for m, count in ((written[0], 0), (written[4], 1)):
            read = PartitionRead("tr", m.table_id, m.token, m.partition_key)
            reply = await local.read(epoch, read, data=False, summary=True, want_digest=False)
            assert reply.summary is not None and reply.summary.low_bound == 400
            assert sum(d.count for d in reply.summary.logs) == count
        # Deliveries below the bound are dropped as reconciled; at the bound they are stored.
        late = [mutation(made, 20, hlc=399), mutation(made, 21, hlc=400)]
        replies = await asyncio.gather(*(submit(local, m, delivered=True) for m in late))
        assert outcomes(replies) == [Outcome.OK, Outcome.OK]
        assert {i.sequence for i in storage.data.range_ids("tr", 0, 0)} == {4, 5, 6, 7, 21}
        assert local.metrics.mutations_below_low_bound._value.get() == 1

    asyncio.run(scenario())
    reopened = ReplicaStorage(storage.url)
    try:
        assert reopened.reconcile.marks("tr", MarkKind.LOW_BOUND).at(50) == 400
    finally:
        reopened.close()


def test_a_range_split_from_a_fenced_range_inherits_its_fence(storage) -> None:
    made = cluster()

    async def scenario() -> None:
        local = replica(storage, made)
        fenced = await local.perform(
            local.follower.epoch, RaiseFence(keyspace="tr", range=RING, hlc=1000, token=1)
        )
        assert fenced.outcome is Outcome.OK
        made.join("B", 0)  # the ring splits into (0, 100] and (100, 0]
        local.follower._set(made.md, ())
        assert made.md.token_range("tr", 50) == TokenRange(0, 100)
        assert local.node_id in made.md.replica_group("tr", 50, write=True)
        reply = await submit(local, mutation(made, 9, hlc=999, token=50))
        assert reply.outcome is Outcome.FENCED
        assert "range (0, 100]" in reply.message
        assert (await submit(local, mutation(made, 10, hlc=1000, token=50))).outcome is Outcome.OK

    asyncio.run(scenario())
