"""The analytics dashboard page (epochal.analytics.dashboard.render): self-contained (plotly
inline, nothing fetched), a chart per table with data, the thresholds drawn and the crossed ones
listed at the top."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from epochal.analytics import dashboard, thresholds
from epochal.telemetry import attributes as attr

T = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)


def latency_row(operation: str, level: str, node: str = "*", **extra: Any) -> dict[str, Any]:
    return {"service": "replica", "operation": operation, "consistency": level, "node": node,
            "count": 10, "p50_ms": 1.0, "p90_ms": 2.0, "p99_ms": 3.0, "p999_ms": 4.0,
            "max_ms": 5.0, "mean_ms": 1.5, "errors": 0, **extra}  # fmt: skip


def tables() -> dict[str, list[dict[str, Any]]]:
    measured = {t.metric: None for t in thresholds.THRESHOLDS}
    measured[thresholds.BARRIER.metric] = 6.0  # a warning
    measured[thresholds.COMMIT_LATENCY.metric] = 0.01
    return {
        "latency": [latency_row(attr.REPLICA_WRITE, "*"), latency_row(attr.REPLICA_WRITE, "ONE")],
        "latency_windows": [
            latency_row(attr.REPLICA_WRITE, "QUORUM", window_start=T),
            latency_row(attr.CMS_COMMIT, "*", window_start=T, service="cms"),
        ],
        "commit_latency_windows": [{"window_start": "2026-11-29 09:00:00", "p99_s": 0.01}],
        "commit_phases": [
            {"transformation": "*", "phase": p, "p50_ms": 1.0, "p99_ms": 2.0}
            for p in ("received", *attr.COMMIT_PHASES[:-1])
        ],
        "consistency_mix": [
            {
                "service": "replica",
                "operation": attr.REPLICA_WRITE,
                "consistency": "ONE",
                "count": 3,
                "share": 1.0,
            },
        ],
        "errors": [
            {
                "service": "replica",
                "operation": attr.REPLICA_WRITE,
                "status": "OK",
                "rate": 0.9,
                "operation_error_rate": 0.1,
            },
            {
                "service": "replica",
                "operation": attr.REPLICA_WRITE,
                "status": "UNAVAILABLE",
                "rate": 0.1,
                "operation_error_rate": 0.1,
            },
        ],
        "epoch_propagation_nodes": [{"node": "node-1", "p50_ms": 3.0, "p99_ms": 9.0}],
        "epochs_behind": [{"node": "node-1", "behind_s": 0.0}],
        "reconciliation_lag_minutes": [
            {"keyspace": "shop", "range": "(0, 10]", "minute": T, "lag_s": 5.5}
        ],
        "dependencies": [{"caller": "application", "callee": "replica", "calls": 7}],
        "critical_path_summary": [
            {
                "operation": "client.write",
                "band": "p50",
                "service": "replica",
                "span": attr.REPLICA_WRITE,
                "phase": attr.REPLICA_WRITE,
                "share": 0.6,
            },
        ],
        "thresholds": thresholds.rows(measured),
    }


def test_the_page_is_self_contained_with_a_chart_of_data_per_table() -> None:
    page = dashboard.render(tables(), {"spans": 123, "traces": 4, "inputs": ["traces/"]})
    assert not re.search(r"<(script|link|img)[^>]*\b(src|href)=", page)  # nothing to fetch
    assert "Plotly.newPlot" in page and len(page) > 1_000_000  # the library is in the page
    for name, figure in dashboard._charts(tables()):
        assert f'id="chart-{name}"' in page
        points = sum(len(getattr(trace, "y", None) or getattr(trace, "value", None) or
                         trace.link.value) for trace in figure.data)  # fmt: skip
        assert figure.data and points > 0, name


def test_the_crossed_thresholds_are_listed_at_the_top_and_drawn_as_lines() -> None:
    page = dashboard.render(tables(), {})
    top = page[page.index('<div id="crossed">') : page.index("<section")]
    assert "WARNING" in top and thresholds.BARRIER.metric in top
    assert thresholds.COMMIT_LATENCY.metric not in top  # measured, not crossed
    commit = dashboard.commit_latency_chart(tables()["commit_latency_windows"])
    lines = {shape.y0 for shape in commit.layout.shapes}
    assert lines == {2.0, 10.0}  # the seed's 2 s and 10 s


def test_nothing_crossed_says_so() -> None:
    rows = tables()
    rows["thresholds"] = thresholds.rows({t.metric: None for t in thresholds.THRESHOLDS})
    assert "No threshold crossed." in dashboard.render(rows, {})
