"""The trace analytics job (issue 35) on a real cluster's spans: 3 CMS members, 3 replicas and a
reconciler tracing to files, an application (a separate process with a tracer provider of its
own) making a known workload through the SDK — DDL commits, writes and reads at three levels —
then a fourth replica joining by itself. The cluster stops (every process flushes its spans),
``python -m epochal.analytics`` runs on the folder, and the tables are checked against the
workload and against the spans themselves, read here in plain Python:

- counts per operation equal the workload's;
- every epoch a replica says it applied (``Replica.AppliedEpochs``) has a propagation row for
  that replica, whose apply time is the one the replica reports within ``APPLY_TOLERANCE_NS``;
- latency percentiles are exact ones up to percentile_approx's rank error (n / accuracy);
- the dependency edges are exactly the known call graph;
- each critical path is a chain of spans of its trace whose exclusive times tile the root's
  duration.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from epochal.analytics import columns, dashboard, latency
from epochal.devcluster.cluster import LocalCluster
from epochal.telemetry import attributes as attr
from epochal.wire.channels import channel as open_channel
from epochal.wire.v1 import replica_pb2, replica_pb2_grpc
from tests.harness import QUICK_RECONCILER, browser, run, run_application, start_ring, until
from tests.harness.otlp import ReceivedSpan, folder_spans
from tests.harness.ring import low_bounds_everywhere

pytestmark = pytest.mark.integration

PER_LEVEL = 12  # writes and reads at each level
LEVELS = ("ONE", "QUORUM", "ALL")
TABLES = ("carts", "orders", "items")
DDL_COMMITS = 1 + len(TABLES)  # the keyspace and its tables
APPLY_TOLERANCE_NS = 1_000  # a span's start keeps the nanoseconds; Parquet's double ms does not
JOB_TIMEOUT_S = 600
CLUSTER_TIMEOUT_S = 300
ACCURACY = 100  # small, so the rank error is seen: n / 100 ranks
APPLICATION_SERVICE = "application"

WORKLOAD = textwrap.dedent(
    f"""
    import json, sys
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    spans, replicas = sys.argv[1], sys.argv[2].split(",")
    provider = TracerProvider(resource=Resource.create({{"service.name": "{APPLICATION_SERVICE}"}}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(spans)))
    trace.set_tracer_provider(provider)

    import epochal

    COLUMNS = {{"user": "text", "qty": "int"}}
    with epochal.Client(replicas) as client:
        client.create_keyspace("shop", replication_factor=3, tracked=True)
        for table in {TABLES!r}:
            client.create_table("shop", table, COLUMNS, partition_key=["user"])
        for level in {LEVELS!r}:
            for i in range({PER_LEVEL}):
                row = {{"user": f"{{level}}-{{i}}", "qty": i}}
                client.write("shop", "carts", row, consistency=level)
        for level in {LEVELS!r}:
            for i in range({PER_LEVEL}):
                client.read("shop", "carts", {{"user": f"{{level}}-{{i}}"}}, consistency=level)
    provider.shutdown()
    print(json.dumps({{}}))
    """
)

# caller service -> callee service: the project's call graph (SDK = the application).
CALL_GRAPH = {
    (APPLICATION_SERVICE, "replica"),
    (APPLICATION_SERVICE, "cms"),
    ("replica", "replica"),
    ("replica", "cms"),
    ("cms", "cms"),
    ("reconciler", "replica"),
    ("reconciler", "cms"),
}


def table(out: Path, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(out / name).to_pylist()
    return rows


async def applied_epochs(address: str) -> dict[int, int]:
    """epoch -> apply time (Unix ns), as the replica at ``address`` reports them."""
    async with open_channel(address) as channel:
        stub = replica_pb2_grpc.ReplicaStub(channel)
        answer = await stub.AppliedEpochs(
            replica_pb2.AppliedEpochsRequest(since_epoch=0), timeout=5
        )
    return {e.epoch: e.applied_unix_ns for e in answer.epochs}


@pytest.mark.timeout(CLUSTER_TIMEOUT_S + JOB_TIMEOUT_S + browser.LOAD_TIMEOUT_S)
def test_the_job_turns_a_real_clusters_spans_into_tables_that_match_the_workload(
    tmp_path: Path,
) -> None:
    traces = tmp_path / "traces"
    cluster = LocalCluster(tmp_path / "cluster", env={"EPOCHAL_TRACE_DIR": str(traces)})
    cluster.reconciler_args = QUICK_RECONCILER
    reported: dict[str, dict[int, int]] = {}  # node id -> epoch -> apply time

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        cluster.start_reconciler(cluster.add_reconciler().name)
        await run_application(
            WORKLOAD, tmp_path, str(traces / "application.jsonl"), ",".join(cluster.addresses)
        )
        joining = cluster.add_replica().name
        cluster.start_replica(joining)
        await cluster.wait_joined([joining])

        await until(
            "a reconciliation round reaches every replica",
            lambda: low_bounds_everywhere(cluster, "shop"),
            90,
        )
        for name, replica in cluster.nodes.items():
            node_id = (await cluster.describe(name)).node_id
            reported[node_id] = await applied_epochs(replica.address)
        cluster.stop()  # gracefully: every process flushes its spans

    run(cluster, scenario, timeout_s=CLUSTER_TIMEOUT_S)
    out = tmp_path / "tables"
    job = subprocess.run(
        [sys.executable, "-m", "epochal.analytics", str(traces), "--out", str(out),
         "--accuracy", str(ACCURACY), "--shuffle-partitions", "4"],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr[-4000:]
    assert "thresholds crossed" in job.stdout, job.stdout
    spans = folder_spans(traces)

    counts_match_the_workload(out, spans)
    attribute_types_match_the_columns(spans)
    propagation_matches_what_the_replicas_report(out, spans, reported)
    percentiles_are_exact_within_the_stated_error(out, spans)
    edges_are_the_call_graph(out)
    critical_paths_are_chains_that_tile_their_roots(out, spans)
    the_dashboard_draws_every_table_offline(out / "dashboard.html")


def counts_match_the_workload(out: Path, spans: list[ReceivedSpan]) -> None:
    rows = {
        (r["service"], r["operation"], r["consistency"], r["node"]): r
        for r in table(out, "latency")
    }
    for level in LEVELS:
        for operation in ("client.write", "client.read"):
            row = rows[(APPLICATION_SERVICE, operation, level, latency.ALL)]
            assert row["count"] == PER_LEVEL, (operation, level, row)
            assert row["errors"] == 0, row
        # each attempt that reached a coordinator is one coordinator span
        for operation in (attr.REPLICA_WRITE, attr.REPLICA_READ):
            seen = sum(1 for s in spans if s.name == operation
                       and s.attributes.get(attr.CONSISTENCY) == level)  # fmt: skip
            assert seen >= PER_LEVEL
            assert rows[("replica", operation, level, latency.ALL)]["count"] == seen
    assert rows[(APPLICATION_SERVICE, "client.commit", "", latency.ALL)]["count"] == DDL_COMMITS
    led = {
        r["transformation"]: r["count"]
        for r in table(out, "commit_phases")
        if r["phase"] == "received"
    }
    assert led["create_table"] == len(TABLES) and led["create_keyspace"] == 1, led
    assert led[latency.ALL] == sum(v for k, v in led.items() if k != latency.ALL)
    mix = {
        (r["service"], r["operation"], r["consistency"]): r for r in table(out, "consistency_mix")
    }
    for level in LEVELS:
        row = mix[(APPLICATION_SERVICE, "client.write", level)]
        assert row["count"] == PER_LEVEL and math.isclose(row["share"], 1 / len(LEVELS))
    summary_spans = len({(s.trace_id, s.span_id) for s in spans})
    assert len(table(out, "spans")) == summary_spans


def attribute_types_match_the_columns(spans: list[ReceivedSpan]) -> None:
    """Every attribute the cluster wrote has the type its column says (the job casts by it)."""
    for s in spans:
        for name, value in s.attributes.items():
            kind = columns.type_of(name)
            if kind == "long":
                assert isinstance(value, int) and not isinstance(value, bool), (s.name, name, value)
            elif kind == "boolean":
                assert isinstance(value, bool), (s.name, name, value)
            elif kind == "array<string>":
                assert isinstance(value, list | tuple), (s.name, name, value)
            elif name.startswith("epochal.") and name in columns.span_attribute_names():
                assert isinstance(value, str), (s.name, name, value)


def propagation_matches_what_the_replicas_report(
    out: Path, spans: list[ReceivedSpan], reported: dict[str, dict[int, int]]
) -> None:
    rows = {(r["epoch"], r["node"]): r for r in table(out, "epoch_propagation")}
    assert reported and all(reported.values())
    for node, epochs in reported.items():
        for epoch, applied_ns in epochs.items():
            row = rows.get((epoch, node))
            assert row is not None, f"no propagation row for epoch {epoch} on {node}"
            assert abs(row["apply_ns"] - applied_ns) <= APPLY_TOLERANCE_NS, (row, applied_ns)
    # the first moment a member learnt each epoch chosen: the leader's accepted event, or a
    # forwarding member's answer (it gets the votes itself: it may learn before the leader)
    learnt: dict[int, int] = {}
    asked: dict[int, int] = {}  # the first moment a member had a request that committed it
    for s in spans:
        if s.name != attr.CMS_COMMIT or not s.attributes.get(attr.EPOCH):
            continue
        if s.attributes.get(attr.OUTCOME) == "committed":
            epoch = s.attributes[attr.EPOCH]
            asked[epoch] = min(asked.get(epoch, s.start_ns), s.start_ns)
        times = [t for name, t in s.event_times if name == attr.PHASE_ACCEPTED]
        if (
            not times
            and s.attributes.get(attr.FORWARDED)
            and s.attributes.get(attr.OUTCOME) in ("committed", "duplicate")
        ):
            times = [s.end_ns]
        if times:
            epoch = s.attributes[attr.EPOCH]
            learnt[epoch] = min(learnt.get(epoch, times[0]), times[0])
    for (epoch, _), row in rows.items():
        assert (row["reference"] == "commit") == (epoch in learnt), row
        if epoch in learnt:
            assert row["commit_ns"] == learnt[epoch], row
        if epoch in asked:
            # causality, not timing: no node applies an epoch before a member had the request
            # that a round then chose as it. The commit time is recorded after the moment (the
            # leader's event, a forwarding member's answer): on a loaded core a node applied
            # 1.8 ms before it
            assert row["apply_ns"] >= asked[epoch], row
    per_node = {r["node"]: r for r in table(out, "epoch_propagation_nodes")}
    assert set(reported) <= set(per_node)


def exact_rank_ok(values: list[float], approx: float, q: float, n_error: float) -> bool:
    """``approx`` is a value of ``values`` whose rank is within ``n_error`` of q's."""
    ordered = sorted(values)
    target = max(math.ceil(q * len(ordered)) - 1, 0)
    ranks = [i for i, v in enumerate(ordered) if math.isclose(v, approx, rel_tol=1e-12)]
    return any(abs(i - target) <= n_error + 1 for i in ranks)


def percentiles_are_exact_within_the_stated_error(out: Path, spans: list[ReceivedSpan]) -> None:
    durations: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for s in spans:
        level = str(s.attributes.get(attr.CONSISTENCY, ""))
        durations[(s.service, s.name, level)].append((s.end_ns - s.start_ns) / 1e6)
    checked = 0
    for row in table(out, "latency"):
        if row["node"] != latency.ALL or row["consistency"] == latency.ALL:
            continue
        values = durations[(row["service"], row["operation"], row["consistency"])]
        assert row["count"] == len(values), row
        for q, name in zip(latency.QUANTILES, latency.QUANTILE_NAMES, strict=True):
            approx = row[f"{name}_ms"]
            assert exact_rank_ok(values, approx, q, len(values) / ACCURACY), (row, name)
        assert math.isclose(row["max_ms"], max(values))
        checked += 1
    assert checked >= 10


def edges_are_the_call_graph(out: Path) -> None:
    edges = table(out, "dependencies")
    assert {(e["caller"], e["callee"]) for e in edges} == CALL_GRAPH, edges
    assert all(e["calls"] > 0 for e in edges)


def critical_paths_are_chains_that_tile_their_roots(out: Path, spans: list[ReceivedSpan]) -> None:
    by_trace: dict[str, dict[str, ReceivedSpan]] = defaultdict(dict)
    for s in spans:
        by_trace[s.trace_id][s.span_id] = s
    paths = table(out, "critical_paths")
    assert len(paths) == len(by_trace)
    for row in paths:
        trace = by_trace[row["trace_id"]]
        root = trace[row["root_span_id"]]
        assert row["operation"] == root.name
        path = row["path"]
        if root.end_ns == root.start_ns:  # an instant (epoch.apply): nothing to walk
            assert path == [], row
            continue
        assert path[0]["start_ns"] == root.start_ns
        total_ms = sum(g["exclusive_ms"] for g in path)
        assert math.isclose(total_ms, (root.end_ns - root.start_ns) / 1e6, abs_tol=1e-3), row
        ends = [g["start_ns"] + g["exclusive_ms"] * 1e6 for g in path]
        for end, after in zip(ends, path[1:], strict=False):  # contiguous, earliest first
            assert abs(end - after["start_ns"]) < 1_000, row
        if row["operation"] == "client.write":  # the client waited on the coordinator's work
            assert {attr.REPLICA_WRITE, attr.REPLICA_APPLY} <= {g["span"] for g in path}, path
        for g in path:
            chain = [trace[g["span_id"]]]  # a span of the trace, under the root
            while chain[-1].span_id != root.span_id:
                chain.append(trace[chain[-1].parent_span_id])
            assert all(s.start_ns <= g["start_ns"] <= s.end_ns for s in chain)
    summary = table(out, "critical_path_summary")
    instants = {r["operation"] for r in paths if not r["path"]}
    operations = {r["operation"] for r in paths} - instants
    assert {(r["operation"], r["band"]) for r in summary if r["place"] == 1} == {
        (op, band) for op in operations for band in ("p50", "p99")
    }


def the_dashboard_draws_every_table_offline(page: Path) -> None:
    """In a real headless Chromium: no console error, every chart has data points, nothing
    requested but the file itself; the screenshot is kept (build/test-artifacts)."""
    assert browser.available() == ""
    report = browser.open_page(page, "analytics-dashboard.png")
    assert report.console_errors == []
    assert page.resolve().as_uri() in report.requested  # the log saw the page's own request
    assert all(url.startswith(("file:", "data:", "blob:")) for url in report.requested), (
        report.requested
    )
    assert set(report.chart_points) == {f"chart-{name}" for name in dashboard.CHARTS}
    assert all(points > 0 for points in report.chart_points.values()), report.chart_points
    assert report.screenshot.stat().st_size > 10_000
