"""The dev cluster's span files: in ``traces/`` of its data directory by default, in the folder
EPOCHAL_TRACE_DIR names when the environment sets it, none with ``--no-traces``; every process
it starts — CMS members, replicas, reconcilers — is told, and the listing says where. (No
process is started here; tests/e2e/test_make_run.py runs a cluster that writes them.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.devcluster.commands import listing, parser, trace_dir
from epochal.devcluster.state import ClusterRecord, DataDir
from epochal.devcluster.supervisor import Shape, Supervisor


def chosen(data_dir: Path, *arguments: str) -> Path | None:
    return trace_dir(DataDir(data_dir), parser().parse_args(list(arguments)))


def test_the_span_files_go_under_the_data_dir_unless_the_environment_or_a_flag_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EPOCHAL_TRACE_DIR", raising=False)
    for command in ("run", "up", "supervise"):
        assert chosen(tmp_path, command) == tmp_path / "traces"
        assert chosen(tmp_path, command, "--no-traces") is None
    monkeypatch.setenv("EPOCHAL_TRACE_DIR", "")  # empty: unset
    assert chosen(tmp_path, "up") == tmp_path / "traces"
    monkeypatch.setenv("EPOCHAL_TRACE_DIR", str(tmp_path / "elsewhere"))
    assert chosen(tmp_path, "up") == tmp_path / "elsewhere"
    assert chosen(tmp_path, "up", "--no-traces") is None


def test_every_process_of_the_cluster_is_told_where_and_the_listing_says_it(
    tmp_path: Path,
) -> None:
    traces = tmp_path / "dev" / "traces"
    supervisor = Supervisor(tmp_path / "dev", Shape(cms=1, replicas=2), traces)
    cluster = supervisor.cluster
    assert cluster.env == {"EPOCHAL_TRACE_DIR": str(traces)}  # replicas and reconcilers
    assert cluster.cms.env == {"EPOCHAL_TRACE_DIR": str(traces)}
    record = ClusterRecord(phase="serving", supervisor_pid=1, traces=str(traces))
    lines = listing(record, DataDir(tmp_path / "dev"))
    assert (
        f"  spans in {traces}/ (OTLP-JSON lines, a file per process); analyse them: "
        f"make analyze TRACES={traces}"
    ) in lines


def test_without_span_files_the_environment_is_overridden_and_the_listing_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EPOCHAL_TRACE_DIR", str(tmp_path / "elsewhere"))
    supervisor = Supervisor(tmp_path / "dev", Shape(cms=1, replicas=1), None)
    assert supervisor.cluster.env == supervisor.cluster.cms.env == {"EPOCHAL_TRACE_DIR": ""}
    lines = listing(ClusterRecord(supervisor_pid=1), DataDir(tmp_path / "dev"))
    assert "  spans: no span files (--no-traces)" in lines
