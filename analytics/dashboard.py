"""The job's tables as one static HTML page: interactive plotly charts, the library embedded in the
page (it opens offline, from a file, with nothing fetched), the seed's thresholds drawn on the
charts they apply to, and the crossed ones listed at the top.

``render`` is pure: rows in (plain dicts, as ``collect`` gives them), HTML out. ``collect`` reads
the tables the job wrote, each small (aggregates; the lag per range and minute, not per round).
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from epochal.analytics import latency, thresholds
from epochal.telemetry import attributes as attr

Rows = Sequence[Mapping[str, Any]]
ALL = "*"
TABLES = (
    "latency",
    "latency_windows",
    "commit_latency_windows",
    "commit_phases",
    "consistency_mix",
    "errors",
    "epoch_propagation_nodes",
    "epochs_behind",
    "reconciliation_lag_minutes",
    "dependencies",
    "critical_path_summary",
    "thresholds",
)
WARNING_COLOR, CRITICAL_COLOR = "#d98c00", "#c0392b"
MOST_FAILING = 30
READ_WRITE = (attr.REPLICA_WRITE, attr.REPLICA_READ, latency.CLIENT_WRITE, latency.CLIENT_READ)
# The page's charts, in order (each chart's element is ``chart-<name>``).
CHARTS = (
    "thresholds",
    "latency",
    "latency_windows",
    "commit_latency",
    "commit_phases",
    "epoch_propagation",
    "reconciliation_lag",
    "consistency_mix",
    "errors",
    "dependencies",
    "critical_paths",
)


def _threshold_lines(figure: go.Figure, threshold: thresholds.Threshold, scale: float) -> None:
    """The threshold's warning and critical values as horizontal lines (``scale``: to the
    chart's unit)."""
    for value, color, label in (
        (threshold.warning, WARNING_COLOR, "warning"),
        (threshold.critical, CRITICAL_COLOR, "critical"),
    ):
        if value is not None:
            figure.add_hline(
                y=value * scale,
                line={"color": color, "dash": "dash"},
                annotation_text=f"{label} > {value:g} {threshold.unit}",
            )


def _figure(title: str, y_title: str = "") -> go.Figure:
    figure = go.Figure()
    figure.update_layout(
        title=title, yaxis_title=y_title, height=420, margin={"l": 60, "r": 20, "t": 60, "b": 90}
    )
    return figure


def latency_chart(rows: Rows) -> go.Figure:
    """p50 and p99 per service and operation (all levels and nodes), slowest p99 first."""
    overall = sorted(
        (r for r in rows if r["consistency"] == ALL and r["node"] == ALL),
        key=lambda r: -(r["p99_ms"] or 0),
    )
    names = [f"{r['service']}: {r['operation']}" for r in overall]
    figure = _figure("Latency per operation (all levels and nodes)", "ms (log scale)")
    figure.update_yaxes(type="log")
    for quantile in ("p50_ms", "p99_ms"):
        figure.add_bar(name=quantile.removesuffix("_ms"), x=names, y=[r[quantile] for r in overall])
    return figure


def commit_latency_chart(rows: Rows) -> go.Figure:
    """The commit-latency threshold's own measure — the p99 of successful commits at the member
    a client called, per sliding 5-minute window — against the seed's 2 s and 10 s."""
    windows = sorted(rows, key=lambda r: r["window_start"])
    figure = _figure("CMS commit latency: p99 per 5-minute window (the threshold's measure)", "s")
    figure.add_scatter(
        name="p99",
        mode="lines+markers",
        x=[r["window_start"] for r in windows],
        y=[r["p99_s"] for r in windows],
    )
    figure.update_yaxes(type="log")  # milliseconds and the 10 s line on one chart
    _threshold_lines(figure, thresholds.COMMIT_LATENCY, 1)
    return figure


def windows_chart(rows: Rows) -> go.Figure:
    """p99 per window of each operation's coordinator and client spans, by level."""
    lines: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["node"] == ALL and r["consistency"] not in (ALL, "") and r["operation"] in READ_WRITE:
            lines[f"{r['operation']} {r['consistency']}"].append(r)
    figure = _figure("Read and write latency over time by level (p99)", "ms")
    for name, points in sorted(lines.items()):
        points.sort(key=lambda r: r["window_start"])
        figure.add_scatter(
            name=name,
            mode="lines+markers",
            x=[r["window_start"] for r in points],
            y=[r["p99_ms"] for r in points],
        )
    return figure


def phases_chart(rows: Rows) -> go.Figure:
    """The leader's commit by phase: p50 and p99 of each, over all transformations."""
    order = ["received", *attr.COMMIT_PHASES[:-1]]
    by_phase = {r["phase"]: r for r in rows if r["transformation"] == ALL}
    phases = [p for p in order if p in by_phase]
    figure = _figure("CMS commit by phase (the leader's commits)", "ms")
    for quantile in ("p50_ms", "p99_ms"):
        figure.add_bar(
            name=quantile.removesuffix("_ms"), x=phases, y=[by_phase[p][quantile] for p in phases]
        )
    return figure


def propagation_chart(nodes: Rows, behind: Rows) -> go.Figure:
    """Per node, its propagation's p50 and p99 (ms), and the longest it was far behind (s)."""
    ordered = sorted(nodes, key=lambda r: r["node"])
    figure = _figure("Epoch propagation per node", "ms")
    for quantile in ("p50_ms", "p99_ms"):
        figure.add_bar(
            name=quantile.removesuffix("_ms"),
            x=[r["node"] for r in ordered],
            y=[r[quantile] for r in ordered],
        )
    behind_by_node = sorted(behind, key=lambda r: r["node"])
    figure.add_scatter(
        name=f"longest > {thresholds.BEHIND_EPOCHS} epochs behind (s)",
        mode="markers",
        yaxis="y2",
        x=[r["node"] for r in behind_by_node],
        y=[r["behind_s"] for r in behind_by_node],
    )
    figure.update_layout(yaxis2={"title": "s", "overlaying": "y", "side": "right"})
    warning = thresholds.EPOCH_SPREAD.warning
    figure.add_shape(  # on the right-hand axis (seconds), where the longest-behind points are
        type="line",
        xref="paper",
        x0=0,
        x1=1,
        yref="y2",
        y0=warning,
        y1=warning,
        line={"color": WARNING_COLOR, "dash": "dash"},
    )
    figure.add_annotation(
        xref="paper",
        x=1,
        yref="y2",
        y=warning,
        showarrow=False,
        yanchor="bottom",
        text=f"warning: > {thresholds.BEHIND_EPOCHS} epochs behind for > {warning:g} s",
    )
    return figure


def lag_chart(rows: Rows) -> go.Figure:
    """Reconciliation lag per range over time (the worst of each minute)."""
    lines: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        lines[f"{r['keyspace']} {r['range']}"].append(r)
    figure = _figure("Reconciliation lag per range", "s")
    for name, points in sorted(lines.items()):
        points.sort(key=lambda r: r["minute"])
        figure.add_scatter(
            name=name, mode="lines", x=[r["minute"] for r in points], y=[r["lag_s"] for r in points]
        )
    return figure


def mix_chart(rows: Rows) -> go.Figure:
    figure = _figure("Consistency-level mix", "requests")
    by_operation: dict[str, dict[str, int]] = defaultdict(dict)
    for r in rows:
        by_operation[f"{r['service']}: {r['operation']}"][r["consistency"]] = r["count"]
    levels = sorted({level for counts in by_operation.values() for level in counts})
    names = sorted(by_operation)
    for level in levels:
        figure.add_bar(name=level, x=names, y=[by_operation[n].get(level, 0) for n in names])
    figure.update_layout(barmode="stack")
    return figure


def errors_chart(rows: Rows) -> go.Figure:
    """Per operation, the share of its spans that failed, by the gRPC status they ended with
    (the 30 operations that fail most; an operation that never failed shows 0)."""
    rate = {f"{r['service']}: {r['operation']}": r["operation_error_rate"] for r in rows}
    names = sorted(rate, key=lambda n: (-rate[n], n))[:MOST_FAILING]
    figure = _figure("Error rates by status", "share of spans")
    statuses = sorted({r["status"] for r in rows if r["status"] != "OK"})
    for status in statuses or ["none failed"]:
        shares = {
            f"{r['service']}: {r['operation']}": r["rate"] for r in rows if r["status"] == status
        }
        figure.add_bar(name=status, x=names, y=[shares.get(n, 0.0) for n in names])
    figure.update_layout(barmode="stack")
    return figure


def dependency_chart(rows: Rows) -> go.Figure:
    """Caller service → callee service, sized by calls (a Sankey diagram)."""
    services = sorted({r["caller"] for r in rows} | {r["callee"] for r in rows})
    callers = [f"{s} (calls)" for s in services]
    index = {name: i for i, name in enumerate([*callers, *services])}
    calls: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        calls[(r["caller"], r["callee"])] += r["calls"]
    figure = go.Figure(
        go.Sankey(
            node={"label": [*callers, *services]},
            link={
                "source": [index[f"{caller} (calls)"] for caller, _ in calls],
                "target": [index[callee] for _, callee in calls],
                "value": list(calls.values()),
            },
        )
    )
    figure.update_layout(title="Service dependencies (calls)", height=420)
    return figure


def critical_path_chart(rows: Rows) -> go.Figure:
    """Per operation and band (p50, p99), the share of the time each service and phase holds."""
    bars = sorted({(r["operation"], r["band"]) for r in rows})
    names = [f"{operation} {band}" for operation, band in bars]
    held: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        phase = r["phase"] if r["phase"] != r["span"] else ""
        held[f"{r['service']}: {r['span']}{' / ' + phase if phase else ''}"][
            f"{r['operation']} {r['band']}"
        ] = r["share"]
    figure = _figure("Where the time goes: critical path by operation, at p50 and p99", "share")
    for part, shares in sorted(held.items()):
        figure.add_bar(name=part, x=names, y=[shares.get(n, 0) for n in names])
    figure.update_layout(barmode="stack", height=560)
    return figure


def thresholds_chart(rows: Rows) -> go.Figure:
    """Each measured threshold as its share of the warning value (1: at the threshold)."""
    measured = [r for r in rows if r["measured"] is not None and r["warning"]]
    figure = _figure("Seed thresholds: measured / warning", "× warning")
    figure.add_bar(
        x=[r["metric"] for r in measured],
        y=[r["measured"] / r["warning"] for r in measured],
        marker_color=[
            CRITICAL_COLOR
            if r["state"] == "critical"
            else WARNING_COLOR
            if r["state"] == "warning"
            else "#2e86c1"
            for r in measured
        ],
    )
    figure.add_hline(y=1, line={"color": WARNING_COLOR, "dash": "dash"}, annotation_text="warning")
    return figure


def _charts(tables: Mapping[str, Rows]) -> list[tuple[str, go.Figure]]:
    figures = (
        thresholds_chart(tables["thresholds"]),
        latency_chart(tables["latency"]),
        windows_chart(tables["latency_windows"]),
        commit_latency_chart(tables["commit_latency_windows"]),
        phases_chart(tables["commit_phases"]),
        propagation_chart(tables["epoch_propagation_nodes"], tables["epochs_behind"]),
        lag_chart(tables["reconciliation_lag_minutes"]),
        mix_chart(tables["consistency_mix"]),
        errors_chart(tables["errors"]),
        dependency_chart(tables["dependencies"]),
        critical_path_chart(tables["critical_path_summary"]),
    )
    return list(zip(CHARTS, figures, strict=True))


def _limits(row: Mapping[str, Any]) -> str:
    """ "warning &gt; 2, critical &gt; 10" (the critical part only where the seed gives one)."""
    limits = [f"warning &gt; {row['warning']:g}"]
    if row["critical"] is not None:
        limits.append(f"critical &gt; {row['critical']:g}")
    return ", ".join(limits)


def _crossed(rows: Rows) -> str:
    crossed = [r for r in rows if r["state"] in ("warning", "critical")]
    if not crossed:
        return '<p class="ok">No threshold crossed.</p>'
    items = "".join(
        f'<li class="{html.escape(r["state"])}"><b>{html.escape(r["state"].upper())}</b> '
        f"{html.escape(r['metric'])}: {r['measured']:.3f} {html.escape(r['unit'])} "
        f"({_limits(r)})</li>"
        for r in crossed
    )
    return f"<ul>{items}</ul>"


def render(tables: Mapping[str, Rows], summary: Mapping[str, Any]) -> str:
    """The dashboard page: the crossed thresholds, then a chart per table."""
    sections = "\n".join(
        f'<section id="{name}">'
        f"{figure.to_html(full_html=False, include_plotlyjs=False, div_id=f'chart-{name}')}"
        "</section>"
        for name, figure in _charts(tables)
    )
    inputs = html.escape(", ".join(summary.get("inputs", [])))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Epochal trace analytics</title>
<script type="text/javascript">{get_plotlyjs()}</script>
<style>body{{font-family:sans-serif;margin:2em}} .warning{{color:{WARNING_COLOR}}}
.critical{{color:{CRITICAL_COLOR}}} .ok{{color:#1e8449}} section{{margin-bottom:2em}}</style>
</head><body>
<h1>Epochal trace analytics</h1>
<p>{summary.get("spans", 0):,} spans of {summary.get("traces", 0):,} traces from {inputs}</p>
<h2>Thresholds crossed</h2>
<div id="crossed">{_crossed(tables["thresholds"])}</div>
{sections}
</body></html>
"""


def rows_of(frames: Iterable[tuple[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``(name, DataFrame)`` pairs as rows (each table small: an aggregate)."""
    return {name: [row.asDict(recursive=True) for row in frame.collect()] for name, frame in frames}
