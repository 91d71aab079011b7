"""The critical path of a trace (epochal.analytics.critical_path): the segments tile the root's
interval exactly, and each is the own time of a span on a chain from the root."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.analytics.critical_path import PathSpan, Segment, critical_path, path_row, root_of


def span(span_id: str, parent: str, start: int, end: int, *events: tuple[str, int]) -> PathSpan:
    return PathSpan(span_id, parent, f"op.{span_id}", "svc", "n1", start, end, tuple(events))


def walked(spans: list[PathSpan]) -> list[tuple[str, str, int, int]]:
    """(span id, phase, start, end) of each segment, earliest first (a commit's time before it
    was queued is its ``received`` phase)."""
    path = critical_path(spans, {"queued": "received"})
    return [(g.span_id, g.phase, g.start_ns, g.end_ns) for g in reversed(path)]


def test_a_lone_span_is_its_own_path() -> None:
    assert walked([span("r", "", 0, 100)]) == [("r", "op.r", 0, 100)]


def test_sequential_children_are_all_on_the_path_with_the_parents_gaps_between() -> None:
    spans = [span("r", "", 0, 100), span("a", "r", 10, 40), span("b", "r", 50, 90)]
    assert walked(spans) == [
        ("r", "op.r", 0, 10),
        ("a", "op.a", 10, 40),
        ("r", "op.r", 40, 50),
        ("b", "op.b", 50, 90),
        ("r", "op.r", 90, 100),
    ]


def test_of_parallel_children_the_last_to_end_is_waited_for_and_the_others_are_not() -> None:
    spans = [span("r", "", 0, 100), span("a", "r", 10, 80), span("b", "r", 20, 90)]
    assert walked(spans) == [("r", "op.r", 0, 20), ("b", "op.b", 20, 90), ("r", "op.r", 90, 100)]


def test_a_child_that_ended_before_the_chosen_one_began_is_on_the_path_too() -> None:
    spans = [
        span("r", "", 0, 100),
        span("a", "r", 5, 15),  # before b: waited for
        span("c", "r", 10, 60),  # overlaps b's start: b ended last, so c is beside it
        span("b", "r", 20, 90),
    ]
    assert [s for s, *_ in walked(spans)] == ["r", "a", "r", "b", "r"]


def test_a_child_that_outlives_its_parent_counts_only_up_to_the_parents_end() -> None:
    spans = [span("r", "", 0, 100), span("a", "r", 50, 150)]
    assert walked(spans) == [("r", "op.r", 0, 50), ("a", "op.a", 50, 100)]


def test_nested_spans_walk_down_to_the_deepest() -> None:
    spans = [span("r", "", 0, 100), span("a", "r", 10, 90), span("b", "a", 20, 80)]
    assert walked(spans) == [
        ("r", "op.r", 0, 10),
        ("a", "op.a", 10, 20),
        ("b", "op.b", 20, 80),
        ("a", "op.a", 80, 90),
        ("r", "op.r", 90, 100),
    ]


def test_a_span_with_phase_events_is_split_at_them() -> None:
    commit = span("c", "", 0, 100, ("validated", 30), ("queued", 10), ("answered", 95))
    assert walked([commit]) == [
        ("c", "received", 0, 10),
        ("c", "queued", 10, 30),
        ("c", "validated", 30, 95),
        ("c", "answered", 95, 100),
    ]


def test_a_span_whose_first_event_is_not_queued_keeps_its_name_before_it() -> None:
    barrier = span("b", "", 0, 100, ("relaxed", 40))
    assert walked([barrier]) == [("b", "op.b", 0, 40), ("b", "relaxed", 40, 100)]


def test_phases_split_only_the_spans_own_time() -> None:
    commit = span("c", "", 0, 100, ("queued", 10), ("validated", 60))
    child = span("x", "c", 20, 50)
    assert walked([commit, child]) == [
        ("c", "received", 0, 10),
        ("c", "queued", 10, 20),
        ("x", "op.x", 20, 50),
        ("c", "queued", 50, 60),
        ("c", "validated", 60, 100),
    ]


def test_the_root_is_the_earliest_span_whose_parent_is_missing() -> None:
    spans = [span("late", "gone", 50, 60), span("r", "sampled-out", 0, 100), span("a", "r", 1, 2)]
    root = root_of(spans)
    assert root is not None and root.span_id == "r"
    assert sum(g.duration_ns for g in critical_path(spans)) == 100


def test_a_cycle_of_parents_has_no_root_and_no_path() -> None:
    assert critical_path([span("a", "b", 0, 10), span("b", "a", 0, 10)]) == []


def test_the_row_for_spark_has_the_root_and_the_path_earliest_first() -> None:
    rows = [
        {"span_id": "r", "parent_span_id": None, "name": "client.write", "service": "app",
         "node": "", "start_ns": 0, "end_ns": 2_000_000, "events": []},
        {"span_id": "a", "parent_span_id": "r", "name": "replica.write", "service": "replica",
         "node": "n1", "start_ns": 500_000, "end_ns": 1_500_000,
         "events": [{"name": "exception", "time_ns": 600_000}]},
    ]  # fmt: skip
    trace_id, operation, service, root_id, duration_ms, path = path_row("t", rows, {"queued"})
    assert (trace_id, operation, service, root_id, duration_ms) == (
        "t",
        "client.write",
        "app",
        "r",
        2.0,
    )
    assert [(s[2], s[3], s[6]) for s in path] == [
        ("client.write", "client.write", 0.5),
        ("replica.write", "replica.write", 1.0),  # an event not a phase splits nothing
        ("client.write", "client.write", 0.5),
    ]


@st.composite
def traces(draw: st.DrawFn) -> list[PathSpan]:
    """A tree of up to 25 spans with random intervals (children may leave their parent's)."""
    count = draw(st.integers(1, 25))
    spans = []
    for i in range(count):
        parent = "" if i == 0 else f"s{draw(st.integers(0, i - 1))}"
        start = draw(st.integers(0, 1000))
        end = start + draw(st.integers(0, 500))
        events = tuple(
            (name, draw(st.integers(start, end)))
            for name in draw(st.lists(st.sampled_from(["queued", "validated"]), unique=True))
        )
        spans.append(PathSpan(f"s{i}", parent, f"op{i}", "svc", "n", start, end, events))
    return spans


@settings(max_examples=300, deadline=None)
@given(traces())
def test_the_segments_tile_the_roots_interval_and_follow_a_chain_of_spans(
    spans: list[PathSpan],
) -> None:
    root = root_of(spans)
    assert root is not None
    path: list[Segment] = list(reversed(critical_path(spans)))
    by_id = {s.span_id: s for s in spans}
    if root.end_ns == root.start_ns:
        assert path == []
        return
    assert path[0].start_ns == root.start_ns and path[-1].end_ns == root.end_ns
    for before, after in itertools.pairwise(path):
        assert before.end_ns == after.start_ns  # contiguous: no gap, no overlap
    assert sum(g.duration_ns for g in path) == root.end_ns - root.start_ns
    for g in path:
        assert g.duration_ns > 0
        chain = [by_id[g.span_id]]  # the segment's span and its ancestors, up to the root
        while chain[-1] is not root:
            chain.append(by_id[chain[-1].parent_span_id])
        assert all(s.start_ns <= g.start_ns and g.end_ns <= s.end_ns for s in chain), chain
