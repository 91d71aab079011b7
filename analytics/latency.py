"""Latency, the consistency-level mix, error rates and the CMS commit by phase, from the span
table.

Percentiles are Spark's ``percentile_approx`` with accuracy ``ACCURACY`` (a setting): the value
it gives for quantile q is a duration of the group whose rank is within ``n / accuracy`` of
``q * n`` — exact for groups smaller than the accuracy. Durations are milliseconds.

A group's ``node`` or ``consistency`` is ``*`` in the row that covers all of them, and ``""`` for
spans that have none (a CMS commit has no consistency level).
"""

from __future__ import annotations

import grpc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from epochal.analytics.critical_path import FIRST_PHASE
from epochal.analytics.spans import attribute
from epochal.telemetry import attributes as attr

QUANTILES = (0.5, 0.9, 0.99, 0.999)
QUANTILE_NAMES = ("p50", "p90", "p99", "p999")
ACCURACY = 10_000
ALL = "*"
CLIENT_WRITE = f"{attr.CLIENT_CALL_PREFIX}write"  # the SDK's calls
CLIENT_READ = f"{attr.CLIENT_CALL_PREFIX}read"
CLIENT_COMMIT = f"{attr.CLIENT_CALL_PREFIX}commit"
STATUS_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def percentiles(value: str, accuracy: int, suffix: str = "_ms") -> list[Column]:
    """count, mean, the four percentiles and max of ``value``, as aggregate columns."""
    approx = F.percentile_approx(value, list(QUANTILES), accuracy)
    return [
        F.count(value).alias("count"),
        F.avg(value).alias(f"mean{suffix}"),
        *(approx[i].alias(f"{name}{suffix}") for i, name in enumerate(QUANTILE_NAMES)),
        F.max(value).alias(f"max{suffix}"),
    ]


def _grouped(spans: DataFrame) -> DataFrame:
    return spans.select(
        "service",
        F.col("name").alias("operation"),
        F.coalesce("node", F.lit("")).alias("node"),
        F.coalesce(attribute(attr.CONSISTENCY), F.lit("")).alias("consistency"),
        "duration_ms",
        "error",
        "start_time",
    )


def latency(spans: DataFrame, accuracy: int) -> DataFrame:
    """Per service, operation, consistency level and node; and per level over all nodes, and
    per operation over all levels and nodes (``*``)."""
    return _by_level_and_node(_grouped(spans), (), accuracy)


def latency_windows(spans: DataFrame, accuracy: int, window_s: int) -> DataFrame:
    """The same per time window (``window_s`` long, by span start: ``window_start``)."""
    windowed = _grouped(spans).withColumn(
        "window_start", F.window("start_time", f"{window_s} seconds")["start"]
    )
    return _by_level_and_node(windowed, ("window_start",), accuracy)


def _by_level_and_node(grouped: DataFrame, first: tuple[str, ...], accuracy: int) -> DataFrame:
    keys = (*first, "service", "operation", "consistency", "node")
    sets = [list(keys), list(keys[:-1]), list(keys[:-2])]  # by node; all nodes; all levels too
    table = grouped.groupingSets(sets, *keys).agg(
        *percentiles("duration_ms", accuracy),
        F.sum(F.col("error").cast("int")).alias("errors"),
        F.grouping("node").alias("_all_nodes"),
        F.grouping("consistency").alias("_all_levels"),
    )
    return table.select(
        *first,
        "service",
        "operation",
        F.when(F.col("_all_levels") == 1, ALL).otherwise(F.col("consistency")).alias("consistency"),
        F.when(F.col("_all_nodes") == 1, ALL).otherwise(F.col("node")).alias("node"),
        *(c for c in table.columns if c not in (*keys, "_all_nodes", "_all_levels")),
    )


def consistency_mix(spans: DataFrame) -> DataFrame:
    """Writes and reads by consistency level, as the SDK asked them (``client.*``) and as the
    coordinators served them (``replica.write``/``replica.read``): count and share."""
    operations = [attr.REPLICA_WRITE, attr.REPLICA_READ, CLIENT_WRITE, CLIENT_READ]
    counted = (
        spans.where(F.col("name").isin(operations) & attribute(attr.CONSISTENCY).isNotNull())
        .groupBy(
            "service",
            F.col("name").alias("operation"),
            attribute(attr.CONSISTENCY).alias("consistency"),
        )
        .agg(F.count(F.lit(1)).alias("count"), F.sum(F.col("error").cast("int")).alias("errors"))
    )
    total = F.sum("count").over(Window.partitionBy("service", "operation"))
    return counted.withColumn("share", F.col("count") / total)


def errors(spans: DataFrame) -> DataFrame:
    """Per service, operation and gRPC status (``OK`` for a span that did not fail, the status
    it was answered with, else ``ERROR``: a failed span with no code, or code 0): spans and their
    share of the operation's."""
    code = attribute(attr.STATUS_CODE)
    names = F.create_map(*(F.lit(x) for pair in STATUS_NAMES.items() for x in pair))
    status = (
        F.when(~F.col("error"), F.lit("OK"))
        .when(code.isNotNull() & (code != 0), names[code])
        .otherwise(F.lit("ERROR"))
    )
    counted = spans.groupBy(
        "service", F.col("name").alias("operation"), status.alias("status")
    ).agg(F.count(F.lit(1)).alias("spans"))
    by_operation = Window.partitionBy("service", "operation")
    return counted.withColumn(
        "rate", F.col("spans") / F.sum("spans").over(by_operation)
    ).withColumn(
        "operation_error_rate",
        F.sum(F.when(F.col("status") != "OK", F.col("spans")).otherwise(0)).over(by_operation)
        / F.sum("spans").over(by_operation),
    )


def commit_phase_times(spans: DataFrame) -> DataFrame:
    """One row per phase of each commit the leader served (its ``cms.commit`` with phase
    events): the time from the phase's start to the next event. ``received`` runs from the
    span's start to ``queued``; ``applied`` to ``answered``."""
    times = F.map_from_entries(F.transform("events", lambda e: F.struct(e["name"], e["time_ns"])))
    queued = F.exists("events", lambda e: e["name"] == attr.PHASE_QUEUED)
    led = spans.where((F.col("name") == attr.CMS_COMMIT) & queued).select(
        "trace_id",
        "span_id",
        attribute(attr.TRANSFORMATION).alias("transformation"),
        "start_ns",
        times.alias("t"),
    )
    bounds = ["start", *attr.COMMIT_PHASES]
    phases = [FIRST_PHASE, *attr.COMMIT_PHASES[:-1]]
    at = {"start": F.col("start_ns"), **{p: F.col("t")[p] for p in attr.COMMIT_PHASES}}
    rows = F.array(
        *(
            F.struct(
                F.lit(phase).alias("phase"),
                ((at[bounds[i + 1]] - at[bounds[i]]) / 1e6).alias("duration_ms"),
            )
            for i, phase in enumerate(phases)
        )
    )
    return led.select("trace_id", "span_id", "transformation", F.inline(rows)).where(
        F.col("duration_ms").isNotNull()
    )


def commit_phases(spans: DataFrame, accuracy: int) -> DataFrame:
    """Percentiles of each phase of the leader's commits, per transformation kind and over all
    kinds (``*``)."""
    phases = commit_phase_times(spans).withColumn(
        "transformation", F.coalesce("transformation", F.lit(""))
    )
    grouped = phases.groupingSets(
        [["transformation", "phase"], ["phase"]], "transformation", "phase"
    ).agg(*percentiles("duration_ms", accuracy), F.grouping("transformation").alias("_all"))
    return grouped.select(
        F.when(F.col("_all") == 1, ALL).otherwise(F.col("transformation")).alias("transformation"),
        *(c for c in grouped.columns if c not in ("transformation", "_all")),
    )
