"""Which ids a reconciliation round compares, and how far it may advance a low bound, so that a
round's work is bounded by a number of ids however long the range went unreconciled. Pure.

Theory of operation
-------------------
A range's log holds the ids above its low bound. In a steady cluster that is a few seconds of
writes; after a reconciler was down for an hour, or a replica was, it can be millions. A round
that summarized, checked and collected all of them at once would hold each replica's event loop
for as long, and every client write with it. So a round works in **windows** of at most
``window_ids`` ids (``--window-ids``), which each replica finds in its log (the HLC of the
``window_ids + 1``-th lowest id from a point: the window's end):

* **The recent window** ``[lowest clock − recent, lowest clock)``: every round compares it, so a
  write a replica missed is delivered by the next round (the replication lag is about one round).
  ``recent`` is twice the write timeout and four round intervals (``recent_ms``): a write reaches
  its replicas within the write timeout, and a few rounds see it after that.
* **The backlog window** from a **cursor** that walks from the low bound up, one window a round,
  and wraps back to the bound when it reaches the recent window: older ids a replica lacks (it
  was down, or dropped them) are found within one walk of the backlog. When the backlog window
  reaches the recent one, the two are one compare (the steady case: one compare a round, from the
  bound to the lowest clock).
* **The advance window**: a low bound advances to *t* only as far as a window from the bound
  ends (``capped_time``), so the span a replica checks and collects in one transaction holds at
  most ``window_ids`` ids; a round that was capped is followed at once by another advance, until
  the bound reaches the reconciliation time.

Window ends are HLCs; a window from ``start`` means, per token, from the higher of the token's low
bound and ``start`` (``RangeMarks.raised`` over the round's bounds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from epochal.mtrack.hlc import make_hlc, physical_ms_of


def recent_ms(*, write_timeout_ms: int, interval_ms: int) -> int:
    """How far back from the lowest replica clock every round compares."""
    return 2 * write_timeout_ms + 4 * interval_ms


def lowest_end(ends: Iterable[int]) -> int:
    """The end of a window over every replica: the lowest of the replicas' ends (0, no end: the
    window reaches the top of that replica's log), 0 when none has one."""
    return min((end for end in ends if end), default=0)


@dataclass(frozen=True, slots=True)
class Windows:
    """What one round compares: ``[start, below)`` spans, each ``start`` raised over the round's
    low bounds; and where the backlog cursor stands for the next round (0: at the bound)."""

    spans: tuple[tuple[int, int], ...]
    next_cursor: int


def compare_windows(*, cursor: int, cursor_end: int, lowest_clock: int, recent: int) -> Windows:
    """The spans a round compares, from the backlog cursor and where its window ends over every
    replica (``lowest_end``), the lowest replica clock and ``recent_ms``."""
    recent_from = make_hlc(max(physical_ms_of(lowest_clock) - recent, 0))
    if cursor_end:
        cursor_end = max(cursor_end, cursor + 1)  # (more ids than a window at one HLC: all)
    if not cursor_end or cursor_end >= recent_from or cursor >= recent_from:
        # The backlog window reaches the recent one: one compare, and the walk starts again.
        return Windows(((min(cursor, recent_from), lowest_clock),), 0)
    return Windows(((cursor, cursor_end), (recent_from, lowest_clock)), cursor_end)


def capped_time(t: int, advance_end: int, lowest_bound: int) -> int:
    """The reconciliation time ``t`` no further than the advance window's end (0: no end) from
    ``lowest_bound``, the range's lowest low bound (more ids than a window at one HLC: all)."""
    return min(t, max(advance_end, lowest_bound + 1)) if advance_end else t
