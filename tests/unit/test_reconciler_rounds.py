"""The reconciler's rounds (epochal.reconciler.rounds) over a backlog, in windows, against an
in-memory model of the replicas' side of the calls (their logs of one range, bounds, fences; the
same summaries, sketches and digest check the replicas use): the backlog walk reaches every id a
replica lacks, also while every advance fails; advances stop at a window's end and follow each
other until the bound reaches the reconciliation time, collecting every log; a replica that
reports no window ends (an older one) is reconciled as before. The real processes are
tests/integration/test_reconciler.py's."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from epochal.mtrack import LogDigests, MutationId, Sketch, make_hlc
from epochal.mtrack.cohorts import Cohort, CohortMark, finished
from epochal.mtrack.hlc import physical_ms_of
from epochal.mtrack.leases import HolderLease
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.range_calls import Delivered, RangeRef, RangeState
from epochal.mtrack.reconciliation import span_digests
from epochal.reconciler.pacing import SIZES_EVERY_S, Pacer, RangePace
from epochal.reconciler.replica_client import ReplicaClient, ReplicaRefused, Unreachable
from epochal.reconciler.rounds import Round, RoundResult
from epochal.tcm.tokens import TokenRange
from epochal.wire.v1 import replica_pb2 as pb

RANGE = TokenRange(0, 1_000)
NOW_MS = 10_000_000
WINDOW = 50
BACKLOG = 1_000  # ids, all older than the recent window


class Replica:
    def __init__(self, clock_ms: int, *, windows: bool = True) -> None:
        self.ids: dict[MutationId, int] = {}  # id -> token
        self.bounds = RangeMarks()
        self.fence = 0
        self.clock_ms = clock_ms
        self.windows = windows
        self.refuse_advances = False
        self.refuse_fences = False
        self.largest_collection = 0
        # Cohorts (test_reconciler_cohorts.py): cut off from the reconciler; the cohorts held;
        # the ids whose data this replica holds (its log forgets folded and collected ones).
        self.reachable = True
        self.cut: set[str] = set()  # peers it cannot reach (the two sides of a partition)
        self.cohorts: dict[int, Cohort] = {}
        self.applied: set[MutationId] = set()
        self.tagged: dict[int, set[MutationId]] = {}  # cohort -> the ids its folds tagged here

    def above_bound(self, start: int = 0) -> list[MutationId]:
        return [i for i, t in self.ids.items() if i.hlc >= max(self.bounds.at(t), start)]


class Model:
    """The replicas' answers to a ReplicaClient's calls, as ``ReconcileNode`` gives them."""

    def __init__(self, replicas: dict[str, Replica]) -> None:
        self.replicas = replicas

    def _reach(self, address: str) -> Replica:
        replica = self.replicas[address]
        if not replica.reachable:
            raise Unreachable(address, "cut off (the test's)")
        return replica

    async def state(
        self,
        address: str,
        ref: RangeRef,
        *,
        claim: bool = False,
        lease_ms: int = 0,
        sizes: bool = False,
        window_ids: int = 0,
        window_from: Sequence[int] = (),
    ) -> RangeState:
        replica = self._reach(address)
        ends: list[int] = []
        for start in window_from if replica.windows else ():
            hlcs = sorted(i.hlc for i in replica.above_bound(start))
            ends.append(hlcs[window_ids] if len(hlcs) > window_ids else 0)
        return RangeState(
            hlc=make_hlc(replica.clock_ms),
            fence=replica.fence,
            low_bounds=replica.bounds,
            lease_token=1,
            lease_idle_ms=0.0,
            log_entries=len(replica.ids),
            log_bytes=0,
            window_ends=tuple(ends) or (0,) * len(window_from),  # as the real client reads it
            cohorts=tuple(replica.cohorts.values()),
            unreachable_peers=tuple(sorted(replica.cut)),
        )

    async def summary(
        self,
        address: str,
        ref: RangeRef,
        low_bounds: RangeMarks,
        *,
        below: int = 0,
        sketch_logs: Sequence[tuple[int, int]] = (),
        sketch_cells: int = 0,
    ) -> tuple[LogDigests, Sketch | None]:
        replica = self._reach(address)
        ids = [
            i
            for i, t in replica.ids.items()
            if max(replica.bounds.at(t), low_bounds.at(t)) <= i.hlc < below
        ]
        if not sketch_cells:
            return LogDigests.of(ids), None
        wanted = set(sketch_logs)
        return LogDigests.of(ids), Sketch.of([i for i in ids if i.log_key in wanted], sketch_cells)

    async def deliver(
        self, address: str, ref: RangeRef, target: str, ids: Sequence[MutationId]
    ) -> Delivered:
        source, into = self._reach(address), self.replicas[target]
        assert target not in source.cut, "a round delivers only between replicas that reach"
        held = [i for i in ids if i in source.ids]
        for mutation_id in held:
            if mutation_id.hlc >= into.bounds.at(source.ids[mutation_id]):
                into.ids[mutation_id] = source.ids[mutation_id]
                into.applied.add(mutation_id)
        return Delivered(len(held), 0, len(ids) - len(held), 0)

    async def fence(self, address: str, ref: RangeRef, hlc: int) -> int:
        replica = self._reach(address)
        if replica.refuse_fences:
            raise ReplicaRefused(address, "not_a_replica", "refusing every fence (the test's)")
        replica.fence = max(replica.fence, hlc)
        return replica.fence

    async def advance(
        self,
        address: str,
        ref: RangeRef,
        bounds: RangeMarks,
        t: int,
        digests: LogDigests,
        cohorts: Sequence[CohortMark] = (),
    ) -> int:
        replica = self._reach(address)
        if replica.refuse_advances:
            raise ReplicaRefused(address, "mismatch", "refusing every advance (the test's)")
        own = [c.mark for c in replica.cohorts.values() if not finished(c, bounds)]
        if sorted(own) != sorted(cohorts):
            raise ReplicaRefused(address, "mismatch", "other cohorts")
        collected = self._collect(address, replica, ref, bounds, t, digests)
        replica.bounds = replica.bounds.raised(ref.range, t)
        for cohort in list(replica.cohorts.values()):
            if replica.bounds.lowest(cohort.range) >= cohort.high:
                del replica.cohorts[cohort.id]
        return collected

    async def fold(
        self,
        address: str,
        ref: RangeRef,
        bounds: RangeMarks,
        t: int,
        digests: LogDigests,
        cohort: Cohort,
    ) -> int:
        replica = self._reach(address)
        assert address in cohort.members
        below = {i for i in replica.ids if i.hlc < t}
        folded = self._collect(address, replica, ref, bounds, t, digests)
        replica.tagged.setdefault(cohort.id, set()).update(below)
        held = replica.cohorts.get(cohort.id)
        high = max(t, held.high if held else 0)
        replica.cohorts[cohort.id] = replace(cohort, high=high, folded=high)
        return folded

    def _collect(
        self,
        address: str,
        replica: Replica,
        ref: RangeRef,
        bounds: RangeMarks,
        t: int,
        digests: LogDigests,
    ) -> int:
        assert bounds.lowest(ref.range) <= t, "a low bound only rises"
        assert replica.bounds.at_most(bounds, ref.range)
        if span_digests(replica.ids.items(), bounds, t) != digests:
            raise ReplicaRefused(address, "mismatch", "digests differ")
        collected = [i for i, token in replica.ids.items() if i.hlc < t]
        for mutation_id in collected:
            del replica.ids[mutation_id]
        replica.fence = max(replica.fence, t)
        replica.largest_collection = max(replica.largest_collection, len(collected))
        return len(collected)

    async def deliver_cohort(
        self, address: str, ref: RangeRef, cohort: Cohort, target: str
    ) -> tuple[int, int]:
        source, into = self._reach(address), self._reach(target)
        assert address in cohort.members and source.cohorts[cohort.id].folded >= cohort.high
        data = source.tagged[cohort.id]  # the cells its folds tagged, in the model
        into.applied |= data
        return len(data), 10 * len(data)

    async def hold(self, address: str, ref: RangeRef, cohort: Cohort) -> None:
        replica = self._reach(address)
        held = replica.cohorts.get(cohort.id)
        replica.cohorts[cohort.id] = replace(
            cohort,
            high=max(cohort.high, held.high if held else 0),
            folded=held.folded if held else 0,  # a delivery folds nothing here
        )


def backlog(rng: random.Random) -> dict[MutationId, int]:
    """``BACKLOG`` ids of 4 coordinators, a minute to a few seconds old: a backlog the recent
    window does not reach."""
    start = NOW_MS - 60_000
    return {
        MutationId(
            node=n % 4 + 1, log=1, sequence=n + 1, hlc=make_hlc(start + n * 50)
        ): rng.randrange(1, 1_000)
        for n in range(BACKLOG)
    }


def cluster(*, windows: tuple[bool, ...] = (True, True, True)) -> tuple[Model, set[MutationId]]:
    rng = random.Random(7)
    every = backlog(rng)
    replicas = {name: Replica(NOW_MS, windows=w) for name, w in zip("abc", windows, strict=True)}
    for replica in replicas.values():
        replica.ids = dict(every)
    for mutation_id in rng.sample(sorted(every, key=lambda i: i.key), BACKLOG * 3 // 10):
        del replicas["c"].ids[mutation_id]  # c missed 30% of the writes
    for replica in replicas.values():
        replica.applied = set(replica.ids)
    return Model(replicas), set(every)


def rounds(
    model: Model,
    count: int,
    *,
    advance: bool = True,
    cohort_after_s: float = 3.0,
    pace: RangePace | None = None,
    results: list[RoundResult] | None = None,
    start: float = 0.0,
) -> list[str]:
    """``count`` rounds of the range, paced as the worker paces them, a second apart from
    ``start``."""
    pace = pace or RangePace(advance_s=0.0)
    outcomes = []

    async def one(at: float) -> None:
        lease = HolderLease(token=1, lease_ms=10_000, margin_ms=1_000)
        round_ = Round(
            RangeRef(1, "ks", RANGE, 1, tuple(model.replicas)),
            {name: name for name in model.replicas},
            model,  # type: ignore[arg-type]
            lease,
            Pacer(1_000_000),
            lambda: True,
            500,  # write timeout
            1_000,  # slack
            100,  # batch
            WINDOW,
            250,  # interval
            advance=advance and pace.advance_due(at),
            cursor=pace.cursor,
            sizes=pace.sizes_due(at),
            may_skip=pace.went_well,
            fold_sides=pace.fold_sides(at, cohort_after_s),
            turn=pace.turn,
        )
        result = await round_.run()
        pace.after(at, result, advance=round_.advance, sizes=round_.sizes)
        outcomes.append(result.outcome)
        if results is not None:
            results.append(result)

    for n in range(count):
        asyncio.run(one(start + float(n)))
    return outcomes


def test_the_backlog_walk_delivers_every_missing_id_in_windows() -> None:
    model, every = cluster()
    outcomes = rounds(model, BACKLOG // WINDOW + 2, advance=False)
    assert set(model.replicas["c"].ids) == every, "c holds every id the others hold"
    assert set(outcomes) == {"delivered"}


@pytest.mark.parametrize("refusing", ["refuse_advances", "refuse_fences"])
def test_the_walk_goes_on_while_every_advance_fails(refusing: str) -> None:
    model, every = cluster()
    for replica in model.replicas.values():
        setattr(replica, refusing, True)  # digests that never agree; a range that changed
    outcomes = rounds(model, 2 * (BACKLOG // WINDOW) + 4)
    assert set(model.replicas["c"].ids) == every
    assert "advanced" not in outcomes and "refused" in outcomes


def test_a_ranges_pace_between_rounds() -> None:
    pace = RangePace(advance_s=5.0)
    assert pace.advance_due(0.0) and pace.sizes_due(0.0)  # the first round does both
    capped = RoundResult(outcome="advanced", capped=True, compared=True, next_cursor=7)
    pace.after(100.0, capped, advance=True, sizes=True)
    assert pace.cursor == 7 and pace.went_well
    assert pace.advance_due(100.1)  # stopped at a window's end: the next advances at once
    assert not pace.sizes_due(100.1) and pace.sizes_due(100.0 + SIZES_EVERY_S)
    pace.after(101.0, RoundResult(outcome="advanced", compared=True), advance=True, sizes=False)
    assert not pace.advance_due(105.9) and pace.advance_due(106.0)
    assert pace.cursor == 0
    pace.after(107.0, RoundResult(outcome="unavailable"), advance=False, sizes=False)
    assert pace.cursor == 0 and not pace.went_well  # nothing compared: the walk stays
    pace.after(108.0, None, advance=False, sizes=False)
    assert not pace.went_well


def test_a_replica_answering_no_window_ends_reads_as_no_end() -> None:
    class Stub:
        def __init__(self, ends: list[int]) -> None:
            self.ends = ends

        async def RangeState(self, request: object, timeout: float) -> pb.RangeStateResponse:
            return pb.RangeStateResponse(outcome=pb.OK, hlc=5, window_ends=self.ends)

    class StubChannels:
        def __init__(self, ends: list[int]) -> None:
            self.stub = Stub(ends)

        def reconcile(self, address: str) -> Stub:
            return self.stub

    ref = RangeRef(1, "ks", RANGE, 1, ("a",))

    def state(ends: list[int], starts: tuple[int, ...]) -> RangeState:
        client = ReplicaClient(StubChannels(ends), timeout_s=1.0)  # type: ignore[arg-type]
        return asyncio.run(client.state("a", ref, window_ids=5, window_from=starts))

    assert state([], (3, 0)).window_ends == (0, 0)  # an older replica: no windows
    assert state([9, 4], (3, 0)).window_ends == (9, 4)
    with pytest.raises(ReplicaRefused, match="1 window ends for 2"):
        state([9], (3, 0))


def test_advances_stop_at_window_ends_and_follow_until_every_log_is_collected() -> None:
    model, every = cluster()
    rounds(model, 3 * (BACKLOG // WINDOW) + 4)
    t_full = make_hlc(NOW_MS - 500 - 1_000)
    for name, replica in model.replicas.items():
        assert replica.bounds.lowest(RANGE) == t_full, name  # the whole backlog, in steps
        assert not replica.ids, name  # every id was below t: all collected
        # An advance collects about a window (the ids below its end on the replica that
        # reported it, plus what the collection delivered to the others).
        assert 0 < replica.largest_collection <= 3 * WINDOW, name
    assert physical_ms_of(max(every, key=lambda i: i.hlc).hlc) < NOW_MS - 1_500


def test_a_replica_without_window_ends_is_reconciled_whole() -> None:
    model, every = cluster(windows=(False, False, False))
    rounds(model, 3)
    assert set(model.replicas["c"].ids) <= every
    for replica in model.replicas.values():
        assert not replica.ids and replica.bounds.lowest(RANGE) == make_hlc(NOW_MS - 1_500)
