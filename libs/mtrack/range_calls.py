"""The values a reconciler and a replica exchange about one token range (``ReplicaReconcile``):
what both sides of those calls speak, whatever carries them. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from epochal.mtrack.cohorts import Cohort
from epochal.mtrack.marks import RangeMarks
from epochal.tcm.tokens import TokenRange


@dataclass(frozen=True, slots=True)
class RangeRef:
    """A range as the reconciler's epoch places it, and the reconciler's lease token on it."""

    epoch: int
    keyspace: str
    range: TokenRange
    lease_token: int
    replicas: tuple[str, ...] = ()  # the range's read and write groups at that epoch


@dataclass(frozen=True, slots=True)
class RangeState:
    """A replica's view of a range: its clock, fence and low bounds, the highest lease token it
    has seen and how long since that was claimed or renewed there, its log's size, and where
    windows of its ids end."""

    hlc: int
    fence: int
    low_bounds: RangeMarks  # the pieces that intersect the range
    lease_token: int
    lease_idle_ms: float | None  # None: never claimed or renewed there since it started
    log_entries: int
    log_bytes: int
    # Per window asked (its ``from``), where a window of at most the asked number of ids from it
    # ends here (``window_end``); 0: the window reaches the top of the log.
    window_ends: tuple[int, ...] = ()
    cohorts: tuple[Cohort, ...] = ()  # the cohorts held that intersect the range
    unreachable_peers: tuple[str, ...] = ()  # the range's replicas this one cannot reach lately


@dataclass(frozen=True, slots=True)
class Delivered:
    delivered: int
    bytes: int
    absent: int  # ids the source's log does not hold (below its low bound, or never held)
    failed: int
    problem: str = ""  # the first failure, when any
