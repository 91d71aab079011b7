"""One reconciliation round of one token range, driven against its replicas (the plan is
``epochal.mtrack.reconciliation``'s; this module makes the calls).

Theory of operation
-------------------
A round runs under the reconciler's lease on the range (``leases``) and checks before every
action that the lease still allows acting (``HolderLease.may_act``) and that the range is still
the same — its split points and groups at the follower's newest epoch; a round whose range
changed is abandoned (its fences stay; a fence never hurts).

1. **State**: every replica's clock, fence and low bounds (each call a claim: it renews the
   lease there), and where windows of ``window_ids`` ids end there (``epochal.mtrack.windows``:
   from the backlog cursor, and from the bound when the round advances). The round's bounds
   are, per token, the highest any replica holds (a replica summarizes from the higher of its
   own and these).
2. **Deliver**: summaries of the recent window and the backlog window (``compare_windows``),
   each compared with the pivot's (digests, then sketches sized by the difference, doubled until
   they decode; the other replicas at once), ``holders`` and ``deliveries``: each missing id to
   each replica lacking it, batched, from the holder given the least so far, over the source's
   peer stream to the target. A round that advances from the bound leaves the backlog window to
   its collection (4), which compares the same ids after the fence.
3. **t** = the lowest replica clock less the write timeout and the slack, and not below any
   replica's fence, and no further than the window from the bound ends (``capped_time``: the
   worker advances again at once when it stopped short). Nothing more when *t* does not pass the
   lowest bound.
4. **Fence** every replica at *t*; then **collect**: summaries below *t*, compared and delivered
   as in 2, until every replica reports the same digests (a few tries; the last comparison's
   digests, when alike, are the advance's).
5. **Advance** every replica's low bound to *t* with those digests (a replica whose own differ
   refuses: the next round starts again from its bounds).

A replica that does not answer the state call — no answer at all, by its deadline: a refusal
or an overload ends the round instead (``status``) — is left out: the others (at least two)
still compare and deliver among themselves ("partial"), and once the rounds have found that same
side apart from the rest for ``--cohort-after-ms`` (``fold_sides``: the worker's ``RangePace``
keeps since when, per side) they fence, collect and *fold* their ids below *t* into their cohort
instead of advancing the low bound (``epochal.mtrack.cohorts``; outcome "cohort"). Another side
— a different replica left out, even for one round — starts its own clock. When every replica
answers again and some lack a cohort another holds, the cohort's data goes to them first
(``cohort_rounds``), and the advance carries the cohorts they all hold. A refusal for the lease
ends a round as "superseded" and the reconciler steps back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from epochal.errors import EpochalError
from epochal.mtrack import (
    MAX_SKETCH_ROUNDS,
    Difference,
    LogDigests,
    Undecodable,
    cells_for,
    difference,
    differing_logs,
    more_cells,
)
from epochal.mtrack.cohorts import Cohort, reach_groups
from epochal.mtrack.leases import HolderLease
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.range_calls import RangeRef, RangeState
from epochal.mtrack.reconciliation import deliveries, holders, reconciliation_time
from epochal.mtrack.windows import capped_time, compare_windows, lowest_end, recent_ms
from epochal.reconciler.cohort_rounds import deliver_cohorts, formed_cohort, held_high
from epochal.reconciler.pacing import Pacer
from epochal.reconciler.replica_client import ReplicaClient
from epochal.reconciler.status import (
    ReplicaOverloaded,
    ReplicaRefused,
    Unreachable,
    VersionMismatch,
)
from epochal.telemetry import attributes as attr

log = logging.getLogger(__name__)

T = TypeVar("T")
COLLECT_TRIES = 3
DELIVERIES_AT_ONCE = 4


class RoundEnded(Exception):
    """The round stops here; ``outcome`` says why."""

    def __init__(self, outcome: str, detail: str = "") -> None:
        super().__init__(f"{outcome}: {detail}" if detail else outcome)
        self.outcome = outcome
        self.detail = detail


@dataclass(slots=True)
class RoundResult:
    outcome: str = "running"
    reconciliation_time: int = 0
    low_bound: int = 0  # the bound every replica holds over the whole range after the round
    delivered: int = 0
    delivered_bytes: int = 0
    missing: int = -1  # (id, replica) pairs missing at the first comparison (-1: none made)
    acted_unix_ms: int = 0  # when the replicas last accepted a call of the round
    collected: int = 0
    # Where the next round's backlog window starts, once this round compared its windows
    # (``compared``; else the walk stays where it was).
    next_cursor: int = 0
    compared: bool = False
    capped: bool = False  # the advance stopped at a window's end, short of the reconciliation time
    unreachable: tuple[str, ...] = ()  # replicas left out (no answer, or on another side)
    whole: bool = False  # every replica answered the state call, and all reach each other
    # The sides (of two replicas or more) a split range's replicas formed this round.
    sides: tuple[tuple[str, ...], ...] = ()
    # The replicas that answered the state call, whatever they answered (a refusal too).
    answered: tuple[str, ...] = ()
    cohort: Cohort | None = None  # the cohort folded into (outcome "cohort")
    cohorts: tuple[Cohort, ...] = ()  # the cohorts the replicas reported holding
    cohort_holders: dict[int, tuple[str, ...]] = field(default_factory=dict)
    cohort_cells: int = 0  # cohort data delivered to replicas lacking it
    cohort_bytes: int = 0
    log_entries: dict[str, int] = field(default_factory=dict)
    log_bytes: dict[str, int] = field(default_factory=dict)
    detail: str = ""


@dataclass(eq=False, repr=False)
class Round:
    ref: RangeRef
    replicas: Mapping[str, str]  # node id -> address
    client: ReplicaClient
    lease: HolderLease
    pacer: Pacer
    still_same: Callable[[], bool]  # the range's split points and groups are unchanged
    write_timeout_ms: int
    slack_ms: int
    batch: int
    window_ids: int
    interval_ms: int
    advance: bool = True  # fence, collect and advance after delivering (else deliver only)
    cursor: int = 0  # where the backlog walk stands (``epochal.mtrack.windows``; 0: the bound)
    sizes: bool = False  # also count each replica's log of the range (a scan of it: now and then)
    may_skip: bool = True  # the last round of the range ended well (``_run``, 2)
    # The sides (sorted node ids) that earlier rounds found apart from the others long enough
    # that this round, working one of them, may fold a cohort without the others.
    fold_sides: frozenset[tuple[str, ...]] = frozenset()
    turn: int = 0  # which side of a split this round works (they take turns)
    result: RoundResult = field(default_factory=RoundResult)
    # The digests every replica reported alike at the last comparison, and below what.
    _settled: LogDigests | None = field(default=None, init=False)
    _settled_below: int = field(default=0, init=False)

    async def run(self) -> RoundResult:
        try:
            await self._run()
            self.result.outcome = (
                attr.ROUND_ADVANCED if self.result.outcome == "running" else self.result.outcome
            )
        except RoundEnded as ended:
            self.result.outcome = ended.outcome
            self.result.detail = ended.detail
        except VersionMismatch as mismatch:
            self.result.outcome = "version_mismatch"
            self.result.detail = str(mismatch)
        except ReplicaRefused as refused:
            lost = refused.outcome in ("superseded", "lapsed")
            self.result.outcome = refused.outcome if lost else "refused"
            self.result.detail = str(refused)
        except ReplicaOverloaded as overloaded:
            self.pacer.back_off()
            self.result.outcome = "overloaded"
            self.result.detail = str(overloaded)
        except Unreachable as unreachable:
            self.result.outcome = "unavailable"
            self.result.detail = str(unreachable)
        return self.result

    async def _run(self) -> None:
        # Every round claims (renews) too: a replica that restarted since the last renewal
        # (its renewals are in memory) accepts the round's actions at once.
        sent_ms = time.monotonic() * 1000
        # Windows from the backlog cursor and, to cap the advance, from the bound.
        starts = [self.cursor, 0] if self.advance and self.cursor else [self.cursor]
        states = await self._states(starts)
        if len(states) > len(self.ref.replicas or self.replicas) // 2:
            self.lease.renewed(sent_ms)
        sides = reach_groups(states, {n: s.unreachable_peers for n, s in states.items()})
        partial = len(sides) > 1 or len(states) < len(self.replicas)
        self.result.whole = not partial
        if partial:
            sides = [side for side in sides if len(side) >= 2]
            self.result.sides = tuple(sides)
            if not sides:
                raise RoundEnded("unavailable", f"no two of {sorted(states)} reach each other")
            side = sides[self.turn % len(sides)]
            self.result.unreachable = tuple(sorted(set(self.replicas) - set(side)))
            self.replicas = {node: self.replicas[node] for node in side}
            states = {node: states[node] for node in side}
        self.result.cohorts = tuple(
            sorted({c.id: c for s in states.values() for c in s.cohorts}.values(), key=_by_id)
        )
        self.result.cohort_holders = {
            c.id: tuple(n for n, s in states.items() if any(h.id == c.id for h in s.cohorts))
            for c in self.result.cohorts
        }
        for node, state in states.items() if self.sizes else ():
            self.result.log_entries[node] = state.log_entries
            self.result.log_bytes[node] = state.log_bytes
        bounds = RangeMarks.of_pieces(p for s in states.values() for p in s.low_bounds.pieces)
        self.result.low_bound = _lowest_bound(states, self.ref)
        lowest_clock = min(s.hlc for s in states.values())
        # t, no further than a window from the bound (when this round advances)
        full = reconciliation_time(
            [s.hlc for s in states.values()],
            write_timeout_ms=self.write_timeout_ms,
            slack_ms=self.slack_ms,
            fence=max(s.fence for s in states.values()),
        )
        lowest = bounds.lowest(self.ref.range)
        t = capped_time(full, lowest_end(s.window_ends[-1] for s in states.values()), lowest)
        cohort = None
        if partial:
            cohort = formed_cohort(self, states, lowest) if self.advance else None
            floor = min((held_high(s, cohort) for s in states.values()), default=0)
            advancing = cohort is not None and t > max(lowest, floor)
        else:
            advancing = self.advance and t > lowest
        # 2. deliver what is missing in the recent window and the backlog window (above t too:
        # the lag stays near one round)
        windows = compare_windows(
            cursor=self.cursor,
            cursor_end=lowest_end(s.window_ends[0] for s in states.values()),
            lowest_clock=lowest_clock,
            recent=recent_ms(write_timeout_ms=self.write_timeout_ms, interval_ms=self.interval_ms),
        )
        spans = windows.spans
        # The backlog window from the bound is the advance's: its collection (4) compares the
        # same ids after the fence, so the deliver phase leaves it — unless the last round of
        # the range failed (its collection may fail again: the walk must not wait on it).
        skipped = advancing and self.may_skip and self.cursor == 0 and len(spans) == 2
        self.result.missing = 0
        for index, (start, below) in enumerate(spans[1:] if skipped else spans):
            self.result.missing += await self._converge(
                bounds.raised(self.ref.range, start), below=below, tries=1
            )
            if index == 0 and not skipped:  # the backlog window (or the one merged window)
                self.result.next_cursor, self.result.compared = windows.next_cursor, True
        done = "partial" if partial else "delivered"
        if not self.advance:
            self._check()
            raise RoundEnded(done)
        # 3. t
        self.result.reconciliation_time = t
        self.result.capped = t < full
        if not advancing:
            self._check()  # a round that outlived its lease did not finish under it
            raise RoundEnded(done, "nothing to advance or fold (yet)")
        needed_cohorts = () if partial else await deliver_cohorts(self, states, bounds)
        # 4. fence, then collect below t
        self._check()
        await self._each(lambda address: self.client.fence(address, self.ref, t))
        self._check()
        if await self._converge(bounds, below=t, tries=COLLECT_TRIES) < 0:
            raise RoundEnded("unconverged", f"the replicas still differ below {t}")
        if skipped:  # the backlog window compared up to t (t is within it)
            self.result.next_cursor, self.result.compared = t, True
        # 5. advance (the collect's last comparison agreed already, mostly)
        agreed = self._settled if self._settled_below == t else None
        agreed = agreed or await self._agreed(bounds, t)
        if agreed is None:
            raise RoundEnded("unconverged", f"the replicas' digests below {t} differ")
        self._check()
        if cohort is not None:
            folded = await self._each(
                lambda address: self.client.fold(address, self.ref, bounds, t, agreed, cohort)
            )
            self.result.collected = sum(folded.values())
            self.result.cohort = replace(cohort, high=t)
        else:
            collected = await self._each(
                lambda address: self.client.advance(
                    address, self.ref, bounds, t, agreed, needed_cohorts
                )
            )
            self.result.collected = sum(collected.values())
            self.result.low_bound = t
        if skipped:
            self.result.next_cursor = 0  # t is the bound now: the walk goes on from it
        self._check()
        if cohort is not None:
            raise RoundEnded("cohort", f"folded below {t} into cohort {cohort.id:x}")

    async def _states(self, starts: list[int]) -> dict[str, RangeState]:
        """Every replica's state, claiming (renewing) the lease there; those that did not
        answer are left out (a refusal, an overload or a version mismatch ends the round: the
        replica answered)."""
        nodes = list(self.replicas)
        sent_ms = time.time_ns() // 1_000_000
        answers = await asyncio.gather(
            *(
                self.client.state(
                    self.replicas[node],
                    self.ref,
                    claim=True,
                    lease_ms=self.lease.lease_ms,
                    sizes=self.sizes,
                    window_ids=self.window_ids,
                    window_from=starts,
                )
                for node in nodes
            ),
            return_exceptions=True,
        )
        self.result.answered = tuple(
            node
            for node, answer in zip(nodes, answers, strict=True)
            if isinstance(answer, RangeState)
            or (isinstance(answer, EpochalError) and not isinstance(answer, Unreachable))
        )
        states = {}
        for node, answer in zip(nodes, answers, strict=True):
            if isinstance(answer, Unreachable):
                continue
            if isinstance(answer, BaseException):
                raise answer
            states[node] = answer
        if not states:
            raise Unreachable(",".join(nodes), "no replica of the range answered")
        self._acted(sent_ms)
        return states

    def _check(self) -> None:
        if not self.lease.may_act(time.monotonic() * 1000):
            raise RoundEnded("lease_expiring", "the lease was not renewed in time")
        if not self.still_same():
            raise RoundEnded("topology_changed", "the range's split points or groups changed")

    async def _each(self, call: Callable[[str], Awaitable[T]]) -> dict[str, T]:
        nodes = list(self.replicas)
        sent_ms = time.time_ns() // 1_000_000
        answers = await asyncio.gather(
            *(call(self.replicas[n]) for n in nodes), return_exceptions=True
        )
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        self._acted(sent_ms)
        return dict(zip(nodes, answers, strict=True))  # type: ignore[arg-type]

    def _acted(self, sent_ms: int) -> None:
        """The replicas accepted calls of this round sent at ``sent_ms`` (its record says until
        when it worked the range: a call is served when it arrives, however long this process
        takes to read the answer — a pause, say)."""
        self.result.acted_unix_ms = max(self.result.acted_unix_ms, sent_ms)

    async def _converge(self, bounds: RangeMarks, *, below: int, tries: int) -> int:
        """Deliver until every replica holds every id below ``below`` (``tries`` comparisons);
        the (id, replica) pairs missing at the first comparison, or -1 when they still differ
        after the last."""
        first = None
        for _ in range(tries):
            self._check()
            held, missing = await self._compare(bounds, below)
            if first is None:
                first = missing
            if not missing:
                return first
            await self._deliver(held)
        if tries > 1:
            _, missing = await self._compare(bounds, below)
            if missing:
                return -1
        return first or 0

    async def _compare(
        self, bounds: RangeMarks, below: int
    ) -> tuple[dict[object, frozenset[str]], int]:
        nodes = list(self.replicas)
        pivot, others = nodes[0], nodes[1:]
        digests = await self._each(lambda address: self._digests(address, bounds, below))
        values = list(digests.values())
        same = all(v == values[0] for v in values)
        self._settled, self._settled_below = (values[0], below) if same else (None, 0)
        found = await asyncio.gather(
            *(
                self._difference(pivot, digests[pivot], other, digests[other], bounds, below)
                for other in others
            )
        )
        held = holders(pivot, nodes, dict(zip(others, found, strict=True)))
        missing = sum(len(nodes) - len(h) for h in held.values())
        return held, missing  # type: ignore[return-value]

    async def _digests(self, address: str, bounds: RangeMarks, below: int) -> LogDigests:
        digests, _ = await self.client.summary(address, self.ref, bounds, below=below)
        return digests

    async def _difference(
        self,
        pivot: str,
        pivot_digests: LogDigests,
        other: str,
        other_digests: LogDigests,
        bounds: RangeMarks,
        below: int,
    ) -> Difference:
        estimates = differing_logs(pivot_digests, other_digests)
        if not estimates:
            return Difference()
        logs = set(estimates)
        cells = cells_for(sum(estimates.values()))
        for _ in range(MAX_SKETCH_ROUNDS):
            sketched = sorted(logs)
            (d_a, s_a), (d_b, s_b) = await asyncio.gather(
                *(
                    self.client.summary(
                        self.replicas[node],
                        self.ref,
                        bounds,
                        below=below,
                        sketch_logs=sketched,
                        sketch_cells=cells,
                    )
                    for node in (pivot, other)
                )
            )
            assert s_a is not None and s_b is not None
            now_differing = differing_logs(d_a, d_b)
            if not now_differing:
                return Difference()
            if not set(now_differing) <= logs:
                logs |= set(now_differing)  # writes landed in other logs meanwhile
                continue
            try:
                return difference(d_a, s_a, d_b, s_b)
            except Undecodable:
                cells = more_cells(cells)
        raise RoundEnded("undecodable", f"no sketch of {pivot} and {other} decoded")

    async def _deliver(self, held: Mapping[object, frozenset[str]]) -> None:
        plan = deliveries(held, list(self.replicas), batch=self.batch)  # type: ignore[arg-type]
        gate = asyncio.Semaphore(DELIVERIES_AT_ONCE)

        async def one(source: str, target: str, ids: Sequence[object]) -> None:
            async with gate:
                self._check()
                await self.pacer.take(len(ids))
                sent_ms = time.time_ns() // 1_000_000
                done = await self.client.deliver(
                    self.replicas[source],
                    self.ref,
                    target,
                    ids,  # type: ignore[arg-type]
                )
                self._acted(sent_ms)
                self.result.delivered += done.delivered
                self.result.delivered_bytes += done.bytes
                if done.failed and done.problem.startswith(("overloaded", "behind")):
                    self.pacer.back_off()
                elif done.failed:
                    log.warning(
                        "delivery of %d mutations %s -> %s in %s: %d refused (%s)",
                        len(ids),
                        source,
                        target,
                        self.ref.range,
                        done.failed,
                        done.problem,
                    )
                else:
                    self.pacer.recovered()

        await asyncio.gather(*(one(d.source, d.target, d.ids) for d in plan))

    async def _agreed(self, bounds: RangeMarks, t: int) -> LogDigests | None:
        digests = await self._each(lambda address: self._digests(address, bounds, t))
        values = list(digests.values())
        return values[0] if all(v == values[0] for v in values) else None


def _by_id(cohort: Cohort) -> int:
    return cohort.id


def _lowest_bound(states: Mapping[str, RangeState], ref: RangeRef) -> int:
    """The low bound every replica holds at the range's right end."""
    return min((s.low_bounds.at(ref.range.right) for s in states.values()), default=0)
