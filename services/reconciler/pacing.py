"""Backpressure for deliveries: reconciliation shares the replicas with clients.

A token bucket of ``rate`` mutations a second, shared by every round of this reconciler (a burst
of at most one second's worth), and a back-off: a delivery some of whose mutations a target
refused (overloaded, behind) halves the rate, down to a tenth of it, and each delivery that went
through raises it back by a tenth. Pure but for the event loop's clock and sleep."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epochal.reconciler.rounds import RoundResult

MIN_SHARE = 0.1


class Pacer:
    def __init__(self, rate: int) -> None:
        if rate <= 0:
            raise ValueError(f"a delivery rate is > 0 mutations a second, got {rate}")
        self.rate = rate
        self.share = 1.0
        self._tokens = float(rate)
        self._at = 0.0

    @property
    def current_rate(self) -> float:
        return self.rate * self.share

    async def take(self, mutations: int) -> None:
        """Wait until ``mutations`` may be delivered (a batch larger than the bucket waits for
        as much as it lacks, then goes)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._at:
            self._tokens = min(
                self._tokens + (now - self._at) * self.current_rate, self.current_rate
            )
        self._at = now
        self._tokens -= mutations
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.current_rate)

    def back_off(self) -> None:
        self.share = max(self.share / 2, MIN_SHARE)

    def recovered(self) -> None:
        self.share = min(self.share + 0.1, 1.0)


# The replicas count a range's log (entries and bytes, for the metrics) at most this often: the
# count scans the range's log, which is long while a backlog is collected.
SIZES_EVERY_S = 10.0


@dataclass(slots=True)
class RangePace:
    """Where one range's rounds stand between rounds (monotonic seconds): when the next advances
    (every ``advance_s``, at once after one stopped at a window's end), when the replicas count
    their logs again, where the backlog walk stands, whether the last round went well, and since
    when each side of a split has been apart from the other replicas."""

    advance_s: float
    advanced_at: float = float("-inf")
    sized_at: float = float("-inf")
    cursor: int = 0
    went_well: bool = True
    # Per side of a split range (its sorted node ids): since when every round that found the
    # replicas' sides found this one. Per side, not per range: when the side changes — the
    # replica left out comes back and another is briefly reported unreachable — the new side
    # waits its own ``--cohort-after-ms`` before it folds without the one left out.
    split_since: dict[tuple[str, ...], float] = field(default_factory=dict)
    # Per side: the replicas it left out because they gave no answer (the others it left out
    # answered the reconciler but not their peers: apart by reach).
    silent: dict[tuple[str, ...], frozenset[str]] = field(default_factory=dict)
    turn: int = 0  # rounds so far: the sides of a split take turns

    def fold_sides(self, now: float, cohort_after_s: float) -> frozenset[tuple[str, ...]]:
        """The sides apart for at least ``cohort_after_s``: a round working one of them may fold
        it into a cohort."""
        return frozenset(
            side for side, since in self.split_since.items() if now - since >= cohort_after_s
        )

    def advance_due(self, now: float) -> bool:
        return now - self.advanced_at >= self.advance_s

    def sizes_due(self, now: float) -> bool:
        return now - self.sized_at >= SIZES_EVERY_S

    def after(
        self, started: float, result: RoundResult | None, *, advance: bool, sizes: bool
    ) -> None:
        """The round started at ``started`` ended with ``result`` (None: it failed outright)."""
        if result is not None and result.compared:
            self.cursor = result.next_cursor
        self.turn += 1
        if result is not None and result.whole:
            self.split_since, self.silent = {}, {}  # every replica answered, and all reach
        elif result is not None and result.sides:
            self.split_since = {s: self.split_since.get(s, started) for s in result.sides}
            no_answer = frozenset(result.unreachable) - frozenset(result.answered)
            self.silent = {s: no_answer - frozenset(s) for s in result.sides}
        elif result is not None:
            # The round ended at the state call before it formed sides (a replica refused, was
            # overloaded or of another version, or no two answered). A side that left out a
            # replica for giving no answer is not apart from it once it answers, whatever it
            # says: its clock starts again when a round finds it apart again. (Else a replica
            # answering "overloaded" for as long as --cohort-after-ms would be folded without
            # at its first missed deadline.) A side apart by reach learns nothing here.
            answered = frozenset(result.answered)
            self.split_since = {
                side: since
                for side, since in self.split_since.items()
                if not self.silent.get(side, frozenset()) & answered
            }
            self.silent = {s: self.silent[s] for s in self.split_since if s in self.silent}
        self.went_well = result is not None and result.outcome in (
            "advanced",
            "delivered",
            "partial",
            "cohort",
        )
        if self.went_well and sizes:
            self.sized_at = started
        if advance and result is not None and result.outcome == "advanced":
            # An advance stopped at a window's end is followed by another at once.
            self.advanced_at = float("-inf") if result.capped else started
