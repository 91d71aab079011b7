"""Span files written by hand, for the analytics job's tests: OTLP JSON lines as the file
exporter writes them (ids in hex, 64-bit integers as strings), from a few keyword arguments; and
the job's Parquet tables read back for comparison (``rows``, ``same``)."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from epochal.analytics.synthetic import any_value
from epochal.telemetry import attributes as attr

TRACE_ID = "ab" * 16
_ids = itertools.count(1)


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


def rows(folder: Path) -> list[tuple[Any, ...]]:
    """A table's rows in a canonical order: lists of text sorted (collect_set's order is not
    part of the answer), rows sorted by their fields other than floats (which two sums in
    another order may give in another last bit: compared with ``same`` instead)."""

    def canonical(value: Any) -> Any:
        if isinstance(value, list):
            items = [canonical(v) for v in value]
            return tuple(sorted(items) if all(isinstance(i, str) for i in items) else items)
        if isinstance(value, dict):
            return tuple(sorted((k, canonical(v)) for k, v in value.items()))
        return value

    def key(row: tuple[Any, ...]) -> str:
        return repr(tuple(v for v in row if not isinstance(v, float)))

    table = pq.read_table(folder).to_pylist()
    return sorted((tuple(canonical(v) for v in row.values()) for row in table), key=key)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
