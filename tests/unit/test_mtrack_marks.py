"""Rising marks per token range (epochal.mtrack.marks), as fences and as low bounds: a mark never
goes down; as a fence a split inherits it and a merge takes the maximum, as a low bound each
token keeps the highest piece containing it; the pieces kept answer every range and token as all
the pieces ever raised would, and stay as few as the raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochal.mtrack.marks import Mark, RangeMarks
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange, covers

POINTS = st.integers(-40, 40) | st.sampled_from([MIN_TOKEN, MAX_TOKEN])
RANGES = st.builds(TokenRange, POINTS, POINTS)
RAISES = st.lists(st.tuples(RANGES, st.integers(0, 1000)), max_size=12)


def naive(raises: list[tuple[TokenRange, int]], token_range: TokenRange) -> int:
    return max((t for r, t in raises if r.intersects(token_range)), default=0)


def naive_at(raises: list[tuple[TokenRange, int]], token: int) -> int:
    return max((t for r, t in raises if r.contains(token)), default=0)


@given(RAISES, st.lists(RANGES, min_size=1, max_size=6))
def test_the_kept_pieces_answer_every_range_as_every_raise_would(raises, queries) -> None:
    fences = RangeMarks()
    for token_range, hlc in raises:
        fences = fences.raised(token_range, hlc)
    for query in queries:
        assert fences.of(query) == naive(raises, query), (raises, query)
        for token in (query.left, query.right, query.right - 1, query.left + 1):
            if MIN_TOKEN < token <= MAX_TOKEN:  # no key has MIN_TOKEN
                assert fences.at(token) == naive_at(raises, token), (raises, token)
    assert len(fences.pieces) <= len(raises)
    assert RangeMarks.of_pieces(fences.pieces).of(queries[0]) == fences.of(queries[0])


@given(RAISES, RANGES, st.integers(0, 1000), st.lists(RANGES, min_size=1, max_size=6))
def test_a_fence_never_goes_down(raises, token_range, hlc, queries) -> None:
    before = RangeMarks()
    for r, t in raises:
        before = before.raised(r, t)
    after = before.raised(token_range, hlc)
    for query in queries:
        assert after.of(query) >= before.of(query)
    if token_range.pieces():  # (MAX_TOKEN, MIN_TOKEN] holds no token: nothing to fence
        assert after.of(token_range) >= hlc


def test_a_split_inherits_and_a_merge_takes_the_maximum() -> None:
    fences = RangeMarks().raised(TokenRange(0, 100), 70).raised(TokenRange(100, 200), 90)
    assert fences.of(TokenRange(0, 50)) == fences.of(TokenRange(50, 100)) == 70  # split
    assert fences.of(TokenRange(0, 200)) == 90  # merged
    assert fences.of(TokenRange(200, 300)) == 0  # never fenced
    assert fences.of(TokenRange(0, 200)) == 90  # a write at 89 is refused, at 90 admitted
    assert fences.of(TokenRange(0, 50)) == 70  # at 69 refused, at 70 admitted
    # As low bounds: each token of the merged range keeps its side's bound.
    assert (fences.at(50), fences.at(100), fences.at(101), fences.at(201)) == (70, 70, 90, 0)


def test_a_lower_raise_of_a_covered_range_changes_nothing_and_a_higher_one_replaces() -> None:
    fences = RangeMarks().raised(TokenRange(0, 100), 70)
    assert fences.raised(TokenRange(10, 20), 50) is fences
    higher = fences.raised(TokenRange(-10, 100), 80)
    assert higher.pieces == (Mark(TokenRange(-10, 100), 80),)


def test_a_wrapping_range_and_the_whole_ring() -> None:
    fences = RangeMarks().raised(TokenRange(900, -900), 5)  # wraps past MAX_TOKEN
    assert fences.of(TokenRange(MAX_TOKEN - 1, MAX_TOKEN)) == 5
    assert fences.of(TokenRange(MIN_TOKEN, -950)) == 5
    assert fences.of(TokenRange(0, 10)) == 0
    ring = TokenRange(7, 7)
    assert covers(ring, TokenRange(900, -900)) and covers(ring, TokenRange(0, 10))
    assert fences.raised(ring, 9).pieces == (Mark(ring, 9),)


@given(RAISES, RAISES, RANGES)
def test_at_most_holds_exactly_when_every_token_of_the_range_is_at_most(a, b, query) -> None:
    mine, theirs = RangeMarks(), RangeMarks()
    for r, t in a:
        mine = mine.raised(r, t)
    for r, t in b:
        theirs = theirs.raised(r, t)
    tokens = [t for t in range(-45, 46) if query.contains(t)]
    tokens += [t for t in (MAX_TOKEN, MIN_TOKEN + 1) if query.contains(t)]
    naive = all(naive_at(a, t) <= naive_at(b, t) for t in tokens)
    assert mine.at_most(theirs, query) == naive, (a, b, query)
