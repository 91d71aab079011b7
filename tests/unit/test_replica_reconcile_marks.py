"""The reconciliation marks where a replica admits writes to its log (epochal.replica.
reconcile_ops through LocalReplica's group commit, on a real SQLite file): a fence refuses new
writes below it from its place in the queue on and is acknowledged after the writes queued
before it are durable; deliveries pass it; a lease token below the highest seen is refused; a
low bound is advanced only when the agreed digests match, deletes the log below it (never at
it; the data stays) and from then on drops deliveries below it; every mark survives a restart;
a range split from a fenced range inherits the fence; a fetch of an id below the bound answers
it as held."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import grpc
import pytest

from epochal.errors import ClockSkew
from epochal.mtrack import LOGICAL_BITS, LogDigests, MutationId, make_hlc
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.reconciliation import span_digests
from epochal.replica.codec import mutation_from_body, mutation_to_body
from epochal.replica.coordinator import Coordinator
from epochal.replica.identity import node_number
from epochal.replica.ids import MutationIds, wall_ms
from epochal.replica.local_replica import LocalReplica, Outcome, PartitionRead
from epochal.replica.mutations import BadRequest, RowDraft, WriteDraft, check_stored
from epochal.replica.reconcile_ops import AdvanceLowBound, RaiseFence
from epochal.replica.reconcile_store import MarkKind
from epochal.replica.status import code_of
from epochal.replica.storage import ReplicaStorage
from epochal.tcm import (
    ColumnType,
)
from epochal.tcm.consistency import Consistency
from epochal.tcm.keys import EVERYTHING
from epochal.tcm.tokens import TokenRange
from epochal.wire.channels import Channels

from .local_node import RING, cluster, mutation, outcomes, replica, submit
from .seed_ring import Cluster
from .write_drafts import cell


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


def advance(digests: LogDigests, new_bound: int, old: RangeMarks | None = None) -> AdvanceLowBound:
    return AdvanceLowBound(
        keyspace="tr",
        range=RING,
        old_bounds=old or RangeMarks(),
        new_bound=new_bound,
        digests=digests,
        token=3,
    )


def test_a_low_bound_needs_the_agreed_digests_and_collects_the_log_below_it(storage) -> None:
    made = cluster()
    written = [mutation(made, s, hlc=100 * s) for s in range(1, 8)]  # hlc 100 .. 700

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        assert (
            outcomes(await asyncio.gather(*(submit(local, m) for m in written))) == [Outcome.OK] * 7
        )
        entries = [(m.id, m.token) for m in written]
        wrong = span_digests(entries[1:], RangeMarks(), 400)  # misses one held here
        refused = await local.perform(epoch, advance(wrong, 400))
        assert refused.outcome is Outcome.MISMATCH
        assert len(storage.data.range_ids("tr", 0, 0)) == 7  # nothing collected
        done = await local.perform(epoch, advance(span_digests(entries, RangeMarks(), 400), 400))
        assert done.outcome is Outcome.OK and done.examined == 3  # ids 100, 200, 300
        assert [i.hlc for i in storage.data.range_ids("tr", 0, 0)] == [400, 500, 600, 700]
        collected = written[0]  # its log entry is gone, its cells stay
        cells = storage.data.read_cells(
            collected.table_id, collected.token, collected.partition_key, EVERYTHING
        )
        assert [c.hlc for c in cells if c.column == "v"] == [100]
        # A fetch of a collected id answers it as held (with the partition), never as absent.
        fetched = await local.fetch(
            epoch, [collected.id, written[4].id], keyspace="tr", token=collected.token
        )
        assert fetched.held == (collected.id,) and len(fetched.bodies) == 1
        assert (await local.fetch(epoch, [collected.id])).held == ()  # no partition: not said
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
        # The bound fences too: a new write below it is refused, not lost to every summary.
        assert (await submit(local, mutation(made, 30, hlc=399))).outcome is Outcome.FENCED
        # A round that starts from a lower old bound than this replica's is refused.
        entries = [(i, 50) for i in storage.data.range_ids("tr", 0, 0)]
        low = await local.perform(epoch, advance(span_digests(entries, RangeMarks(), 600), 600))
        assert low.outcome is Outcome.MISMATCH and "above the round's old bound" in low.message
        at_400 = RangeMarks().raised(RING, 400)
        higher = await local.perform(
            epoch, advance(span_digests(entries, at_400, 600), 600, at_400)
        )
        assert higher.outcome is Outcome.OK and higher.examined == 3  # hlc 400, 400, 500

    asyncio.run(scenario())
    reopened = ReplicaStorage(storage.url)
    try:
        assert reopened.reconcile.marks("tr", MarkKind.LOW_BOUND).at(50) == 600
        assert reopened.reconcile.marks("tr", MarkKind.FENCE).of(RING) == 600
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


def coordinator_of(local: LocalReplica, made: Cluster) -> Coordinator:
    coordinator = Coordinator(local.settings, local.follower, local, Channels(), local.metrics)
    node_id = made.ids["A"]
    ids = MutationIds(
        node_number(node_id),
        local.storage,
        max_skew_ms=local.settings.max_skew_ms,
        hlc_reserve_ms=local.settings.hlc_reserve_ms,
        sequence_block=local.settings.sequence_block,
    )
    coordinator.attach(node_id, ids)
    return coordinator


def draft(value: int) -> WriteDraft:
    return WriteDraft(
        keyspace="tr",
        table="t",
        partition_key=("p",),
        rows=(RowDraft((), (cell("v", value, ColumnType.INT),)),),
    )


def test_a_fenced_write_is_retried_under_a_fresh_id_keeping_its_first_time(storage) -> None:
    """The coordinator moves past the fence and retries with a fresh id; the client sees
    success. A client's retry of an old write (one this replica no longer holds: the low bound
    collected it) keeps that write's time, so it does not overwrite a write acknowledged in
    between."""
    made = cluster()

    async def scenario() -> None:
        local = replica(storage, made)
        coordinator = coordinator_of(local, made)
        epoch = local.follower.epoch

        async def write(value: int, retry_of: MutationId | None = None):  # type: ignore[no-untyped-def]
            return await coordinator.write(
                draft(value),
                Consistency.ONE,
                client_epoch=epoch,
                session_hlc=0,
                retry_of=retry_of,
            )

        first = await write(1)
        between = await write(3)  # acknowledged after the first, before its retry
        fence = between.mutation_id.hlc + (50 << LOGICAL_BITS)  # 50 ms past both
        entries = storage.data.range_ids_by_token("tr", 0, 0)
        collected = await local.perform(  # a low bound fences too
            epoch, advance(span_digests(entries, RangeMarks(), fence), fence)
        )
        assert collected.outcome is Outcome.OK and collected.examined == 2
        retried = await write(1, retry_of=first.mutation_id)  # the client's retry of the first
        assert retried.mutation_id != first.mutation_id and retried.mutation_id.hlc >= fence
        assert local.metrics.writes_fenced._value.get() == 1
        [body] = storage.data.mutation_bodies([retried.mutation_id])
        stored = mutation_from_body(body)
        assert stored.timestamp == first.mutation_id.hlc  # the first attempt's time
        cells = storage.data.read_cells(
            stored.table_id, stored.token, stored.partition_key, EVERYTHING
        )
        [value] = [c for c in cells if c.column == "v"]
        assert value.hlc == between.mutation_id.hlc  # the write in between still wins
        fresh = await write(4)  # a new write: its id is issued past the fence already
        assert fresh.mutation_id.hlc > fence
        assert local.metrics.writes_fenced._value.get() == 1

    asyncio.run(scenario())


def test_a_retry_of_a_write_held_here_is_acknowledged_below_the_fence_and_the_floor(
    storage,
) -> None:
    """A new write whose id this replica holds already, the same, is durable here: answered OK
    under its own id, below a fence or older than the write timeout, and nothing is stored. One
    it does not hold, or holds with other content, is still refused."""
    made = cluster()
    now = make_hlc(wall_ms())
    old = mutation(made, 1, hlc=now - (10_000 << LOGICAL_BITS))  # ten seconds old
    fenced = mutation(made, 2, hlc=now - (1_000 << LOGICAL_BITS))  # one second old

    async def scenario() -> None:
        local = replica(storage, made)
        assert (
            outcomes(await asyncio.gather(submit(local, old), submit(local, fenced)))
            == [Outcome.OK] * 2
        )
        assert local.metrics.mutations_duplicate._value.get() == 0
        del local.write_floor  # the real one: the write timeout (2 s) ago; old is below it
        fence = RaiseFence(keyspace="tr", range=RING, hlc=now, token=1)
        assert (await local.perform(local.follower.epoch, fence)).outcome is Outcome.OK
        # The retries: both held here, so both acknowledged, nothing stored.
        retries = await asyncio.gather(submit(local, old), submit(local, fenced))
        assert outcomes(retries) == [Outcome.OK, Outcome.OK]
        assert local.metrics.mutations_duplicate._value.get() == 2
        assert {i.sequence for i in storage.data.range_ids("tr", 0, 0)} == {1, 2}
        # Not held here: refused as before, by the floor and by the fence.
        not_held = await asyncio.gather(
            submit(local, mutation(made, 3, hlc=old.id.hlc)),
            submit(local, mutation(made, 4, hlc=fenced.id.hlc)),
        )
        assert outcomes(not_held) == [Outcome.FENCED, Outcome.FENCED]
        assert "older than the write timeout" in not_held[0].message
        assert "below the reconciliation fence" in not_held[1].message
        # Held with other content: refused too, and still nothing stored.
        other = replace(fenced, partition_key=b"elsewhere")
        assert (await submit(local, other)).outcome is Outcome.FENCED
        assert {i.sequence for i in storage.data.range_ids("tr", 0, 0)} == {1, 2}
        assert local.metrics.mutations_duplicate._value.get() == 2

    asyncio.run(scenario())


def test_a_mutations_own_time_travels_with_it_and_is_never_after_its_id() -> None:
    made = cluster()
    retried = replace(mutation(made, 1, hlc=900), timestamp=500)
    assert mutation_from_body(mutation_to_body(retried)) == retried
    assert {c.hlc for c in retried.cells()} == {500}
    keyspace = made.md.keyspaces["tr"]
    table = keyspace.tables["t"]
    with pytest.raises(BadRequest, match="after its id's"):
        check_stored(
            keyspace,
            table,
            replace(retried, timestamp=901),
            issued_nodes=made.md.next_node_number,
            max_value_bytes=100,
            max_mutation_bytes=1000,
        )


def test_an_operation_no_reconciler_could_send_is_refused_as_malformed(storage) -> None:
    made = cluster()

    async def scenario() -> None:
        local = replica(storage, made)
        queued = submit(local, mutation(made, 1, hlc=500))
        for op in (
            RaiseFence(keyspace="tr", range=RING, hlc=1 << 63, token=1),
            RaiseFence(keyspace="tr", range=RING, hlc=5, token=-1),
            RaiseFence(keyspace="tr", range=TokenRange(0, 1 << 64), hlc=5, token=1),
        ):
            refused = await local.perform(local.follower.epoch, op)
            assert refused.outcome is Outcome.MALFORMED, op
        assert (await queued).outcome is Outcome.OK  # the writes around it are unharmed

    asyncio.run(scenario())


def test_a_write_queued_behind_a_low_bound_in_the_same_pass_is_fenced_by_it(storage) -> None:
    """Otherwise it would be stored, then its log entry deleted below the bound: acknowledged
    and invisible to every summary."""
    made = cluster()

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        held = mutation(made, 1, hlc=100)
        assert (await submit(local, held)).outcome is Outcome.OK
        digests = span_digests([(held.id, held.token)], RangeMarks(), 400)
        bound = asyncio.ensure_future(local.perform(epoch, advance(digests, 400)))
        await asyncio.sleep(0)  # the advance is queued; the write goes behind it
        late = submit(local, mutation(made, 2, hlc=300))
        advanced, refused = await asyncio.gather(bound, late)
        assert advanced.outcome is Outcome.OK
        assert refused.outcome is Outcome.FENCED and refused.fence == 400
        assert storage.data.range_ids("tr", 0, 0) == []

    asyncio.run(scenario())


def test_a_fence_the_coordinators_clock_cannot_pass_fails_the_write_clearly(storage) -> None:
    """A fence further ahead of the coordinator's clock than the allowed skew (a reconciler's
    fence is behind every replica's clock, so this coordinator's clock is far behind): the write
    fails with ClockSkew (FAILED_PRECONDITION), naming the skew, instead of retrying."""
    made = cluster()

    async def scenario() -> None:
        local = replica(storage, made)
        coordinator = coordinator_of(local, made)
        epoch = local.follower.epoch
        ahead = make_hlc(wall_ms() + 10 * local.settings.max_skew_ms + 60_000)
        fence = RaiseFence(keyspace="tr", range=RING, hlc=ahead, token=1)
        assert (await local.perform(epoch, fence)).outcome is Outcome.OK
        with pytest.raises(ClockSkew) as skewed:
            await coordinator.write(
                draft(1), Consistency.ONE, client_epoch=epoch, session_hlc=0, retry_of=None
            )
        assert code_of(skewed.value) is grpc.StatusCode.FAILED_PRECONDITION
        assert "ahead" in skewed.value.message
        assert local.metrics.writes_fenced._value.get() == 0

    asyncio.run(scenario())


def test_a_new_write_older_than_the_write_timeout_is_fenced_where_no_fence_is(storage) -> None:
    """A replica new to a range holds no fence for it; the write timeout fences it anyway, so a
    client's retry of an old id (below the others' low bound, maybe) is retried past it, not
    stored alone where no round would ever compare it. Deliveries still pass."""
    made = cluster()
    now = make_hlc(wall_ms())
    old = mutation(made, 1, hlc=now - (10_000 << LOGICAL_BITS))  # ten seconds old

    async def scenario() -> None:
        local = replica(storage, made)
        del local.write_floor  # the real one: the write timeout (2 s) ago
        assert storage.reconcile.marks("tr", MarkKind.FENCE).pieces == ()
        refused = await submit(local, old)
        assert refused.outcome is Outcome.FENCED and refused.fence > old.id.hlc
        assert (await submit(local, mutation(made, 2, hlc=now))).outcome is Outcome.OK
        assert (await submit(local, old, delivered=True)).outcome is Outcome.OK
        assert {i.sequence for i in storage.data.range_ids("tr", 0, 0)} == {1, 2}

    asyncio.run(scenario())
