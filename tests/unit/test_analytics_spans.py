"""Reading span files into the span table (epochal.analytics.spans), on a local Spark: the
explicit schema's casts, a truncated last line, folders of several runs, a file read twice, and
the column of every project attribute."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from epochal.analytics import columns
from epochal.analytics.spans import flatten, read_lines
from epochal.telemetry import attributes as attr
from tests.harness.span_files import line, span, write_file

BASE_COLUMNS = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "scope", "start_ns", "end_ns",
    "duration_ms", "start_time", "status", "status_message", "events", "links", "attributes",
    "error", "run",
)  # fmt: skip


def test_the_column_names_are_unique_and_none_is_a_base_column() -> None:
    names = [columns.column_of(n) for n in columns.span_attribute_names()]
    resource = list(columns.RESOURCE_COLUMNS.values())
    every = [*BASE_COLUMNS, *names, *resource]
    assert len(every) == len(set(every)), sorted(n for n in every if every.count(n) > 1)
    assert columns.column_of(attr.REPLICAS_CONTACTED) == "replicas_contacted"
    assert columns.column_of(attr.STATUS_CODE) == "grpc_status_code"


def test_spans_are_flattened_with_their_types_and_bad_lines_are_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    big = 2**62 + 1  # a 64-bit integer survives (the file has it as a string)
    write = span(
        attr.REPLICA_WRITE, 1_000_000_000, 1_003_000_000, span_id="00000000000000A1",
        trace_id="AB" * 16, events=[("queued", 1_000_000_005)], error=True,
        **{attr.EPOCH: 7, attr.TOKEN: big, attr.CONSISTENCY: "QUORUM",
           attr.REPLICAS_CONTACTED: ["n1", "n2"], attr.REPAIR: True, attr.NODE_ID: "n1",
           attr.OUTCOME: "timeout", attr.STATUS_CODE: 4, "application.thing": 1.5},
    )  # fmt: skip
    child = span(attr.REPLICA_APPLY, 1_001_000_000, 1_002_000_000, span_id="00000000000000a2",
                 parent="00000000000000a1")  # fmt: skip
    run1, run2 = tmp_path / "run1", tmp_path / "run2" / "deeper"
    node = "replica-node"
    write_file(
        run1 / "replica-a.jsonl", line("replica", [write], node=node), '{"resourceSpans": [{'
    )
    write_file(run2 / "replica-b.jsonl", line("replica", [child], node=node))
    (run2 / "ignored.txt").write_text("not spans\n")
    # a copy of a file (a folder copied into another): its spans are read twice, kept once
    (run2 / "copy.jsonl").write_text((run1 / "replica-a.jsonl").read_text())
    lines = read_lines(spark, [str(tmp_path), str(run1)])  # run1 twice: its files read once
    assert lines.where("resourceSpans IS NULL").select("resourceSpans").count() == 2
    spans = flatten(lines)
    rows = {r["span_id"]: r.asDict() for r in spans.collect()}
    assert set(rows) == {"00000000000000a1", "00000000000000a2"}  # ids lowercased
    w = rows["00000000000000a1"]
    assert w["trace_id"] == "ab" * 16 and w["parent_span_id"] is None
    assert (w["start_ns"], w["end_ns"], w["duration_ms"]) == (1_000_000_000, 1_003_000_000, 3.0)
    assert (w["epoch"], w["token"], w["consistency"]) == (7, big, "QUORUM")
    assert w["replicas_contacted"] == ["n1", "n2"] and w["repair"] is True
    assert (w["status"], w["error"], w["grpc_status_code"]) == (2, True, 4)
    assert (w["service"], w["resource_node"], w["node_id"]) == ("replica", node, "n1")
    assert w["attributes"]["application.thing"] == "1.5"
    assert [(e["name"], e["time_ns"]) for e in w["events"]] == [("queued", 1_000_000_005)]
    c = rows["00000000000000a2"]
    assert c["parent_span_id"] == "00000000000000a1" and c["node_id"] is None
    # a span's run is the folder its file is in (the copy's, if that one was kept)
    assert c["run"].endswith("/run2/deeper") and w["run"].endswith(("/run1", "/run2/deeper"))
    assert c["error"] is False and c["replicas_contacted"] is None


def test_a_folder_and_a_named_file_of_any_name_are_read_together(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "traces.2026-11-29"  # a dot in a folder's name: still a folder
    write_file(folder / "replica-a.jsonl", line("replica", [span(attr.REPLICA_WRITE, 1, 2)]))
    named = write_file(
        tmp_path / "extra" / "spans.json", line("cms", [span(attr.CMS_COMMIT, 3, 4)])
    )
    lines = read_lines(spark, [str(folder), str(named)])
    found = {(r["name"], r["run"].rsplit("/", 1)[-1]) for r in flatten(lines).collect()}
    assert found == {(attr.REPLICA_WRITE, "traces.2026-11-29"), (attr.CMS_COMMIT, "extra")}
