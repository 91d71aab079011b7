"""Windows of a reconciliation round (epochal.mtrack.windows): a round compares the recent window
and one backlog window from a cursor that walks from the low bound up and wraps, so every id of
the backlog is compared within one walk however many there are; an advance stops where a window
from the bound ends. And the lowest low bound over a range (RangeMarks.lowest)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochal.mtrack import make_hlc
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.windows import (
    capped_time,
    compare_windows,
    lowest_end,
    recent_ms,
)
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange

from .test_mtrack_marks import RAISES, RANGES, naive_at

NOW = make_hlc(1_000_000)
RECENT = recent_ms(write_timeout_ms=500, interval_ms=250)


def test_the_recent_window_is_two_write_timeouts_and_four_intervals() -> None:
    assert RECENT == 2 * 500 + 4 * 250


def test_a_window_reaching_the_recent_one_is_one_compare_and_the_walk_starts_again() -> None:
    # Fewer ids than a window above the cursor (no end): one compare from the bound.
    one = compare_windows(cursor=0, cursor_end=0, lowest_clock=NOW, recent=RECENT)
    assert one.spans == ((0, NOW),) and one.next_cursor == 0
    # The window ends inside the recent one: still one compare.
    inside = make_hlc(1_000_000 - RECENT // 2)
    one = compare_windows(cursor=make_hlc(5), cursor_end=inside, lowest_clock=NOW, recent=RECENT)
    assert one.spans == ((make_hlc(5), NOW),) and one.next_cursor == 0


def test_a_backlog_window_below_the_recent_one_is_compared_apart_and_the_cursor_moves() -> None:
    end = make_hlc(500_000)
    two = compare_windows(cursor=make_hlc(5), cursor_end=end, lowest_clock=NOW, recent=RECENT)
    recent_from = make_hlc(1_000_000 - RECENT)
    assert two.spans == ((make_hlc(5), end), (recent_from, NOW))
    assert two.next_cursor == end


def test_a_window_of_more_ids_than_fit_at_one_hlc_still_moves_on() -> None:
    at = make_hlc(7)
    moved = compare_windows(cursor=at, cursor_end=at, lowest_clock=NOW, recent=RECENT)
    assert moved.spans[0] == (at, at + 1) and moved.next_cursor == at + 1
    assert capped_time(NOW, at, at) == at + 1  # an advance window from the bound too


def test_the_end_over_every_replica_is_the_lowest_and_no_end_is_none() -> None:
    assert lowest_end([0, 9, 4]) == 4
    assert lowest_end([0, 0]) == 0
    assert capped_time(NOW, 0, 0) == NOW  # no end: the reconciliation time itself
    assert capped_time(NOW, make_hlc(3), 0) == make_hlc(3)
    assert capped_time(make_hlc(2), make_hlc(3), 0) == make_hlc(2)


@given(
    st.lists(st.integers(1, 1_999), min_size=0, max_size=300),  # id times (ms) in the log
    st.integers(1, 40),  # ids a window
)
def test_one_walk_compares_every_id_of_the_backlog(times: list[int], window: int) -> None:
    """A replica's log of ids at ``times``: rounds from the bound, each with the window end a
    replica would report, compare every id below the recent window within one walk."""
    hlcs = sorted(make_hlc(ms) for ms in times)
    clock = make_hlc(2_000 + RECENT)
    recent_from = make_hlc(2_000)

    def end_from(start: int) -> int:
        above = [h for h in hlcs if h >= start]
        return above[window] if len(above) > window else 0

    compared: set[int] = set()
    cursor = 0
    for _ in range(len(hlcs) // window + 2):
        plan = compare_windows(
            cursor=cursor, cursor_end=end_from(cursor), lowest_clock=clock, recent=RECENT
        )
        for start, below in plan.spans:
            span = [h for h in hlcs if start <= h < below]
            assert start >= recent_from or len(span) <= window or len(set(span)) == 1
            compared |= set(span)
        cursor = plan.next_cursor
        if cursor == 0:
            break
    assert cursor == 0, "the walk reached the recent window and wrapped"
    assert compared == set(hlcs)


@given(RAISES, RANGES)
def test_the_lowest_bound_is_the_least_of_every_token(raises, query) -> None:
    bounds = RangeMarks()
    for r, t in raises:
        bounds = bounds.raised(r, t)
    tokens = [t for t in range(-45, 46) if query.contains(t)]
    tokens += [t for t in (MAX_TOKEN, MIN_TOKEN + 1) if query.contains(t)]
    assert bounds.lowest(query) == min((naive_at(raises, t) for t in tokens), default=0)


def test_a_merged_range_keeps_each_sides_bound_and_its_lowest_is_the_lower() -> None:
    bounds = RangeMarks().raised(TokenRange(0, 100), 70).raised(TokenRange(100, 200), 90)
    assert bounds.lowest(TokenRange(0, 200)) == 70
    assert bounds.lowest(TokenRange(100, 200)) == 90
    assert bounds.lowest(TokenRange(0, 300)) == 0  # (200, 300] has none
