"""Seed 001's alert thresholds ("Monitoring Recommendations") against what the traces measured.

The same rows as ``deploy/prometheus/alerts.yml``, measured from spans instead of metrics, over
the whole run the files hold (the worst window where the seed gives a rate):

- commit latency (s): the worst 5-minute p99 of successful ``cms.commit`` at the member a
  client called;
- commit retries per minute: attempts beyond the first of ``client.commit``,
  ``replica.commit`` and ``reconciler.commit``, the worst minute;
- fetch-log latency (s): p99 of ``cms.fetch_log`` (the seed: "should be < 1 s");
- progress barrier (s): the longest ``replica.progress_barrier``;
- consistency-level relaxations per hour: ``relaxed`` events of the barriers, the worst hour;
- coordinators behind per minute: coordinator spans that found their plan behind
  (``epochal.behind``), the worst minute;
- epochs behind for > 60 s: the longest a node was more than 10 epochs behind the leader
  (``longest_behind``);
- unreachable CMS members: not in the traces (the metric ``epochal_cms_unreachable_members``).

``state`` is ``critical``, ``warning``, ``ok`` or ``not measured`` (no span to measure it by).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from epochal.analytics.latency import CLIENT_COMMIT
from epochal.analytics.spans import attribute
from epochal.telemetry import attributes as attr

SLIDES = 6  # windows start every sixth of their length
COMMIT_WINDOW_S = 300  # the commit latency's p99: over 5 minutes, as the alert rule takes it
BEHIND_EPOCHS = 10  # the seed: epoch difference between nodes > 10 for > 60 s


@dataclass(frozen=True, slots=True)
class Threshold:
    metric: str
    unit: str
    warning: float | None  # crossed when measured > warning
    critical: float | None
    how: str


COMMIT_LATENCY = Threshold(
    "commit_latency_p99", "s", 2.0, 10.0, "worst 5-minute p99 of successful cms.commit"
)
COMMIT_RETRIES = Threshold(
    "commit_retries_per_minute", "1/min", 5.0, 20.0, "commit attempts beyond the first"
)
FETCH_LOG = Threshold("fetch_log_latency_p99", "s", 1.0, None, "p99 of cms.fetch_log")
BARRIER = Threshold(
    "progress_barrier_duration_max", "s", 5.0, 30.0, "longest replica.progress_barrier"
)
RELAXATIONS = Threshold(
    "barrier_relaxations_per_hour", "1/h", 1.0, 5.0, "relaxed events of the barriers"
)
COORDINATOR_BEHIND = Threshold(
    "coordinator_behind_per_minute", "1/min", 10.0, 50.0, "requests planned on stale metadata"
)
EPOCH_SPREAD = Threshold(
    "epochs_behind_over_10_longest",
    "s",
    60.0,
    None,
    "longest a node was more than 10 epochs behind the leader",
)
UNREACHABLE = Threshold(
    "cms_unreachable_members",
    "members",
    0.0,
    None,
    "not in traces: epochal_cms_unreachable_members",
)
THRESHOLDS = (
    UNREACHABLE,
    COMMIT_LATENCY,
    COMMIT_RETRIES,
    FETCH_LOG,
    BARRIER,
    RELAXATIONS,
    COORDINATOR_BEHIND,
    EPOCH_SPREAD,
)


def _windows(seconds: int) -> Column:
    """Windows of ``seconds`` by span start, sliding by a sixth of their length, so a burst
    across a boundary is seen whole (as Prometheus's ``increase[1m]`` sees it, every 10 s)."""
    return F.window("start_time", f"{seconds} seconds", f"{max(seconds // SLIDES, 1)} seconds")


def _worst_window(rows: DataFrame, value: Column, seconds: int) -> float | None:
    """An aggregate over ``rows`` per window of ``seconds`` (``_windows``), then the worst."""
    per_window = rows.groupBy(_windows(seconds)).agg(value.alias("v"))
    return per_window.agg(F.max("v")).first()[0]


def commit_latency_windows(spans: DataFrame, accuracy: int) -> DataFrame:
    """The p99 (s) of successful commits at the CMS member a client called, per 5-minute window
    (sliding): what the commit-latency threshold is measured by, and the dashboard draws."""
    called = spans.where(
        (F.col("name") == attr.CMS_COMMIT)
        & (attribute(attr.OUTCOME).isin(attr.COMMITTED, attr.DUPLICATE_COMMIT))
    )
    parents = spans.select(
        "trace_id", F.col("span_id").alias("parent_span_id"), F.col("name").alias("parent")
    )
    at_member = called.join(parents, ["trace_id", "parent_span_id"], "left").where(
        F.col("parent").isNull() | (F.col("parent") != attr.CMS_COMMIT)
    )
    per_window = at_member.groupBy(_windows(COMMIT_WINDOW_S).alias("w")).agg(
        F.count(F.lit(1)).alias("commits"),
        (F.percentile_approx("duration_ms", 0.99, accuracy) / 1e3).alias("p99_s"),
    )
    return per_window.select(F.col("w.start").alias("window_start"), "commits", "p99_s")


def measure(
    spans: DataFrame, behind: DataFrame, commits: DataFrame, accuracy: int
) -> dict[str, float | None]:
    """Each threshold's measured value (None: nothing to measure it by); ``commits``: the
    ``commit_latency_windows`` table."""
    p99 = F.percentile_approx("duration_ms", 0.99, accuracy) / 1e3
    committing = spans.where(
        F.col("name").isin(CLIENT_COMMIT, attr.REPLICA_COMMIT, attr.RECONCILER_COMMIT)
    )
    barriers = spans.where(F.col("name") == attr.REPLICA_PROGRESS_BARRIER)
    relaxed = barriers.select(
        "start_time",
        F.size(F.filter("events", lambda e: e["name"] == attr.BARRIER_RELAXED)).alias("n"),
    )
    coordinators = spans.where(
        F.col("name").isin(attr.REPLICA_WRITE, attr.REPLICA_READ)
        & (F.size(attribute(attr.BEHIND)) > 0)
    )
    fetches = spans.where(F.col("name") == attr.CMS_FETCH_LOG)
    retries = F.sum(F.greatest(F.coalesce(attribute(attr.ATTEMPTS), F.lit(1)) - 1, F.lit(0)))
    return {
        UNREACHABLE.metric: None,
        COMMIT_LATENCY.metric: commits.agg(F.max("p99_s")).first()[0],
        COMMIT_RETRIES.metric: _zero(_worst_window(committing, retries, 60), committing),
        FETCH_LOG.metric: fetches.agg(p99).first()[0],
        BARRIER.metric: barriers.agg(F.max("duration_ms") / 1e3).first()[0],
        RELAXATIONS.metric: _zero(_worst_window(relaxed, F.sum("n"), 3600), barriers),
        COORDINATOR_BEHIND.metric: _zero(
            _worst_window(coordinators, F.count(F.lit(1)), 60),
            spans.where(F.col("name").isin(attr.REPLICA_WRITE, attr.REPLICA_READ)),
        ),
        EPOCH_SPREAD.metric: behind.agg(F.max("behind_s")).first()[0],
    }


def _zero(value: float | None, measured_by: DataFrame) -> float | None:
    """A count over no window is 0 when there were spans to count in, else not measured."""
    if value is not None:
        return float(value)
    return None if measured_by.isEmpty() else 0.0


def state_of(threshold: Threshold, measured: float | None) -> str:
    if measured is None:
        return "not measured"
    if threshold.critical is not None and measured > threshold.critical:
        return "critical"
    if threshold.warning is not None and measured > threshold.warning:
        return "warning"
    return "ok"


def rows(measured: dict[str, float | None]) -> list[dict[str, object]]:
    """The thresholds table's rows."""
    return [
        {
            "metric": t.metric,
            "unit": t.unit,
            "warning": t.warning,
            "critical": t.critical,
            "measured": measured[t.metric],
            "state": state_of(t, measured[t.metric]),
            "how": t.how,
        }
        for t in THRESHOLDS
    ]
