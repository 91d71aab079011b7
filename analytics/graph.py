"""The service dependency graph and the critical paths of the traces.

**Dependencies** (what Jaeger's spark-dependencies job computes, per run): a span whose parent
is in another process is a call from the parent's service to its own (a coordinator calling
another replica is replica → replica) — caller service, callee service and the callee's
operation (the span's name), with calls, errors and the callee's latency. The SDK's spans carry
the application's service name (its tracer provider's resource). Links (a Paxos round to the
commits it carries) are not calls and draw no edge.

**Critical paths** (``epochal.analytics.critical_path``): per trace, the chain of spans that
decides when its root ends, each span's exclusive time on it. Aggregated per operation (the
root's name) in two bands of traces — around the median (ranks within 10 % of the traces of
the median's) and the tail (at or above the 99th percentile's rank) — as the mean exclusive
time of each service, span and phase in the band, and its share of the band's mean duration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from epochal.analytics import critical_path as cp
from epochal.analytics.latency import percentiles
from epochal.telemetry import attributes as attr

# The executors need the walk's code, not an installed epochal: send it by value.
cloudpickle.register_pickle_by_value(cp)

PHASE_EVENTS = (*attr.COMMIT_PHASES, attr.BARRIER_RELAXED)
MEDIAN_BAND = 0.1  # traces ranked within 10 % of the traces of the median's rank
TAIL_QUANTILE = 0.99

SEGMENT = StructType(
    [
        StructField("service", StringType()),
        StructField("node", StringType()),
        StructField("span", StringType()),
        StructField("phase", StringType()),
        StructField("span_id", StringType()),
        StructField("start_ns", LongType()),
        StructField("exclusive_ms", DoubleType()),
    ]
)
PATH = StructType(
    [
        StructField("trace_id", StringType()),
        StructField("operation", StringType()),
        StructField("root_service", StringType()),
        StructField("root_span_id", StringType()),
        StructField("duration_ms", DoubleType()),
        StructField("path", ArrayType(SEGMENT)),
    ]
)


def dependencies(spans: DataFrame, accuracy: int) -> DataFrame:
    """Caller service → callee service and operation: calls, errors, callee latency."""
    parents = spans.select(
        "trace_id",
        F.col("span_id").alias("parent_span_id"),
        F.col("service").alias("caller"),
        F.col("service_instance").alias("caller_instance"),
        F.col("name").alias("caller_operation"),
    )
    calls = spans.join(parents, ["trace_id", "parent_span_id"]).where(
        ~F.col("caller_instance").eqNullSafe(F.col("service_instance"))
    )
    return (
        calls.groupBy("caller", F.col("service").alias("callee"), F.col("name").alias("operation"))
        .agg(
            *percentiles("duration_ms", accuracy),
            F.sum(F.col("error").cast("int")).alias("errors"),
            F.collect_set("caller_operation").alias("caller_operations"),
        )
        .withColumnRenamed("count", "calls")
    )


def critical_paths(spans: DataFrame) -> DataFrame:
    """One row per trace: its root (operation, service, duration) and its critical path,
    earliest segment first.

    The spans go to partitions by trace, sorted by trace within each, and the walk reads them
    in Arrow batches, a trace's spans one after another (a trace may run on into the next
    batch). Not ``groupBy().agg(collect_list)``: its map-side lists fall back to a sort after
    128 traces per task anyway, and Row pickling cost three times the walk."""
    ordered = (
        spans.select(
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "service",
            "node",
            "start_ns",
            "end_ns",
            F.transform("events", lambda e: F.struct(e["name"], e["time_ns"])).alias("events"),
        )
        .repartition("trace_id")
        .sortWithinPartitions("trace_id")
    )
    # a function of a module sent by value: no epochal on the executors
    path_row, arrow_schema = cp.path_row, to_arrow_schema(PATH)
    first_phases = {attr.PHASE_QUEUED: cp.FIRST_PHASE}

    def batch_of(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in arrow_schema]
        arrays = [pa.array(c, type=f.type) for c, f in zip(columns, arrow_schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    def walk(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        trace, trace_spans = None, []
        for batch in batches:
            found = []
            for span in batch.to_pylist():
                if span["trace_id"] != trace:
                    if trace_spans:
                        found.append(path_row(trace, trace_spans, PHASE_EVENTS, first_phases))
                    trace, trace_spans = span["trace_id"], []
                trace_spans.append(span)
            yield batch_of([row for row in found if row is not None])
        if trace_spans:
            last = path_row(trace, trace_spans, PHASE_EVENTS, first_phases)
            yield batch_of([last] if last is not None else [])

    return ordered.mapInArrow(walk, PATH)


def critical_path_summary(paths: DataFrame) -> DataFrame:
    """Per operation and band (``p50``, ``p99``): which service, span and phase hold the time."""
    ranked = paths.withColumn(
        "rank",
        F.row_number().over(Window.partitionBy("operation").orderBy("duration_ms", "trace_id")),
    ).withColumn("traces", F.count(F.lit(1)).over(Window.partitionBy("operation")))
    median = F.ceil(F.col("traces") * 0.5)
    in_median = F.abs(F.col("rank") - median) <= F.floor(F.col("traces") * MEDIAN_BAND)
    in_tail = F.col("rank") >= F.ceil(F.col("traces") * TAIL_QUANTILE)
    banded = ranked.select(
        "*",
        F.explode(
            F.array_compact(F.array(F.when(in_median, F.lit("p50")), F.when(in_tail, F.lit("p99"))))
        ).alias("band"),
    )
    band = Window.partitionBy("operation", "band")
    sized = banded.withColumn("band_traces", F.count(F.lit(1)).over(band)).withColumn(
        "band_duration_ms", F.avg("duration_ms").over(band)
    )
    segments = sized.select(
        "operation", "band", "band_traces", "band_duration_ms", F.inline("path")
    )
    held = segments.groupBy(
        "operation", "band", "service", "span", "phase", "band_traces", "band_duration_ms"
    ).agg(F.sum("exclusive_ms").alias("_total_ms"))
    mean = F.col("_total_ms") / F.col("band_traces")
    share = Window.partitionBy("operation", "band").orderBy(  # ties broken: the same everywhere
        F.col("mean_exclusive_ms").desc(), "service", "span", "phase"
    )
    return (
        held.withColumn("mean_exclusive_ms", mean)
        .withColumn("share", F.col("mean_exclusive_ms") / F.col("band_duration_ms"))
        .withColumn("place", F.row_number().over(share))
        .drop("_total_ms")
    )
