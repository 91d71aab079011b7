"""The job: span files in, Parquet tables and a summary out.

Stages, each timed: read the span files and write the ``spans`` table (lines without spans
counted as they are read; rewritten without repeats only if a span was read twice); then every
other table from the ``spans`` table as written (Parquet, read back: columns read only where
needed, and no second parse of the JSON); then the thresholds. Each table is a folder of
Parquet files under the output directory, replaced when the job runs again; ``summary.json``
beside them says what was read, what each table holds, how long each stage took and which
thresholds were crossed.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark import SparkConf, SparkContext, inheritable_thread_target
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from epochal.analytics import dashboard, graph, latency, propagation, storage, thresholds
from epochal.analytics.spans import (
    IDS,
    bad_lines,
    flatten,
    processes,
    read_lines,
    repeated,
    with_process_nodes,
)

log = logging.getLogger(__name__)

LOCAL_MASTER = "local[*]"
DEFAULT_SHUFFLE_PARTITIONS = 8  # 2 cores: a few tasks per core, not Spark's 200
SUMMARY = "summary.json"
CONCURRENT_CHAINS = 3  # chains of tables written at a time (they share the session's cores)
TABLES = (  # what the job writes, in the order it reports them
    "spans",
    "processes",
    "latency",
    "latency_windows",
    "commit_phases",
    "consistency_mix",
    "errors",
    "epoch_propagation",
    "epoch_propagation_nodes",
    "epochs_behind",
    "reconciliation_lag",
    "reconciliation_lag_ranges",
    "dependencies",
    "critical_paths",
    "critical_path_summary",
    "commit_latency_windows",
    "thresholds",
)
DASHBOARD = "dashboard.html"


@dataclass(frozen=True, slots=True)
class JobSettings:
    traces: tuple[str, ...]  # folders or files; any Hadoop path (file:, hdfs:, s3a:)
    out: str  # where the tables go, on storage the driver and executors share
    master: str = ""  # "" = spark-submit's, else local[*]
    shuffle_partitions: int | None = None  # None: spark-submit's, else DEFAULT_SHUFFLE_PARTITIONS
    driver_memory: str = "4g"  # used only when this process starts the JVM
    window_s: int = 60
    accuracy: int = latency.ACCURACY
    ui: bool = False

    def __post_init__(self) -> None:
        if not self.traces:
            raise ValueError("no span files or folders to read")
        if self.shuffle_partitions is not None and self.shuffle_partitions < 1:
            raise ValueError(
                f"--shuffle-partitions must be at least 1, got {self.shuffle_partitions}"
            )
        if self.window_s < 1:
            raise ValueError(f"--window must be at least 1 second, got {self.window_s}")
        if self.accuracy < 1:
            raise ValueError(f"--accuracy must be at least 1, got {self.accuracy}")


@dataclass(slots=True)
class Summary:
    inputs: list[str]
    out: str
    spark: dict[str, str]
    spans: int = 0
    traces: int = 0
    bad_lines: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # name -> rows
    stage_s: dict[str, float] = field(default_factory=dict)
    thresholds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def crossed(self) -> list[dict[str, Any]]:
        return [t for t in self.thresholds if t["state"] in ("warning", "critical")]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "crossed": self.crossed}, indent=2, default=str)


def submitted() -> bool:
    """Whether spark-submit launched this process (it hands the driver its JVM's gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session(settings: JobSettings) -> SparkSession:
    """The Spark session. A flag given wins; then what spark-submit was given (its ``--master``,
    its ``--conf``s), when it launched this process; then the defaults here: local[*] bound to
    127.0.0.1, settings for a 2-core machine."""
    given: dict[str, str] = {}
    if submitted():
        SparkContext._ensure_initialized()  # spark-submit's JVM, holding its settings
        given = dict(SparkConf().getAll())
    builder = SparkSession.builder.appName("epochal-analytics")
    chosen: dict[str, str] = {}

    def default(key: str, value: str) -> None:
        if key not in given:
            chosen[key] = value

    master = settings.master or given.get("spark.master", "") or LOCAL_MASTER
    chosen["spark.master"] = master
    if master.startswith("local") and not submitted():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        default("spark.driver.host", "127.0.0.1")
        default("spark.driver.bindAddress", "127.0.0.1")
        # the Python workers: this interpreter (with pyarrow), not whatever python3 PATH finds
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if settings.shuffle_partitions is not None:
        chosen["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
    else:
        default("spark.sql.shuffle.partitions", str(DEFAULT_SHUFFLE_PARTITIONS))
    default("spark.driver.memory", settings.driver_memory)  # only before the JVM starts
    if settings.ui:
        chosen["spark.ui.enabled"] = "true"
    else:
        default("spark.ui.enabled", "false")
    default("spark.ui.showConsoleProgress", "false")
    # HotSpot compiles no method over 8,000 bytes of bytecode: the flattening of spans (dozens
    # of attribute columns) generated larger ones and ran interpreted, twice as slow as Spark's
    # per-operator code, which this limit makes it fall back to (Spark's docs suggest 8000)
    default("spark.sql.codegen.hugeMethodLimit", "8000")
    # percentile_approx and collect_* aggregate in a hash map of objects that Spark turns into a
    # sort after 128 groups per task: a window table has thousands. A group's digest holds at
    # most its rows' values, so the map stays as big as the rows a task aggregates
    default("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "16384")
    chosen["spark.sql.session.timeZone"] = "UTC"  # windows and timestamps in UTC, always
    # a key repeated in an attribute list or among a span's events: the last one wins
    chosen["spark.sql.mapKeyDedupPolicy"] = "LAST_WIN"
    for key, value in chosen.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


class _Writer:
    """Writes tables under ``out`` and times each stage."""

    def __init__(self, spark: SparkSession, out: str, summary: Summary) -> None:
        self.spark, self.out, self.summary = spark, out.rstrip("/"), summary

    def path(self, name: str) -> str:
        return f"{self.out}/{name}"

    def write(self, name: str, build: Callable[[], DataFrame], *, small: bool = True) -> DataFrame:
        started = time.monotonic()
        table = build()
        if small:  # an aggregate: one file, not one per shuffle partition
            table = table.coalesce(1)
        rows = Observation(f"rows of {name}")  # counted as written: no second job to count
        table.observe(rows, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(
            self.path(name)
        )
        written = self.spark.read.parquet(self.path(name))
        self.summary.tables[name] = int(rows.get["rows"])
        self.summary.stage_s[name] = round(time.monotonic() - started, 3)
        return written


def run(settings: JobSettings, spark: SparkSession | None = None) -> Summary:
    """Run every stage; the summary is also written to ``<out>/summary.json``."""
    spark = spark or session(settings)
    summary = Summary(
        inputs=list(settings.traces),
        out=settings.out,
        spark={
            "master": spark.sparkContext.master,
            "version": spark.version,
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions") or "",
        },
    )
    missing = [path for path in settings.traces if not storage.exists(spark, path)]
    if missing:
        raise FileNotFoundError(f"no such file or folder: {', '.join(missing)}")
    w = _Writer(spark, settings.out, summary)
    started = time.monotonic()
    lines = read_lines(spark, settings.traces)
    flat = _write_spans(w, lines)
    summary.spans = summary.tables["spans"]
    spans = with_process_nodes(flat, w.write("processes", lambda: processes(flat)))
    acc = settings.accuracy

    def latency_tables() -> None:
        w.write("latency", lambda: latency.latency(spans, acc))
        w.write(  # grows with the run's length: not merged into one task
            "latency_windows",
            lambda: latency.latency_windows(spans, acc, settings.window_s),
            small=False,
        )
        w.write("commit_phases", lambda: latency.commit_phases(spans, acc))
        w.write("consistency_mix", lambda: latency.consistency_mix(spans))
        w.write("errors", lambda: latency.errors(spans))

    def propagation_tables() -> DataFrame:
        epochs = w.write(
            "epoch_propagation", lambda: propagation.epoch_propagation(spans), small=False
        )
        w.write("epoch_propagation_nodes", lambda: propagation.propagation_by_node(epochs, acc))
        return w.write(
            "epochs_behind",
            lambda: propagation.longest_behind(spans, epochs, thresholds.BEHIND_EPOCHS),
        )

    def lag_tables() -> DataFrame:
        lag = w.write(
            "reconciliation_lag", lambda: propagation.reconciliation_lag(spans), small=False
        )
        w.write(
            "reconciliation_lag_ranges", lambda: propagation.reconciliation_lag_by_range(lag, acc)
        )
        return lag

    def graph_tables() -> None:
        w.write("dependencies", lambda: graph.dependencies(spans, acc))
        paths = w.write("critical_paths", lambda: graph.critical_paths(spans), small=False)
        w.write("critical_path_summary", lambda: graph.critical_path_summary(paths))

    def commit_tables() -> DataFrame:
        return w.write(
            "commit_latency_windows", lambda: thresholds.commit_latency_windows(spans, acc)
        )

    def count_traces() -> None:
        summary.traces = spans.select("trace_id").distinct().count()

    # Independent chains of tables, three at a time: most stages are short, many end in one
    # task, and one chain's planning and Parquet writing leave cores another's tasks can use (a
    # stage's time is then its time while sharing the cores)
    at_once = time.monotonic()
    group = f"epochal-analytics-{uuid.uuid4().hex}"  # the chains' Spark jobs, to cancel them

    def grouped(chain: Callable[[], Any]) -> Callable[[], Any]:
        def in_group() -> Any:
            spark.sparkContext.setJobGroup(group, "epochal analytics tables", True)
            return chain()

        return inheritable_thread_target(spark)(in_group)  # the caller's local properties too

    pool = ThreadPoolExecutor(CONCURRENT_CHAINS, thread_name_prefix="tables")
    try:
        chains = [
            pool.submit(grouped(chain))
            for chain in (
                graph_tables,
                latency_tables,
                propagation_tables,
                lag_tables,
                commit_tables,
                count_traces,
            )
        ]
        _, _, behind, lag, commits, _ = [chain.result() for chain in chains]
    except BaseException:  # one chain failed: the others' queued and running work is moot
        pool.shutdown(wait=False, cancel_futures=True)
        spark.sparkContext.cancelJobGroup(group)  # theirs only: the session may run others'
        raise
    pool.shutdown()
    summary.stage_s["tables_at_once"] = round(time.monotonic() - at_once, 3)
    measured_at = time.monotonic()
    summary.thresholds = thresholds.rows(thresholds.measure(spans, behind, commits, acc))
    summary.stage_s["thresholds_measure"] = round(time.monotonic() - measured_at, 3)
    w.write("thresholds", lambda: spark.createDataFrame(summary.thresholds, _THRESHOLD_SCHEMA))
    # the tables and stages in one order, whichever chain finished first
    summary.tables = {name: summary.tables[name] for name in TABLES}
    summary.stage_s = {
        **{name: summary.stage_s[name] for name in TABLES},
        **{k: v for k, v in summary.stage_s.items() if k not in TABLES},
    }
    drawn_at = time.monotonic()
    storage.write_text(spark, f"{w.out}/{DASHBOARD}", dashboard_of(w, lag, summary))
    summary.stage_s["dashboard"] = round(time.monotonic() - drawn_at, 3)
    summary.stage_s["total"] = round(time.monotonic() - started, 3)
    storage.write_text(spark, f"{w.out}/{SUMMARY}", summary.to_json() + "\n")
    return summary


def _write_spans(w: _Writer, lines: DataFrame) -> DataFrame:
    """The spans table: written as read, then rewritten without the repeats only if a span was
    read twice (a copied file) — dropping duplicates costs a sort of every wide row."""
    started = time.monotonic()
    counted = Observation("span_lines")  # the lines without spans, counted as they are read
    observed = lines.observe(counted, bad_lines(lines).alias("bad_lines"))
    flat = w.write("spans", lambda: flatten(observed, deduplicate=False), small=False)
    w.summary.bad_lines = int(counted.get["bad_lines"] or 0)
    if repeated(flat):
        unique = w.path("_spans_unique")
        flat.dropDuplicates(list(IDS)).write.mode("overwrite").parquet(unique)
        storage.replace(w.spark, unique, w.path("spans"))
        flat = w.spark.read.parquet(w.path("spans"))
        w.summary.tables["spans"] = flat.count()  # rare: a count of its own is fine
    w.summary.stage_s["spans"] = round(time.monotonic() - started, 3)
    return flat


def dashboard_of(w: _Writer, lag: DataFrame, summary: Summary) -> str:
    """The dashboard page of the tables written, as small as a page wants them: latency over
    time over all nodes, the lag as the worst per range and minute; times as UTC text."""
    read = w.spark.read.parquet
    utc = "yyyy-MM-dd HH:mm:ss"
    minutes = lag.groupBy(
        "run", "keyspace", "range", F.window("time", "1 minute")["start"].alias("at")
    ).agg(F.max("lag_s").alias("lag_s"))
    special = {
        "latency_windows": read(w.path("latency_windows"))
        .where(F.col("node") == latency.ALL)
        .withColumn("window_start", F.date_format("window_start", utc)),
        "commit_latency_windows": read(w.path("commit_latency_windows")).withColumn(
            "window_start", F.date_format("window_start", utc)
        ),
        "reconciliation_lag_minutes": minutes.withColumn("minute", F.date_format("at", utc)),
    }
    frames = [
        (name, special[name] if name in special else read(w.path(name)))
        for name in dashboard.TABLES
    ]
    return dashboard.render(dashboard.rows_of(frames), {**asdict(summary)})


_THRESHOLD_SCHEMA = (
    "metric string, unit string, warning double, critical double, measured double, "
    "state string, how string"
)
