"""`make run`'s program, end to end: 3 CMS members and 3 replicas up, the ring formed, rows
written and read back at QUORUM through the SDK, the status and the metadata log printed; then a
reconciler up, holding every range of the demo keyspace, each of which had a round that advanced
its low bound, its status printed as `epochal reconcile status` prints it. Every one of the
seven processes wrote its spans to a file of its own under the data directory, which the
listing names.

And stopping it: Ctrl-C (SIGINT to its process group, as a terminal sends it) stops the dev
cluster and all seven servers within 10 s, each server logging that it shut down and no
traceback; SIGKILL to the dev cluster leaves no server behind either (they get SIGTERM from the
kernel when their parent dies)."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness import Pid, block_until, file_spans


def test_the_dev_cluster_forms_a_ring_writes_reads_and_reports(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "EPOCHAL_TRACE_DIR"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochal.devcluster",
            "--data-dir",
            str(tmp_path / "dc"),
            "run",
            "--exit",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=environment,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    # The listing comes first: every process, its address and its log; how to reach it.
    listing = out[: out.index("created keyspace demo")]
    assert "the cluster serves (every replica joined the ring; epoch " in listing
    for name in ("cms1", "cms2", "cms3", "replica1", "replica2", "replica3", "reconciler1"):
        assert re.search(rf"^  {name} .* 127\.0\.0\.1:\d+ +\d+  \S+/{name}\.log$", listing, re.M)
    assert re.search(
        r"^  export EPOCHAL_CLUSTER=(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+$", out, re.M
    )
    assert out.count("wrote 3 rows of") == 3
    assert "read 3 rows of grace at QUORUM" in out
    assert out.count("  joined   epoch") == 3 and out.count("ready=True") == 3
    assert out.count(" leader ") == 1 and out.count(" follower ") == 2
    assert "InitializeCMS(cms1, cms2, cms3)" in out
    assert "CreateKeyspace(demo, SimpleStrategy(rf=3), tracked)" in out
    assert out.count("AdvanceSequence(node-") == 9  # three joins, START, MID and FINISH each
    assert "the reconcilers (reconciler1) reconcile each range every 0.5 s" in out
    assert "every range of demo had a round" in out, out
    # 3 nodes of 16 tokens: 48 ranges, all held by the one reconciler.
    assert "  48 ranges: 48 owned (reconciler1 48), 0 unowned; max lag " in out
    shown = [line for line in out.splitlines() if line.startswith("  demo      (")]
    assert len(shown) == 6 and "  ... and 42 more ranges" in out
    row = re.compile(r"reconciler1 +\d+  (?P<low_bound>\S+) +(\d+ ms|-)  \w+ +[1-9]\d*$")
    rows = [row.search(line) for line in shown]  # owner, lease token, bound, lag, outcome, rounds
    assert all(rows), shown
    # A round normally advances the bound at once (a slow replica may make one round fail).
    bound = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\+\d+")
    assert any(bound.fullmatch(found["low_bound"]) for found in rows if found), shown
    assert re.search(r"^every range: \S*epochal reconcile status$", out, re.MULTILINE)
    # The listing names the operator's commands, with the cluster to point them at.
    assert re.search(
        r"^  export EPOCHAL_CLUSTER=(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+$", out, re.M
    )
    assert "epochal status | ring | health | cms describe" in out
    # Spans: a file per process in traces/ of the data directory, which the listing names.
    traces = tmp_path / "dc" / "traces"
    assert (
        f"  spans in {traces}/ (OTLP-JSON lines, a file per process); analyse them: "
        f"make analyze TRACES={traces}"
    ) in listing
    files = sorted(traces.glob("*.jsonl"))
    assert [f.name.split("-")[0] for f in files] == ["cms"] * 3 + ["reconciler"] + ["replica"] * 3
    spans = file_spans(files)
    for service in ("cms", "replica", "reconciler"):
        assert any(s.resource["service.name"] == service for s in spans), service
    replicas = [s.resource for s in spans if s.resource["service.name"] == "replica"]
    assert all(r["epochal.datacenter"] == "dc1" and r["epochal.rack"] == "r1" for r in replicas)


# ---------------------------------------------------------------------- stopping `make run`


@dataclass
class DevCluster:
    """`make run`'s program (the command the Makefile runs, with a data directory of the
    test's), started as the leader of its own process group — as a shell starts a foreground
    job — and its output read line by line."""

    process: subprocess.Popen[str]
    lines: queue.SimpleQueue[str] = field(default_factory=queue.SimpleQueue)
    output: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, data_dir: Path) -> DevCluster:
        process = subprocess.Popen(
            [sys.executable, "-m", "epochal.devcluster", "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        started = cls(process)
        threading.Thread(target=started._read, daemon=True).start()
        return started

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.output):
            remaining = deadline - time.monotonic()
            try:
                self.output.append(self.lines.get(timeout=max(remaining, 0)))
            except queue.Empty:
                raise AssertionError(
                    f"no {text!r} within {timeout_s} s:\n{''.join(self.output)}"
                ) from None


@contextlib.contextmanager
def dev_cluster(tmp_path: Path) -> Iterator[tuple[DevCluster, list[Pid]]]:
    """The dev cluster up and serving, and its seven servers; whatever happens, every one of
    those processes is gone afterwards (SIGKILL, by pid)."""
    cluster = DevCluster.start(tmp_path / "dc")
    servers: list[Pid] = []
    try:
        cluster.wait_for("the cluster stays up", timeout_s=180)
        servers.extend(Pid.children_of(cluster.process.pid))
        assert len(servers) == 7, servers  # 3 CMS members, 3 replicas, a reconciler
        yield cluster, servers
    finally:
        if cluster.process.poll() is None:
            cluster.process.kill()
        cluster.process.wait()
        for server in servers:
            server.kill()


def wait_gone(cluster: DevCluster, servers: list[Pid], timeout_s: float) -> float:
    """Until the dev cluster and every one of its servers has exited; how long that took."""
    began = time.monotonic()

    def still_running() -> str:
        state = "exited" if cluster.process.poll() is not None else "running"
        return f"dev cluster {state}, servers {[s.pid for s in servers if s.alive]} running"

    block_until(
        still_running,
        lambda: cluster.process.poll() is not None and not any(s.alive for s in servers),
        timeout_s,
    )
    return time.monotonic() - began


@pytest.mark.timeout(300)
def test_ctrl_c_stops_the_dev_cluster_and_every_server(tmp_path: Path) -> None:
    with dev_cluster(tmp_path) as (cluster, servers):
        os.killpg(cluster.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        took = wait_gone(cluster, servers, timeout_s=10)
        cluster.wait_for("stopped; logs and databases are in", timeout_s=1)
        assert cluster.process.returncode == 0, "".join(cluster.output)
    logs = [*(tmp_path / "dc").glob("*.log"), *(tmp_path / "dc" / "cms").glob("*.log")]
    assert len(logs) == 7, logs
    for log in logs:
        text = log.read_text()
        assert text.count("shutting down on SIGTERM") == 1, (log, text)
        assert "Traceback" not in text, (log, text)
    print(f"stopped in {took:.2f} s")


@pytest.mark.timeout(300)
def test_the_servers_die_with_a_killed_dev_cluster(tmp_path: Path) -> None:
    with dev_cluster(tmp_path) as (cluster, servers):
        cluster.process.kill()  # SIGKILL: no chance to stop them itself
        took = wait_gone(cluster, servers, timeout_s=10)
    print(f"servers gone {took:.2f} s after the dev cluster was killed")
