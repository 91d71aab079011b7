"""Span files to the span table: one row per span, resource and attributes as columns.

The reader takes every ``*.jsonl`` file under the paths given, in folders at any depth (a
dev cluster's ``traces/``, several runs' folders side by side). A line that is not JSON — a
process killed mid-write leaves a truncated last line — is dropped and counted, never fatal. A
span read twice (a copied file) is kept once, by trace and span id.

**Runs.** Each span's ``run`` is the folder its file is in: a cluster's processes write their
files side by side, a restart appends to its own file (the same run), and another cluster's files
are in another folder. Epoch numbers start again in a new cluster, so everything keyed by epoch,
range or process is keyed by run too.

Times: ``start_ns``/``end_ns`` (Unix nanoseconds, cast from the file's strings), ``duration_ms``
(double) and ``start_time`` (a timestamp, for time windows).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F

from epochal.analytics import columns, storage
from epochal.analytics.schema import CORRUPT, TRACES_DATA

SPAN_FILES = "*.jsonl"
IDS = ("trace_id", "span_id")  # a span's identity
STATUS_ERROR = 2  # OTLP Status.code: 0 unset, 1 ok, 2 error


def _reader(spark: SparkSession) -> DataFrameReader:
    """A reader of span files by the explicit schema (``_corrupt_record`` set on a bad line);
    a fresh one each time: a reader's options stick to it."""
    return (
        spark.read.schema(TRACES_DATA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
    )


def _with_run(lines: DataFrame) -> DataFrame:
    """``lines`` with ``run``: the folder each line's file is in (a cluster's processes write
    side by side; a restart appends to its file: the same run)."""
    return lines.withColumn("run", F.regexp_replace("_metadata.file_path", "/[^/]*$", ""))


def read_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The files' lines, parsed, each with its ``run``. A folder is searched for ``*.jsonl`` at
    any depth; a file named is read whatever its name (the file system says which is which)."""
    folders = [p for p in paths if storage.is_folder(spark, p)]
    files = [p for p in paths if p not in folders]
    parts = []
    if folders:
        found = _reader(spark).option("recursiveFileLookup", "true")
        parts.append(_with_run(found.option("pathGlobFilter", SPAN_FILES).json(folders)))
    if files:
        parts.append(_with_run(_reader(spark).json(files)))
    return functools.reduce(DataFrame.unionByName, parts)


def _hex(value: Column) -> Column:
    """A hex id in lower case (OTLP's JSON ids are hex in either case). Only A-F need mapping:
    Spark's ``lower`` runs ICU's full case mapping (seen in the executors' thread dumps)."""
    return F.translate(value, "ABCDEF", "abcdef")


def _text(value: Column) -> Column:
    """A scalar AnyValue as text (integers stay exact: the file has them as strings)."""
    return F.coalesce(
        value["stringValue"],
        value["intValue"],
        value["boolValue"].cast("string"),
        value["doubleValue"].cast("string"),
    )


def _elements(value: Column) -> Column:
    """A list AnyValue's elements as text (``"arrayValue": {}`` is an empty list)."""
    return F.transform(F.coalesce(value["arrayValue"]["values"], F.array()), _text)


def _as_text(value: Column) -> Column:
    """Any AnyValue as text; a list's elements joined by commas (for the text map only: its
    column keeps the elements)."""
    listed = F.when(value["arrayValue"].isNotNull(), F.array_join(_elements(value), ","))
    return F.coalesce(_text(value), listed)


def _keyed(key_values: Column) -> Column:
    """The attribute list without entries that have no key (a map cannot hold them)."""
    return F.filter(F.coalesce(key_values, F.array()), lambda kv: kv["key"].isNotNull())


def _attribute_map(key_values: Column) -> Column:
    """An OTLP attribute list as a map of text (the last value of a key repeated wins)."""
    pairs = F.transform(_keyed(key_values), lambda kv: F.struct(kv["key"], _as_text(kv["value"])))
    return F.map_from_entries(pairs)


def _list_map(key_values: Column) -> Column:
    """The list attributes of an OTLP attribute list: key -> elements as text."""
    listed = F.filter(_keyed(key_values), lambda kv: kv["value"]["arrayValue"].isNotNull())
    return F.map_from_entries(
        F.transform(listed, lambda kv: F.struct(kv["key"], _elements(kv["value"])))
    )


def _typed(attributes: Column, lists: Column, name: str) -> Column:
    kind = columns.type_of(name)
    if kind == "array<string>":
        return lists[name]
    return attributes[name].try_cast(kind)  # a value of another type: null, not a failed job


def flatten(lines: DataFrame, *, deduplicate: bool = True) -> DataFrame:
    """The span table of parsed lines (bad lines dropped), each span once unless
    ``deduplicate`` is false. Spark drops duplicates of rows this wide (maps, lists, strings) by
    sorting them all: the job writes the table as read and pays that only when ``repeated``."""
    spans = (
        lines.where(F.col("resourceSpans").isNotNull())
        .select("run", F.explode("resourceSpans").alias("rs"))
        .select(
            "run",
            _attribute_map(F.col("rs.resource.attributes")).alias("resource"),
            F.explode("rs.scopeSpans").alias("ss"),
        )
        # the scope's name and its spans taken apart before the spans are exploded: a column the
        # explode's output still needs is copied into every row (the whole batch of spans, per span)
        .select(
            "run",
            "resource",
            F.col("ss.scope.name").alias("scope"),
            F.col("ss.spans").alias("batch"),
        )
        .select("run", "resource", "scope", F.explode("batch").alias("s"))
    )
    s = F.col("s")
    start_ns = s["startTimeUnixNano"].try_cast("long")  # malformed: null, not a failed job
    end_ns = s["endTimeUnixNano"].try_cast("long")
    parent = s["parentSpanId"]
    base = spans.select(
        _hex(s["traceId"]).alias("trace_id"),
        _hex(s["spanId"]).alias("span_id"),
        F.when(parent == "", None).otherwise(_hex(parent)).alias("parent_span_id"),
        s["name"].alias("name"),
        s["kind"].alias("kind"),
        F.col("scope"),
        start_ns.alias("start_ns"),
        end_ns.alias("end_ns"),
        ((end_ns - start_ns) / 1e6).alias("duration_ms"),
        F.timestamp_micros(F.floor(start_ns / 1000).cast("long")).alias("start_time"),
        F.coalesce(s["status"]["code"], F.lit(0)).alias("status"),
        s["status"]["message"].alias("status_message"),
        F.filter(
            F.transform(
                F.coalesce(s["events"], F.array()),
                lambda e: F.struct(
                    e["name"].alias("name"), e["timeUnixNano"].try_cast("long").alias("time_ns")
                ),
            ),
            lambda e: e["time_ns"].isNotNull(),  # an event with no time marks no moment
        ).alias("events"),
        F.transform(
            F.coalesce(s["links"], F.array()),
            lambda link: F.struct(
                _hex(link["traceId"]).alias("trace_id"),
                _hex(link["spanId"]).alias("span_id"),
            ),
        ).alias("links"),
        _attribute_map(s["attributes"]).alias("attributes"),
        _list_map(s["attributes"]).alias("lists"),
        F.col("resource"),
        F.col("run"),
    ).where(F.col("trace_id").isNotNull() & F.col("span_id").isNotNull())
    resource = F.col("resource")
    attributes, lists = F.col("attributes"), F.col("lists")
    typed = [
        _typed(attributes, lists, name).alias(columns.column_of(name))
        for name in columns.span_attribute_names()
    ]
    flat = base.select(
        *(c for c in base.columns if c not in ("resource", "lists")),
        *(resource[key].alias(column) for key, column in columns.RESOURCE_COLUMNS.items()),
        *typed,
        (F.col("status") == STATUS_ERROR).alias("error"),
    )
    return flat.dropDuplicates(list(IDS)) if deduplicate else flat


def repeated(spans: DataFrame) -> bool:
    """Whether some span is in ``spans`` more than once (a narrow count over the two ids)."""
    return bool(spans.groupBy(*IDS).count().where(F.col("count") > 1).limit(1).count())


def attribute(name: str) -> Column:
    """The span table's column of span attribute ``name`` (``epochal.telemetry.attributes``)."""
    return F.col(columns.column_of(name))


def _named(column: str) -> Column:
    """``column``, null when empty (a replica's follower before it registered names no node)."""
    return F.when(F.col(column) != "", F.col(column))


def processes(spans: DataFrame) -> DataFrame:
    """One row per process (service and instance): the node its spans name (a replica's first
    run names it only once registered, and its resource never: its spans before registering
    belong to that node too), its resource's node, location, and span counts."""
    named = F.max(_named("node_id"))
    resource = F.max(_named("resource_node"))
    return spans.groupBy("run", "service", "service_instance").agg(
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
    nodes = processes.select(
        "run", "service", "service_instance", F.col("node").alias("_process_node")
    )
    return (
        spans.join(F.broadcast(nodes), ["run", "service", "service_instance"], "left")
        .withColumn("node", F.coalesce(_named("node_id"), "_process_node"))
        .drop("_process_node")
    )


def bad_lines(lines: DataFrame) -> Column:
    """An aggregate: lines that held no spans' data (not JSON, or not a TracesData)."""
    return F.sum(F.when(F.col("resourceSpans").isNull(), 1).otherwise(0))
