"""Cohorts at a replica (epochal.replica.reconcile_ops through LocalReplica's group commit, on a
real SQLite file): a fold needs the agreed digests, deletes the log below its time (the data
stays), records the cohort and the partitions it folded, fences, and leaves the low bound; a
read's summary names the cohorts held at its token; an advance is refused unless it names
exactly the cohorts held, and forgets those the new bound passes; a delivered cohort is recorded
by a hold; all of it survives a restart."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from epochal.mtrack.cohorts import Cohort, CohortMark
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.reconciliation import span_digests
from epochal.replica.local_replica import Outcome, PartitionRead
from epochal.replica.reconcile_ops import AdvanceLowBound, FoldCohort, HoldCohort
from epochal.replica.reconcile_store import MarkKind
from epochal.replica.storage import ReplicaStorage
from epochal.tcm.keys import EVERYTHING

from .local_node import RING, cluster, mutation, outcomes, replica, submit


def test_a_fold_collects_into_the_cohort_and_the_advance_must_name_it(storage) -> None:
    made = cluster()
    me = made.ids["A"]
    written = [mutation(made, s, hlc=100 * s) for s in range(1, 8)]  # hlc 100 .. 700
    cohort = Cohort(
        id=77, keyspace="tr", range=RING, members=tuple(sorted([me, "Z"])), low=0, high=0
    )

    def fold(
        digests, t: int, node: str = me, which: Cohort = cohort, old: RangeMarks | None = None
    ) -> FoldCohort:
        return FoldCohort(
            keyspace="tr",
            range=RING,
            old_bounds=old or RangeMarks(),
            new_bound=t,
            digests=digests,
            token=3,
            cohort=which,
            node_id=node,
        )

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        assert (
            outcomes(await asyncio.gather(*(submit(local, m) for m in written))) == [Outcome.OK] * 7
        )
        entries = [(m.id, m.token) for m in written]
        agreed = span_digests(entries, RangeMarks(), 400)
        wrong = span_digests(entries[1:], RangeMarks(), 400)
        assert (await local.perform(epoch, fold(wrong, 400))).outcome is Outcome.MISMATCH
        stranger = await local.perform(epoch, fold(agreed, 400, node="Y"))
        assert stranger.outcome is Outcome.MISMATCH and "not a member" in stranger.message
        done = await local.perform(epoch, fold(agreed, 400))
        assert done.outcome is Outcome.OK and done.examined == 3  # ids 100, 200, 300 folded
        assert [i.hlc for i in storage.data.range_ids("tr", 0, 0)] == [400, 500, 600, 700]
        held = storage.reconcile.cohort("tr", 77)
        assert held is not None and held.high == 400 and held.mutations == 3 and held.bytes > 0
        assert storage.reconcile.marks("tr", MarkKind.LOW_BOUND).at(50) == 0, "no low bound"
        assert storage.reconcile.marks("tr", MarkKind.FENCE).of(RING) == 400
        table_id = written[0].table_id
        # the partitions the folded mutations wrote are recorded as the cohort's data
        recorded = storage.streams.scan_cohort(77, None, 100)
        assert recorded == sorted((table_id, m.token, m.partition_key) for m in written[:3])
        newer = replace(written[1], id=replace(written[1].id, sequence=99, hlc=450))
        assert (await submit(local, newer)).outcome is Outcome.OK  # (sent whole: still there)
        assert storage.streams.scan_cohort(77, None, 100) == recorded
        first = written[0]  # its data stays
        cells = storage.data.read_cells(
            first.table_id, first.token, first.partition_key, EVERYTHING
        )
        assert [c.hlc for c in cells if c.column == "v"] == [100]
        # A read's summary names the cohort; its ids are no longer listed.
        read = PartitionRead("tr", first.table_id, first.token, first.partition_key)
        reply = await local.read(epoch, read, data=False, summary=True, want_digest=False)
        assert reply.cohorts == (CohortMark(77, 400),)
        assert reply.summary is not None and not reply.summary.logs
        # A second fold of the same cohort extends it.
        rest = [(i, 50) for i in storage.data.range_ids("tr", 0, 0)]
        again = await local.perform(epoch, fold(span_digests(rest, RangeMarks(), 600), 600))
        assert again.examined == 3  # 400, 450 (the newer write), 500
        held = storage.reconcile.cohort("tr", 77)
        assert held is not None and (held.high, held.mutations) == (600, 6)
        # An advance must name the cohorts held: none, or another high, is refused.
        rest = [(i, 50) for i in storage.data.range_ids("tr", 0, 0)]
        for named in ((), (CohortMark(77, 400),)):
            refused = await local.perform(epoch, advance(rest, 650, named))
            assert refused.outcome is Outcome.MISMATCH and "cohorts" in refused.message
        # Below the cohort's high the advance keeps it; at or above, it ends.
        kept = await local.perform(epoch, advance(rest, 500, (CohortMark(77, 600),)))
        assert kept.outcome is Outcome.OK and storage.reconcile.cohort("tr", 77) is not None
        rest = [(i, 50) for i in storage.data.range_ids("tr", 0, 0)]
        ended = await local.perform(
            epoch, advance(rest, 650, (CohortMark(77, 600),), RangeMarks().raised(RING, 500))
        )
        assert ended.outcome is Outcome.OK and storage.reconcile.cohort("tr", 77) is None
        assert storage.streams.scan_cohort(77, None, 100) == []  # its partitions went too
        # A delivered cohort is recorded by a hold (its high only rises).
        other = replace(cohort, id=88, members=("X", "Y"), high=900)
        hold = HoldCohort(keyspace="tr", range=RING, token=3, cohort=other)
        assert (await local.perform(epoch, hold)).outcome is Outcome.OK
        lower = HoldCohort(keyspace="tr", range=RING, token=3, cohort=replace(other, high=10))
        assert (await local.perform(epoch, lower)).outcome is Outcome.OK
        assert storage.reconcile.cohort_marks_at("tr", 50) == (CohortMark(88, 900),)
        # A hold of a cohort this replica folded raises its high, not how far its folds went:
        # it sends only what its folds recorded.
        mine = replace(cohort, id=55, low=650, high=650)
        rest = [(i, 50) for i in storage.data.range_ids("tr", 0, 0)]
        old = RangeMarks().raised(RING, 650)
        folded = await local.perform(
            epoch, fold(span_digests(rest, old, 700), 700, which=mine, old=old)
        )
        assert folded.outcome is Outcome.OK, folded.message
        bigger = HoldCohort(
            keyspace="tr", range=RING, token=3, cohort=replace(mine, high=950, folded=950)
        )
        assert (await local.perform(epoch, bigger)).outcome is Outcome.OK
        held = storage.reconcile.cohort("tr", 55)
        assert held is not None and (held.high, held.folded) == (950, 700)

    asyncio.run(scenario())
    reopened = ReplicaStorage(storage.url)
    try:
        assert reopened.reconcile.cohort_marks_at("tr", 50) == (
            CohortMark(55, 950),
            CohortMark(88, 900),
        )
        kept = reopened.reconcile.cohort("tr", 55)
        assert kept is not None and kept.folded == 700
        assert reopened.reconcile.cohorts("tr")[1].members == ("X", "Y")
    finally:
        reopened.close()


def advance(
    entries, new_bound: int, cohorts: tuple[CohortMark, ...], old: RangeMarks | None = None
) -> AdvanceLowBound:
    old = old or RangeMarks()
    return AdvanceLowBound(
        keyspace="tr",
        range=RING,
        old_bounds=old,
        new_bound=new_bound,
        digests=span_digests(entries, old, new_bound),
        token=3,
        cohorts=cohorts,
    )
