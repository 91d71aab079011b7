"""Spans as the processes wrote them: OTLP JSON lines (the OpenTelemetry file exporter's format,
one ``TracesData`` per line), read back for tests to check traces across processes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochal.telemetry import attributes as attr


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_id: str  # "" for a root
    kind: int  # OTLP SpanKind: 1 internal, 2 server, 3 client
    resource: dict[str, Any]
    attributes: dict[str, Any]
    events: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # (trace id, span id)
    start_ns: int
    end_ns: int

    @property
    def service(self) -> str:
        return str(self.resource.get(attr.SERVICE_NAME, ""))


def value_of(value: dict[str, Any]) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value (64-bit integers come as strings)."""
    kind, inner = next(iter(value.items()), ("", None))
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [value_of(v) for v in inner.get("values", [])]
    return inner


def attributes_of(pairs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {pair["key"]: value_of(pair.get("value", {})) for pair in pairs}


def spans_of_line(line: str) -> list[Span]:
    spans = []
    for resource_spans in json.loads(line).get("resourceSpans", []):
        resource = attributes_of(resource_spans.get("resource", {}).get("attributes", []))
        for scope in resource_spans.get("scopeSpans", []):
            for span in scope.get("spans", []):
                spans.append(
                    Span(
                        name=span["name"],
                        trace_id=span["traceId"],
                        span_id=span["spanId"],
                        parent_id=span.get("parentSpanId", ""),
                        kind=span.get("kind", 0),
                        resource=resource,
                        attributes=attributes_of(span.get("attributes", [])),
                        events=tuple(e["name"] for e in span.get("events", [])),
                        links=tuple((k["traceId"], k["spanId"]) for k in span.get("links", [])),
                        start_ns=int(span["startTimeUnixNano"]),
                        end_ns=int(span["endTimeUnixNano"]),
                    )
                )
    return spans


def read_spans(folder: Path) -> list[Span]:
    """Every span in the ``*.jsonl`` files of ``folder``."""
    spans = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                spans.extend(spans_of_line(line))
    return spans
