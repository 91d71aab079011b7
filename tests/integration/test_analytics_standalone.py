"""The analytics job on a real Spark standalone cluster (issue 36): a master and a worker started
from PySpark's own distribution (``spark-class …deploy.master.Master`` / ``…worker.Worker``) on
127.0.0.1, the job submitted with ``spark-submit --master spark://127.0.0.1:PORT`` — the same
entry as ``python -m epochal.analytics`` — gives the same tables as on ``local[2]``."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import epochal.analytics.__main__ as entry
from epochal.analytics.job import DASHBOARD
from epochal.analytics.synthetic import generate
from epochal.runtime.processes import free_ports

pytestmark = pytest.mark.integration

SPANS = 6_000
START_TIMEOUT_S = 90
JOB_TIMEOUT_S = 600
BIN = Path(sys.executable).parent  # PySpark's spark-class and spark-submit, beside python
# Tables that hold only what the spans say (not how long the job took)
TABLES = (
    "spans", "processes", "latency", "latency_windows", "commit_phases", "consistency_mix",
    "errors", "epoch_propagation", "epoch_propagation_nodes", "epochs_behind",
    "reconciliation_lag", "reconciliation_lag_ranges", "dependencies", "critical_paths",
    "critical_path_summary", "thresholds",
)  # fmt: skip


def spark_env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-class finds python
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }


@contextlib.contextmanager
def daemon(args: list[str], log: Path, ready: str) -> Iterator[subprocess.Popen[bytes]]:
    """A Spark daemon (``spark-class`` args), until its log says ``ready``; ended by its pid."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
            env=spark_env(), start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while ready not in log.read_text(errors="replace"):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{args[0]} not ready: {log.read_text()[-3000:]}"
            time.sleep(0.2)  # polling a log file: nothing to wait on
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rows(folder: Path) -> list[tuple[Any, ...]]:
    """A table's rows, sorted, with floats rounded and lists of text sorted (collect_set's order
    is not part of the answer)."""

    def canonical(value: Any) -> Any:
        if isinstance(value, float):
            return None if math.isnan(value) else round(value, 6)
        if isinstance(value, list):
            items = [canonical(v) for v in value]
            return tuple(sorted(items) if all(isinstance(i, str) for i in items) else items)
        if isinstance(value, dict):
            return tuple(sorted((k, canonical(v)) for k, v in value.items()))
        return value

    table = pq.read_table(folder).to_pylist()
    return sorted((tuple(canonical(v) for v in row.values()) for row in table), key=repr)


def test_the_job_on_a_standalone_cluster_gives_the_same_tables_as_local(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    generate(traces, SPANS, seed=7)
    local_out, cluster_out = tmp_path / "local", tmp_path / "cluster"
    common = [str(traces), "--shuffle-partitions", "4"]
    local = subprocess.run(
        [sys.executable, "-m", "epochal.analytics", *common, "--out", str(local_out),
         "--master", "local[2]"],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S, env=spark_env(), check=False,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]

    port, ui, worker_ui = free_ports(3)
    master_url = f"spark://127.0.0.1:{port}"
    master_args = [
        "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
        "--port", str(port), "--webui-port", str(ui),
    ]  # fmt: skip
    worker_args = [
        "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
        "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
        "--work-dir", str(tmp_path / "work"),
    ]  # fmt: skip
    with (
        daemon(master_args, tmp_path / "master.log", "I have been elected leader"),
        daemon(worker_args, tmp_path / "worker.log", "Successfully registered with master"),
    ):
        submitted = subprocess.run(
            [str(BIN / "spark-submit"), "--master", master_url,
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=1g",
             "--conf", f"spark.pyspark.python={sys.executable}",
             entry.__file__, *common, "--out", str(cluster_out)],
            capture_output=True, text=True, timeout=JOB_TIMEOUT_S, env=spark_env(), check=False,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr[-4000:]
        master_log = (tmp_path / "master.log").read_text()
        assert "Registering app epochal-analytics" in master_log  # it ran there, not locally
    assert master_url in submitted.stdout  # the job's own report names the master it ran on
    for name in TABLES:
        assert rows(local_out / name) == rows(cluster_out / name), name
    assert (cluster_out / DASHBOARD).stat().st_size > 1_000_000
