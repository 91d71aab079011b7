"""The critical path of a trace: the chain of spans that determines when its root ends.

Theory of operation (the backward walk of Uber's CRISP and Jaeger's critical-path view). Start at
the root's end and walk back in time. Within a span, the child that ended last before the current
moment is what the span waited for: the time between that child's end and the current moment is
the span's own ("exclusive") time, the child's interval is walked the same way recursively, and
the walk goes on from the child's start. Children that ended later than the current moment ran
beside the chosen one and did not decide the end. What remains before the first chosen child is
the span's own time too.

So the path is a list of segments, each ``(span, start_ns, end_ns)``, that tile the root's interval
exactly: their durations sum to the root's duration. Nested spans overlap, so a span's segments
are its time outside the children that are on the path.

Clipping keeps the tiling whole when a child's interval leaves its parent's (work the parent did
not wait for, or another process's clock): a child counts only within ``[parent start, current
moment]``. A span whose parent is not in the trace (sampled out, or in a file not read) starts a
tree of its own; the trace's root is the earliest-starting parentless span.

A span with phase events (the leader's ``cms.commit``: queued, validated, accepted, applied,
answered; a barrier's ``relaxed``) has its own time split at them: the time after ``queued``
until the next event is the ``queued`` phase; the time before the first event is ``received``
for a commit (before ``queued``), else the span's name.

Pure Python on plain tuples, importing only the standard library: Spark ships it to the
executors by value.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

FIRST_PHASE = "received"  # a commit's time before it was queued


class PathSpan(NamedTuple):
    span_id: str
    parent_span_id: str  # "" for a root
    name: str
    service: str
    node: str
    start_ns: int
    end_ns: int
    events: tuple[tuple[str, int], ...] = ()  # (name, time_ns) of phase events, any order


class Segment(NamedTuple):
    """A span's own time on the critical path, in one phase."""

    span_id: str
    name: str
    service: str
    node: str
    phase: str  # the span's phase (``received`` before its first event), else its name
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def root_of(spans: list[PathSpan]) -> PathSpan | None:
    """The earliest-starting span whose parent is not among ``spans`` (ties: the longest)."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_span_id or s.parent_span_id not in ids]
    if not roots:  # a cycle of parents: not a tree (bad input), nothing to walk
        return None
    return min(roots, key=lambda s: (s.start_ns, -s.end_ns, s.span_id))


def critical_path(
    spans: list[PathSpan], first_phases: Mapping[str, str] | None = None
) -> list[Segment]:
    """The segments of the trace's critical path, latest first, tiling its root's interval.
    ``first_phases`` names the phase before a span's first event by that event (a commit's
    ``queued``: ``received``); otherwise it is the span's name."""
    root = root_of(spans)
    if root is None:
        return []
    children: dict[str, list[PathSpan]] = {}
    for span in spans:
        if span.parent_span_id and span is not root:
            children.setdefault(span.parent_span_id, []).append(span)
    for siblings in children.values():
        siblings.sort(key=lambda s: (s.end_ns, s.start_ns, s.span_id), reverse=True)
    segments: list[Segment] = []
    _walk(root, root.start_ns, root.end_ns, children, segments, frozenset(), first_phases or {})
    return segments


def _walk(
    span: PathSpan,
    start_ns: int,
    end_ns: int,
    children: dict[str, list[PathSpan]],
    out: list[Segment],
    ancestors: frozenset[str],
    first_phases: Mapping[str, str],
) -> None:
    """Append the path through ``span`` within ``[start_ns, end_ns]`` to ``out``, latest first.
    ``ancestors`` guards against a span listed as its own descendant (bad input)."""
    now = end_ns
    inside = ancestors | {span.span_id}
    for child in children.get(span.span_id, ()):  # latest end first
        if now <= start_ns:
            break
        if child.span_id in inside or child.start_ns >= now:
            continue  # bad input, or started after the moment reached: not waited for
        if child.end_ns > now and now != end_ns:
            continue  # ran beside the sibling chosen last, which ended later
        child_start, child_end = max(child.start_ns, start_ns), min(child.end_ns, now)
        if child_start >= child_end:
            continue
        _own(span, child_end, now, out, first_phases)
        _walk(child, child_start, child_end, children, out, inside, first_phases)
        now = child_start
    _own(span, start_ns, now, out, first_phases)


def _own(
    span: PathSpan, start_ns: int, end_ns: int, out: list[Segment], first_phases: Mapping[str, str]
) -> None:
    """``span``'s own time in ``[start_ns, end_ns]``, split at its phase events, latest first.
    The first phase reaches back, and the last forward, past the span's own bounds (clipping)."""
    if end_ns <= start_ns:
        return
    events = sorted(span.events, key=lambda e: e[1])
    first = first_phases.get(events[0][0], span.name) if events else span.name
    phases = [(first, start_ns)]
    phases += [(name, min(max(t, start_ns), end_ns)) for name, t in events]
    pieces = []
    for i, (phase, begins) in enumerate(phases):
        ends = phases[i + 1][1] if i + 1 < len(phases) else end_ns
        if ends > begins:
            pieces.append(
                Segment(span.span_id, span.name, span.service, span.node, phase, begins, ends)
            )
    out.extend(reversed(pieces))


def path_row(
    trace_id: str,
    spans: Sequence[Any],
    phase_events: Collection[str],
    first_phases: Mapping[str, str] | None = None,
) -> tuple[Any, ...] | None:
    """A trace's row of the ``critical_paths`` table from its spans as Spark rows (``span_id``,
    ``parent_span_id``, ``name``, ``service``, ``node``, ``start_ns``, ``end_ns``, ``events``):
    trace id, the root's name, service, span id and duration (ms), and the path, earliest
    segment first, each ``(service, node, span, phase, span_id, start_ns, exclusive_ms)``."""
    path_spans = [
        PathSpan(
            s["span_id"],
            s["parent_span_id"] or "",
            s["name"] or "",
            s["service"] or "",
            s["node"] or "",
            s["start_ns"],
            s["end_ns"],
            tuple(
                (e["name"], e["time_ns"])
                for e in s["events"]
                if e["name"] in phase_events and e["time_ns"] is not None
            ),
        )
        for s in spans
        if s["start_ns"] is not None and s["end_ns"] is not None
    ]
    root = root_of(path_spans)
    if root is None:
        return None
    segments = [
        (g.service, g.node, g.name, g.phase, g.span_id, g.start_ns, g.duration_ns / 1e6)
        for g in reversed(critical_path(path_spans, first_phases))
    ]
    return (
        trace_id,
        root.name,
        root.service,
        root.span_id,
        (root.end_ns - root.start_ns) / 1e6,
        segments,
    )
