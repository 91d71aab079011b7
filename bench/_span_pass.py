"""The baseline of ``analytics.py``: one Python process reads the span files line by line and
computes the job's ``latency`` table — count, mean, p50/p90/p99/p999 and max of the span
durations per service, operation, consistency level and node, and the same over all nodes and
over all levels — exactly (sorted lists), with the job's rules: each span once (by trace and span
id), a line that is not JSON skipped, a span's node its own ``epochal.node.id`` else its
process's (the greatest node its spans name, else its resource's, else its instance).

``agrees`` checks the Spark table against it: the same groups, counts and maxima, means within
1e-9, and each Spark percentile an element whose rank is within ``n / accuracy`` (+1) of the
exact one's (``percentile_approx``'s promise). Not a benchmark itself."""

from __future__ import annotations

import argparse
import bisect
import json
import math
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
ALL = "*"
NODE_ID = "epochal.node.id"
CONSISTENCY = "epochal.consistency"

Group = tuple[str, str, str, str]  # service, operation, consistency, node


def _text(value: Mapping[str, Any] | None) -> str:
    if not value:
        return ""
    for kind in ("stringValue", "intValue", "boolValue", "doubleValue"):
        if kind in value:
            v = value[kind]
            return str(v).lower() if kind == "boolValue" else str(v)
    return ""


def _attributes(key_values: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {kv["key"]: kv.get("value") for kv in key_values or () if "key" in kv}


def durations(folder: Path) -> tuple[dict[Group, list[float]], int]:
    """Every span's duration (ms) by group, and the lines skipped."""
    seen: set[tuple[str, str]] = set()
    # per process (run, service, instance): its spans' (operation, consistency, node, ms)
    spans: dict[tuple[str, str, str], list[tuple[str, str, str, float]]] = defaultdict(list)
    named: dict[tuple[str, str, str], str] = {}
    resource_node: dict[tuple[str, str, str], str] = {}
    bad = 0
    for path in sorted(folder.rglob("*.jsonl")):
        run = str(path.parent)
        with path.open() as lines:
            for line in lines:
                try:
                    data = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                if not isinstance(data, dict) or "resourceSpans" not in data:
                    bad += 1
                    continue
                for rs in data["resourceSpans"]:
                    resource = _attributes(rs.get("resource", {}).get("attributes"))
                    process = (
                        run,
                        _text(resource.get("service.name")),
                        _text(resource.get("service.instance.id")),
                    )
                    if node := _text(resource.get(NODE_ID)):
                        resource_node[process] = max(resource_node.get(process, ""), node)
                    out = spans[process]
                    for ss in rs.get("scopeSpans", ()):
                        for s in ss.get("spans", ()):
                            key = (s["traceId"].lower(), s["spanId"].lower())
                            if key in seen:
                                continue
                            seen.add(key)
                            a = _attributes(s.get("attributes"))
                            node = _text(a.get(NODE_ID))
                            if node:
                                named[process] = max(named.get(process, ""), node)
                            ms = (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6
                            out.append((s["name"], _text(a.get(CONSISTENCY)), node, ms))
    groups: dict[Group, list[float]] = defaultdict(list)
    for process, rows in spans.items():
        own = named.get(process) or resource_node.get(process) or process[2]
        service = process[1]
        for operation, level, node, ms in rows:
            groups[(service, operation, level, node or own)].append(ms)
            groups[(service, operation, level, ALL)].append(ms)
            groups[(service, operation, ALL, ALL)].append(ms)
    return groups, bad


def latency(groups: Mapping[Group, list[float]]) -> dict[Group, dict[str, float]]:
    """The table: per group, count, mean, the exact percentiles (nearest rank) and max."""
    table = {}
    for group, values in groups.items():
        values.sort()
        n = len(values)
        row = {"count": n, "mean_ms": sum(values) / n, "max_ms": values[-1]}
        for name, q in QUANTILES.items():
            row[f"{name}_ms"] = values[max(math.ceil(q * n) - 1, 0)]
        table[group] = row
    return table


def agrees(
    exact: Mapping[Group, list[float]], spark_rows: Iterable[Mapping[str, Any]], accuracy: int
) -> list[str]:
    """What differs between the Spark ``latency`` rows and the exact durations (sorted): [] if
    they agree."""
    problems: list[str] = []
    found: set[Group] = set()
    for values in exact.values():
        values.sort()  # (already, after ``latency``: cheap)
    for row in spark_rows:
        group = (row["service"], row["operation"], row["consistency"], row["node"])
        found.add(group)
        values = exact.get(group)
        if values is None:
            problems.append(f"{group}: in Spark's table only")
            continue
        n = len(values)
        if row["count"] != n or row["max_ms"] != values[-1]:
            problems.append(
                f"{group}: count/max {row['count']}/{row['max_ms']} != {n}/{values[-1]}"
            )
        if abs(row["mean_ms"] - sum(values) / n) > 1e-9 * max(1.0, abs(row["mean_ms"])):
            problems.append(f"{group}: mean {row['mean_ms']} != {sum(values) / n}")
        slack = n / accuracy + 1
        for name, q in QUANTILES.items():
            v = row[f"{name}_ms"]
            low, high = bisect.bisect_left(values, v), bisect.bisect_right(values, v)
            if low == high or high < q * n - slack or low > q * n + slack:
                problems.append(f"{group}: {name} {v} ranks {low}..{high}, wanted ~{q * n:.0f}")
    problems += [f"{g}: in the Python pass only" for g in set(exact) - found]
    return problems


def main() -> int:
    """``python bench/_span_pass.py TRACES SPARK_LATENCY_TABLE ACCURACY``: the pass, timed, in a
    process of its own (its peak memory is its own); prints JSON: seconds, peak_rss_mb, the
    disagreements with the Spark table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("traces", type=Path)
    parser.add_argument("spark_latency", type=Path)
    parser.add_argument("accuracy", type=int)
    args = parser.parse_args()
    started = time.monotonic()
    groups, _ = durations(args.traces)
    latency(groups)
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the pass's, not the check's
    import pyarrow.parquet as pq  # after the timing: the pass itself needs no pyarrow

    problems = agrees(groups, pq.read_table(args.spark_latency).to_pylist(), args.accuracy)
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak, "problems": problems}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
