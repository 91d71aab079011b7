"""The analytics job on a real Spark standalone cluster (issue 36): a master and a worker started
from PySpark's own distribution (``spark-class …deploy.master.Master`` / ``…worker.Worker``) on
127.0.0.1, the job submitted with ``spark-submit --master spark://127.0.0.1:PORT`` — the same
entry as ``python -m epochal.analytics`` — gives the same tables as on ``local[2]``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import epochal.analytics.__main__ as entry
from epochal.analytics.job import DASHBOARD
from epochal.analytics.synthetic import generate
from epochal.runtime.processes import free_ports
from tests.harness.span_files import rows, same

pytestmark = pytest.mark.integration

SPANS = 6_000
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 20
JOB_TIMEOUT_S = 600
BIN = Path(sys.executable).parent  # PySpark's spark-class and spark-submit, beside python
# Tables that hold only what the spans say (not how long the job took)
TABLES = (
    "spans", "processes", "latency", "latency_windows", "commit_phases", "consistency_mix",
    "errors", "epoch_propagation", "epoch_propagation_nodes", "epochs_behind",
    "reconciliation_lag", "reconciliation_lag_ranges", "dependencies", "critical_paths",
    "critical_path_summary", "commit_latency_windows", "thresholds",
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
    finally:  # its session: the JVM and what it started (a worker's executors, their Pythons)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def submit(master_url: str, script: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "spark-submit"), "--master", master_url,
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=1g",
         "--conf", f"spark.pyspark.python={sys.executable}", script, *args],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S, env=spark_env(), check=False,
    )  # fmt: skip


@pytest.mark.timeout(2 * JOB_TIMEOUT_S + 2 * START_TIMEOUT_S)
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
    master_args = [
        "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
        "--port", str(port), "--webui-port", str(ui),
    ]  # fmt: skip

    with daemon(master_args, tmp_path / "master.log", "I have been elected leader"):
        # the port it really took (another process may have taken the one picked: Spark moves on)
        found = re.search(
            r"Starting Spark master at (spark://\S+)", (tmp_path / "master.log").read_text()
        )
        assert found, (tmp_path / "master.log").read_text()[-2000:]
        master_url = found.group(1)
        worker_args = [
            "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
            "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
            "--work-dir", str(tmp_path / "work"),
        ]  # fmt: skip
        with daemon(worker_args, tmp_path / "worker.log", "Successfully registered with master"):
            submitted = submit(master_url, entry.__file__, [*common, "--out", str(cluster_out)])
        assert submitted.returncode == 0, submitted.stderr[-4000:]
        master_log = (tmp_path / "master.log").read_text()
        assert "Registering app epochal-analytics" in master_log  # it ran there, not locally
    assert master_url in submitted.stdout  # the job's own report names the master it ran on
    for name in TABLES:
        local_rows, cluster_rows = rows(local_out / name), rows(cluster_out / name)
        assert len(local_rows) == len(cluster_rows), name
        for here, there in zip(local_rows, cluster_rows, strict=True):
            assert same(here, there), (name, here, there)
    assert (cluster_out / DASHBOARD).stat().st_size > 1_000_000
