"""The analytics job's tables on span files written by hand (local Spark): the commit's phases,
epoch propagation and how long a node was behind, reconciliation lag from HLC times, the
dependency edges between processes, and seed 001's thresholds — crossed just above them, not at
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from epochal.analytics import graph, latency, propagation, thresholds
from epochal.analytics.spans import flatten, processes, read_lines, with_process_nodes
from epochal.mtrack.hlc import make_hlc
from epochal.telemetry import attributes as attr
from tests.harness.span_files import line, span, write_file

S = 1_000_000_000  # ns
MS = 1_000_000
T0 = 1_800_000_000 * S  # an instant in 2027, on a minute's start


def table(
    spark: SparkSession, folder: Path, *files: tuple[str, str, list[dict[str, Any]]]
) -> DataFrame:
    """The span table (with nodes) of ``files``: (service, node, spans) each, a file each."""
    for i, (service, node, spans) in enumerate(files):
        write_file(folder / f"{service}-{i}.jsonl", line(service, spans, f"{service}-{i}", node))
    flat = flatten(read_lines(spark, [str(folder)]))
    return with_process_nodes(flat, processes(flat))


def commits_every_second(last: int) -> list[dict[str, Any]]:
    """The leader's commits of epochs 1 to ``last``, epoch e chosen at T0 + e seconds."""
    return [
        span(attr.CMS_COMMIT, T0 + e * S, T0 + e * S + MS,
             events=[(attr.PHASE_ACCEPTED, T0 + e * S)], **{attr.EPOCH: e})
        for e in range(1, last + 1)
    ]  # fmt: skip


def test_the_leaders_commit_is_split_into_its_phases(spark: SparkSession, tmp_path: Path) -> None:
    commit = span(
        attr.CMS_COMMIT, T0, T0 + 10 * MS,
        events=[(attr.PHASE_QUEUED, T0 + 1 * MS), (attr.PHASE_VALIDATED, T0 + 3 * MS),
                (attr.PHASE_ACCEPTED, T0 + 6 * MS), (attr.PHASE_APPLIED, T0 + 7 * MS),
                (attr.PHASE_ANSWERED, T0 + 9 * MS)],
        **{attr.TRANSFORMATION: "create_table", attr.EPOCH: 5},
    )  # fmt: skip
    follower = span(attr.CMS_COMMIT, T0, T0 + 11 * MS, **{attr.FORWARDED: True})
    spans = table(spark, tmp_path, ("cms", "cms1", [commit]), ("cms", "cms2", [follower]))
    phases = {r["phase"]: r["duration_ms"] for r in latency.commit_phase_times(spans).collect()}
    assert phases == {
        "received": 1.0,
        "queued": 2.0,
        "validated": 3.0,
        "accepted": 1.0,
        "applied": 2.0,
    }
    rows = latency.commit_phases(spans, 100).collect()
    assert {(r["transformation"], r["phase"]) for r in rows} >= {
        ("create_table", "queued"),
        ("*", "queued"),
    }


def test_propagation_runs_from_the_first_member_to_learn_the_epoch_to_each_apply(
    spark: SparkSession, tmp_path: Path
) -> None:
    led = span(
        attr.CMS_COMMIT,
        T0,
        T0 + 9 * MS,
        events=[(attr.PHASE_ACCEPTED, T0 + 6 * MS)],
        **{attr.EPOCH: 2, attr.TRANSFORMATION: "create_table", attr.OUTCOME: "committed"},
    )
    forwarded = span(
        attr.CMS_COMMIT,
        T0,
        T0 + 4 * MS,  # learnt from the votes: first
        **{attr.EPOCH: 2, attr.FORWARDED: True, attr.OUTCOME: "committed"},
    )
    untraced = span(attr.EPOCH_APPLY, T0 + 1 * MS, T0 + 1 * MS, **{attr.EPOCH: 1})
    applies = [
        span(attr.EPOCH_APPLY, T0 + 5 * MS, T0 + 5 * MS, **{attr.EPOCH: 2}),
        untraced,
    ]
    other = [
        span(attr.EPOCH_APPLY, T0 + 14 * MS, T0 + 14 * MS, **{attr.EPOCH: 2}),
        span(attr.EPOCH_APPLY, T0 + 3 * MS, T0 + 3 * MS, **{attr.EPOCH: 1}),
    ]
    spans = table(
        spark, tmp_path, ("cms", "cms1", [led, forwarded]),
        ("replica", "node-1", applies), ("replica", "node-2", other),
    )  # fmt: skip
    rows = {(r["epoch"], r["node"]): r for r in propagation.epoch_propagation(spans).collect()}
    assert rows[(2, "node-1")]["propagation_ms"] == 1.0  # from the forwarding member's answer
    assert rows[(2, "node-2")]["propagation_ms"] == 10.0
    assert rows[(2, "node-1")]["reference"] == "commit"
    assert rows[(1, "node-2")]["propagation_ms"] == 2.0  # from the first apply anywhere
    assert rows[(1, "node-2")]["reference"] == "first_apply"


def test_the_longest_a_node_was_more_than_ten_epochs_behind(
    spark: SparkSession, tmp_path: Path
) -> None:
    commits = commits_every_second(15)
    prompt = [span(attr.EPOCH_APPLY, T0 + e * S + MS, T0 + e * S + MS, **{attr.EPOCH: e})
              for e in range(1, 16)]  # fmt: skip
    # epoch 2 reaches node-2 71 s after epoch 12 (2 + 10) was committed: at epoch 1 till then
    late = [span(attr.EPOCH_APPLY, T0 + 83 * S, T0 + 83 * S, **{attr.EPOCH: e})
            for e in range(2, 16)]  # fmt: skip
    early = span(attr.EPOCH_APPLY, T0 + S + MS, T0 + S + MS, **{attr.EPOCH: 1})
    spans = table(
        spark, tmp_path, ("cms", "cms1", commits), ("replica", "node-1", prompt),
        ("replica", "node-2", [early, *late]),
    )  # fmt: skip
    epochs = propagation.epoch_propagation(spans)
    longest = propagation.longest_behind(spans, epochs, 10)
    behind = {r["node"]: r["behind_s"] for r in longest.collect()}
    assert behind["node-2"] == pytest.approx(71.0) and behind["node-1"] == 0.0
    measured = thresholds.measure(
        spans, longest, thresholds.commit_latency_windows(spans, 100), 100
    )
    assert (
        thresholds.state_of(thresholds.EPOCH_SPREAD, measured[thresholds.EPOCH_SPREAD.metric])
        == "warning"
    )


def test_a_node_that_stopped_applying_is_behind_until_its_last_span(
    spark: SparkSession, tmp_path: Path
) -> None:
    commits = commits_every_second(15)
    stuck = [
        span(attr.EPOCH_APPLY, T0 + S + MS, T0 + S + MS, **{attr.EPOCH: 1}),
        span(attr.REPLICA_WRITE, T0 + 100 * S, T0 + 100 * S + MS),  # still serving, at epoch 1
    ]
    spans = table(spark, tmp_path, ("cms", "cms1", commits), ("replica", "node-1", stuck))
    longest = propagation.longest_behind(spans, propagation.epoch_propagation(spans), 10)
    # more than 10 behind since epoch 12 (at epoch 1, the leader at 12) was committed at 12 s
    assert [r["behind_s"] for r in longest.collect()] == [pytest.approx(88.0)]


def test_runs_are_kept_apart(spark: SparkSession, tmp_path: Path) -> None:
    """Two clusters' folders: each has its own epoch 1, measured against its own commit."""
    for run, offset in (("monday", 0), ("tuesday", 3600 * S)):
        commit = span(attr.CMS_COMMIT, T0 + offset, T0 + offset + MS,
                      events=[(attr.PHASE_ACCEPTED, T0 + offset)], **{attr.EPOCH: 1})  # fmt: skip
        apply = span(attr.EPOCH_APPLY, T0 + offset + 2 * MS, T0 + offset + 2 * MS,
                     **{attr.EPOCH: 1})  # fmt: skip
        write_file(tmp_path / run / "cms.jsonl", line("cms", [commit], "cms1", "cms1"))
        write_file(tmp_path / run / "replica.jsonl", line("replica", [apply], "r1", "node-1"))
    flat = flatten(read_lines(spark, [str(tmp_path)]))
    spans = with_process_nodes(flat, processes(flat))
    rows = propagation.epoch_propagation(spans).collect()
    assert sorted(r["run"].rsplit("/", 1)[-1] for r in rows) == ["monday", "tuesday"]
    assert [r["propagation_ms"] for r in rows] == [2.0, 2.0]


def test_a_replicas_spans_before_it_registered_belong_to_its_node(
    spark: SparkSession, tmp_path: Path
) -> None:
    before = span(attr.EPOCH_APPLY, T0, T0, **{attr.EPOCH: 1, attr.NODE_ID: ""})
    after = span(attr.EPOCH_APPLY, T0 + S, T0 + S, **{attr.EPOCH: 2, attr.NODE_ID: "node-7"})
    spans = table(spark, tmp_path, ("replica", "127.0.0.1_4000", [before, after]))
    assert {r["node"] for r in spans.collect()} == {"node-7"}


def test_reconciliation_lag_is_the_rounds_end_less_the_newest_bound_reached(
    spark: SparkSession, tmp_path: Path
) -> None:
    base_ms = T0 // MS

    def round_(end_s: int, reached_ms: int) -> dict[str, Any]:
        reached = make_hlc(reached_ms, 3) if reached_ms else 0
        return span(attr.RECONCILE_ROUND, T0 + end_s * S - MS, T0 + end_s * S,
                    **{attr.KEYSPACE: "shop", attr.RANGE: "(0, 10]", attr.OUTCOME: "advanced",
                       attr.RECONCILIATION_TIME: reached, attr.DELIVERED: 1})  # fmt: skip

    rounds = [round_(10, base_ms + 5_000), round_(20, 0), round_(30, base_ms + 28_000)]
    spans = table(spark, tmp_path, ("reconciler", "reconciler1", rounds))
    lag = propagation.reconciliation_lag(spans)
    assert [r["lag_s"] for r in lag.orderBy("end_ns").collect()] == [5.0, 15.0, 2.0]
    (summary,) = propagation.reconciliation_lag_by_range(lag, 100).collect()
    assert (summary["count"], summary["max_s"], summary["last_lag_s"]) == (3, 15.0, 2.0)


def test_a_call_is_an_edge_between_processes_even_of_one_service(
    spark: SparkSession, tmp_path: Path
) -> None:
    write = span(attr.REPLICA_WRITE, T0, T0 + 5 * MS, span_id="0000000000000001")
    local = span(attr.REPLICA_APPLY, T0 + MS, T0 + 2 * MS, parent="0000000000000001")
    remote = span(attr.REPLICA_APPLY, T0 + MS, T0 + 3 * MS, parent="0000000000000001", error=True)
    spans = table(spark, tmp_path, ("replica", "node-1", [write, local]),
                  ("replica", "node-2", [remote]))  # fmt: skip
    (edge,) = graph.dependencies(spans, 100).collect()
    assert (edge["caller"], edge["callee"], edge["operation"]) == (
        "replica",
        "replica",
        attr.REPLICA_APPLY,
    )
    assert (edge["calls"], edge["errors"]) == (1, 1)


@pytest.mark.parametrize(
    ("barrier_s", "relaxed", "behind", "retries", "commit_s", "state"),
    [
        (5.0, 1, 10, 5, 2.0, "ok"),  # at every warning threshold: not crossed
        (5.5, 2, 11, 6, 2.5, "warning"),
        (30.5, 6, 51, 21, 10.5, "critical"),
    ],
)
def test_thresholds_are_crossed_just_above_them_not_at_them(
    spark: SparkSession, tmp_path: Path, barrier_s: float, relaxed: int, behind: int,
    retries: int, commit_s: float, state: str,
) -> None:  # fmt: skip
    barrier = span(
        attr.REPLICA_PROGRESS_BARRIER, T0, T0 + int(barrier_s * S),
        events=[(attr.BARRIER_RELAXED, T0 + MS)] * relaxed,
    )  # fmt: skip
    coordinators = [
        span(attr.REPLICA_WRITE, T0 + i * MS, T0 + i * MS + MS, **{attr.BEHIND: ["schema"]})
        for i in range(behind)
    ]
    commit = span(latency.CLIENT_COMMIT, T0, T0 + MS, **{attr.ATTEMPTS: retries + 1})
    at_member = span(attr.CMS_COMMIT, T0, T0 + int(commit_s * S),
                     **{attr.OUTCOME: attr.COMMITTED, attr.EPOCH: 2})  # fmt: skip
    spans = table(spark, tmp_path, ("replica", "node-1", [barrier, *coordinators]),
                  ("application", "", [commit]), ("cms", "cms1", [at_member]))  # fmt: skip
    empty = spark.createDataFrame([], "node string, behind_s double")
    rows = {
        r["metric"]: r
        for r in thresholds.rows(
            thresholds.measure(spans, empty, thresholds.commit_latency_windows(spans, 100), 100)
        )
    }
    for threshold in (thresholds.BARRIER, thresholds.RELAXATIONS, thresholds.COORDINATOR_BEHIND,
                      thresholds.COMMIT_RETRIES, thresholds.COMMIT_LATENCY):  # fmt: skip
        assert rows[threshold.metric]["state"] == state, rows[threshold.metric]
    assert rows[thresholds.UNREACHABLE.metric]["state"] == "not measured"
