"""Span files written by hand, for the analytics job's tests: OTLP JSON lines as the file
exporter writes them (ids in hex, 64-bit integers as strings), from a few keyword arguments."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from epochal.telemetry import attributes as attr

TRACE_ID = "ab" * 16
_ids = itertools.count(1)


def any_value(v: Any) -> dict[str, Any]:
    """An OTLP AnyValue in the JSON encoding."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"stringValue": v}


def key_values(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in attributes.items()]


def span(
    name: str,
    start_ns: int,
    end_ns: int,
    *,
    span_id: str = "",
    parent: str = "",
    trace_id: str = TRACE_ID,
    events: Iterable[tuple[str, int]] = (),
    error: bool = False,
    **attributes: Any,
) -> dict[str, Any]:
    """A span; ``attributes`` by the attributes module's names (pass them as a ``**{...}``)."""
    return {
        "traceId": trace_id,
        "spanId": span_id or f"{next(_ids):016x}",
        "parentSpanId": parent,
        "name": name,
        "kind": 2,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": key_values(attributes),
        "events": [{"timeUnixNano": str(t), "name": n, "attributes": []} for n, t in events],
        "status": {"code": 2, "message": "failed"} if error else {},
    }


def line(service: str, spans: Iterable[dict[str, Any]], instance: str = "", node: str = "") -> str:
    """One TracesData line: ``spans`` of one process."""
    resource: dict[str, Any] = {attr.SERVICE_NAME: service}
    resource[attr.SERVICE_INSTANCE] = instance or f"{service}-1"
    if node:
        resource[attr.NODE_ID] = node
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": key_values(resource)},
                    "scopeSpans": [{"scope": {"name": "epochal"}, "spans": list(spans)}],
                }
            ]
        }
    )


def write_file(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines))
    return path
