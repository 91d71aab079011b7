"""The whole job (``epochal.analytics.job.run``) on synthetic span files, local Spark: every span
counted once — also when a file was copied beside itself, where the spans table is rewritten
without the repeats — each table's rows counted as written, a truncated line counted, and every
trace's critical path found whole however the Arrow batches cut the traces."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from epochal.analytics import graph
from epochal.analytics.job import JobSettings, run
from epochal.analytics.synthetic import generate
from tests.harness.span_files import rows, same

SPANS = 3_000
BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def test_each_span_counts_once_even_from_a_copied_file(spark: SparkSession, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    written = generate(traces, SPANS, seed=3)
    total = sum(written.values())

    alone = run(JobSettings(traces=(str(traces),), out=str(tmp_path / "alone")), spark)
    assert alone.spans == total == alone.tables["spans"] and alone.bad_lines == 0
    for name, count in alone.tables.items():  # counted as written
        assert pq.read_table(tmp_path / "alone" / name).num_rows == count, name
    paths = pq.read_table(tmp_path / "alone" / "critical_paths").to_pylist()
    assert len(paths) == alone.traces  # every trace has a root and a path

    # a replica's file copied beside it (same folder: same run): read twice, counted once; the
    # copy ends in a truncated line; the walk gets batches of 7 spans (traces cut across them)
    replica = next(traces.glob("replica-*.jsonl"))
    copy = traces / f"copy-of-{replica.name}"
    copy.write_text(replica.read_text() + '{"resourceSpans": [{"resou\n')
    spark.conf.set(BATCH, "7")
    try:
        copied = run(JobSettings(traces=(str(traces),), out=str(tmp_path / "copied")), spark)
    finally:
        spark.conf.unset(BATCH)
    assert copied.spans == total == copied.tables["spans"] and copied.bad_lines == 1
    assert not (tmp_path / "copied" / "_spans_unique").exists()  # moved into place
    names = ("spans", "latency", "dependencies", "critical_paths", "epoch_propagation")
    for name in names:  # the copy's rows are the same rows (same lines, same folder)
        before, after = rows(tmp_path / "alone" / name), rows(tmp_path / "copied" / name)
        assert same(tuple(before), tuple(after)), name
    ids = pq.read_table(tmp_path / "copied" / "spans", columns=["trace_id", "span_id"]).to_pylist()
    assert len({(r["trace_id"], r["span_id"]) for r in ids}) == len(ids) == total


def test_a_failing_table_fails_the_job_and_leaves_the_session_usable(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = tmp_path / "traces"
    generate(traces, 500, seed=5)

    def broken(spans: DataFrame) -> DataFrame:
        raise RuntimeError("the walk broke")

    monkeypatch.setattr(graph, "critical_paths", broken)
    with pytest.raises(RuntimeError, match="the walk broke"):
        run(JobSettings(traces=(str(traces),), out=str(tmp_path / "out")), spark)
    assert spark.range(10).count() == 10  # the chains' jobs were cancelled, not the session's
