"""Span files to the span table: one row per span, resource and attributes as columns.

The reader takes every ``*.jsonl`` file under the paths given, in folders at any depth (a
dev cluster's ``traces/``, several runs' folders side by side). A line that is not JSON — a
process killed mid-write leaves a truncated last line — is dropped and counted, never fatal. A
restart appends to its file, so one file may hold several runs; a span read twice (the same file
given twice, a copied folder) is kept once, by trace and span id.

Times: ``start_ns``/``end_ns`` (Unix nanoseconds, cast from the file's strings), ``duration_ms``
(double) and ``start_time`` (a timestamp, for time windows).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from epochal.analytics import columns
from epochal.analytics.schema import CORRUPT, TRACES_DATA

SPAN_FILES = "*.jsonl"
STATUS_ERROR = 2  # OTLP Status.code: 0 unset, 1 ok, 2 error


def read_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The files' lines, parsed by the explicit schema (``_corrupt_record`` set on a bad one)."""
    return (
        spark.read.schema(TRACES_DATA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", SPAN_FILES)
        .json(list(paths))
    )


def _text(value: Column) -> Column:
    """A scalar AnyValue as text (integers stay exact: the file has them as strings)."""
    return F.coalesce(
        value["stringValue"],
        value["intValue"],
        value["boolValue"].cast("string"),
        value["doubleValue"].cast("string"),
    )


def _as_text(value: Column) -> Column:
    """Any AnyValue as text; a list's elements joined by commas."""
    listed = F.array_join(F.transform(value["arrayValue"]["values"], _text), ",")
    return F.coalesce(_text(value), listed)


def _attribute_map(key_values: Column) -> Column:
    """An OTLP attribute list as a map of text (the last value of a key repeated wins)."""
    pairs = F.transform(key_values, lambda kv: F.struct(kv["key"], _as_text(kv["value"])))
    return F.map_from_entries(F.coalesce(pairs, F.array()))


def _typed(attributes: Column, name: str) -> Column:
    text = attributes[name]
    kind = columns.type_of(name)
    if kind == "array<string>":
        return F.when(text == "", F.array().cast(kind)).otherwise(F.split(text, ","))
    return text.try_cast(kind)  # a value of another type: null, not a failed job


def flatten(lines: DataFrame) -> DataFrame:
    """The span table of parsed lines (bad lines dropped)."""
    spans = (
        lines.where(F.col("resourceSpans").isNotNull())
        .select(F.explode("resourceSpans").alias("rs"))
        .select(
            _attribute_map(F.col("rs.resource.attributes")).alias("resource"),
            F.explode("rs.scopeSpans").alias("ss"),
        )
        .select("resource", F.col("ss.scope.name").alias("scope"), F.explode("ss.spans").alias("s"))
    )
    s = F.col("s")
    start_ns = s["startTimeUnixNano"].cast("long")
    end_ns = s["endTimeUnixNano"].cast("long")
    parent = s["parentSpanId"]
    base = spans.select(
        F.lower(s["traceId"]).alias("trace_id"),
        F.lower(s["spanId"]).alias("span_id"),
        F.when(parent == "", None).otherwise(F.lower(parent)).alias("parent_span_id"),
        s["name"].alias("name"),
        s["kind"].alias("kind"),
        F.col("scope"),
        start_ns.alias("start_ns"),
        end_ns.alias("end_ns"),
        ((end_ns - start_ns) / 1e6).alias("duration_ms"),
        F.timestamp_micros(F.floor(start_ns / 1000).cast("long")).alias("start_time"),
        F.coalesce(s["status"]["code"], F.lit(0)).alias("status"),
        s["status"]["message"].alias("status_message"),
        F.transform(
            F.coalesce(s["events"], F.array()),
            lambda e: F.struct(
                e["name"].alias("name"), e["timeUnixNano"].cast("long").alias("time_ns")
            ),
        ).alias("events"),
        F.transform(
            F.coalesce(s["links"], F.array()),
            lambda link: F.struct(
                F.lower(link["traceId"]).alias("trace_id"),
                F.lower(link["spanId"]).alias("span_id"),
            ),
        ).alias("links"),
        _attribute_map(s["attributes"]).alias("attributes"),
        F.col("resource"),
    ).where(F.col("trace_id").isNotNull() & F.col("span_id").isNotNull())
    resource = F.col("resource")
    attributes = F.col("attributes")
    typed = [
        _typed(attributes, name).alias(columns.column_of(name))
        for name in columns.span_attribute_names()
    ]
    flat = base.select(
        *(c for c in base.columns if c != "resource"),
        *(resource[key].alias(column) for key, column in columns.RESOURCE_COLUMNS.items()),
        *typed,
        (F.col("status") == STATUS_ERROR).alias("error"),
    )
    return flat.withColumn(
        "node", F.coalesce(_named("node_id"), _named("resource_node"))
    ).dropDuplicates(["trace_id", "span_id"])


def _named(column: str) -> Column:
    """``column``, null when empty (a replica's follower before it registered names no node)."""
    return F.when(F.col(column) != "", F.col(column))


def processes(spans: DataFrame) -> DataFrame:
    """One row per process (service and instance): the node its spans name (a replica's first
    run names it only once registered, and its resource never: its spans before registering
    belong to that node too), its resource's node, location, and span counts."""
    named = F.max(_named("node_id"))
    resource = F.max(_named("resource_node"))
    return spans.groupBy("service", "service_instance").agg(
        F.coalesce(named, resource, F.first("service_instance")).alias("node"),
        F.max("resource_node").alias("resource_node"),
        F.max("datacenter").alias("datacenter"),
        F.max("rack").alias("rack"),
        F.count(F.lit(1)).alias("spans"),
        F.min("start_time").alias("first_span"),
        F.max("start_time").alias("last_span"),
    )


def with_process_nodes(spans: DataFrame, processes: DataFrame) -> DataFrame:
    """``spans`` with ``node``: the node the span names, else its process's (``processes``, a
    small table, broadcast)."""
    nodes = processes.select("service", "service_instance", F.col("node").alias("_process_node"))
    return (
        spans.join(F.broadcast(nodes), ["service", "service_instance"], "left")
        .withColumn("node", F.coalesce(_named("node_id"), "_process_node"))
        .drop("_process_node")
    )


def bad_lines(lines: DataFrame) -> Column:
    """An aggregate: lines that held no spans' data (not JSON, or not a TracesData)."""
    return F.sum(F.when(F.col("resourceSpans").isNull(), 1).otherwise(0))
