"""`epochal dev` as a user runs it, from "another terminal" (separate processes): the installed
`epochal` script against a data directory of the test's.

Proves: `dev up` (3 CMS members, 3 replicas, a reconciler) returns once the cluster serves —
every replica joined the ring by itself — with where each process and its log is and the
`export EPOCHAL_CLUSTER=…` line; a second `dev up` on the same data directory says it is already
up; `dev status` lists every process (table and JSON); `dev add-replica` starts a fourth replica
that joins by itself; `dev add-cms` starts a member that runs as a CMS candidate; the CLI
reaches the cluster through EPOCHAL_CLUSTER alone; `dev down` stops them all and leaves none of
the pids of the pid files (nor the supervisor) alive; `dev status` then says it is not running;
`dev up` again starts the same cluster (same addresses, the replicas still joined, not joined
again)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import Pid, block_until

EPOCHAL = str(Path(sys.executable).with_name("epochal"))
pytestmark = pytest.mark.timeout(400)


def dev(data_dir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240):
    return subprocess.run(
        [EPOCHAL, "dev", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def pids_of(data_dir: Path) -> dict[str, Pid]:
    """Every process of the pid files (each holds a pid and its start time) and the supervisor."""
    files = [*(data_dir / "pids").glob("*.pid"), data_dir / "supervisor.pid"]
    found = {}
    for file in files:
        pid, start = file.read_text().split()
        found[file.stem] = Pid.of(int(pid))
        assert found[file.stem].start_ticks == start, (file, start)
    return found


def test_a_dev_cluster_started_grown_looked_at_and_stopped_from_other_terminals(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "dev"
    seen: dict[str, Pid] = {}
    try:
        up = dev(data_dir, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "the cluster serves (every replica joined the ring; epoch " in up.stdout
        for name in ("cms1", "cms2", "cms3", "replica1", "replica2", "replica3", "reconciler1"):
            assert re.search(
                rf"^  {name} .* 127\.0\.0\.1:\d+ +\d+  \S+{name}\.log$", up.stdout, re.M
            )
        exported = re.search(r"^  export EPOCHAL_CLUSTER=(\S+)$", up.stdout, re.M)
        assert exported, up.stdout
        tls = dict(re.findall(r"^  export (EPOCHAL_TLS_\w+)=(\S+)$", up.stdout, re.M))
        assert set(tls) == {"EPOCHAL_TLS_CA", "EPOCHAL_TLS_CERT", "EPOCHAL_TLS_KEY"}, up.stdout
        seen.update(pids_of(data_dir))
        assert len(seen) == 8 and all(p.alive for p in seen.values()), seen

        again = dev(data_dir, "up")
        assert again.returncode == 0 and "already up" in again.stdout, again.stdout + again.stderr
        assert pids_of(data_dir) == seen  # nothing new started

        status = dev(data_dir, "status", "--output", "json")
        assert status.returncode == 0, status.stderr
        answer = json.loads(status.stdout)
        assert answer["cluster"]["phase"] == "serving"
        assert [r["state"] for r in answer["replicas"].values()] == ["joined"] * 3

        added = dev(data_dir, "add-replica", timeout=300)
        assert added.returncode == 0, added.stdout + added.stderr
        assert re.search(r"replica4 \(node-4\) joined at epoch \d+", added.stderr), added.stderr
        candidate = dev(data_dir, "add-cms")
        assert candidate.returncode == 0, candidate.stdout + candidate.stderr
        assert "started cms4 at 127.0.0.1:" in candidate.stdout
        seen.update(pids_of(data_dir))
        table = dev(data_dir, "status")
        assert table.returncode == 0, table.stderr
        assert re.search(r"^  replica4 .* node-4 +joined ", table.stdout, re.M), table.stdout
        assert re.search(r"^  cms4 .* learner ", table.stdout, re.M), table.stdout
        assert re.search(r"^  cms1 .* voter ", table.stdout, re.M), table.stdout

        # The operator's CLI finds the cluster through EPOCHAL_CLUSTER alone, and calls it with
        # the certificate `dev up` printed.
        cli = subprocess.run(
            [EPOCHAL, "status"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "EPOCHAL_CLUSTER": exported.group(1), "EPOCHAL_REPLICA": "", **tls},
        )
        assert cli.returncode == 0, cli.stdout + cli.stderr

        down = dev(data_dir, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert "stopped the cluster in" in down.stdout
        assert not [name for name, pid in seen.items() if pid.alive]
        assert not list((data_dir / "pids").glob("*.pid"))
        stopped = dev(data_dir, "status")
        assert stopped.returncode == 1 and "not running" in stopped.stdout

        # Up again: the same processes at the same addresses, with their data.
        restarted = dev(data_dir, "up")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert exported.group(1) + "," in restarted.stdout  # replica4 was added after
        seen.update({f"{n} again": p for n, p in pids_of(data_dir).items()})
        log = (data_dir / "replica1.log").read_text()
        assert log.count("auto-join: nothing to do: node-") == 1, log
        assert dev(data_dir, "down").returncode == 0
        assert not [name for name, pid in seen.items() if pid.alive]
        assert running_in(data_dir) == []
    finally:
        if (data_dir / "supervisor.pid").exists():
            dev(data_dir, "down", timeout=60)
        for pid in seen.values():
            pid.kill()


def running_in(data_dir: Path) -> list[int]:
    """Pids of the live processes whose command line names ``data_dir`` (its servers and
    supervisor)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(data_dir).encode() in command and Pid.of(int(entry.name)).alive:
                found.append(int(entry.name))
    return found


def test_down_while_the_cluster_starts_stops_it_and_up_says_so(tmp_path: Path) -> None:
    data_dir = tmp_path / "dev"
    up = subprocess.Popen(
        [EPOCHAL, "dev", "up", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        block_until("the supervisor's pid file", (data_dir / "supervisor.pid").exists, 60)
        down = dev(data_dir, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        _, err = up.communicate(timeout=60)
        assert up.returncode == 1 and "the supervisor exited" in err, err
        assert running_in(data_dir) == []
    finally:
        up.kill()
        for pid in running_in(data_dir):
            Pid.of(pid).kill()


def test_dev_commands_on_a_directory_with_no_cluster_say_so(tmp_path: Path) -> None:
    status = dev(tmp_path, "status")
    assert status.returncode == 1 and "not running" in status.stdout
    down = dev(tmp_path, "down")
    assert down.returncode == 0 and "not running: nothing to stop" in down.stdout
    added = dev(tmp_path, "add-replica")
    assert added.returncode == 1 and "no cluster runs in" in added.stderr
    bad = dev(tmp_path, "up", "--replicas", "0")
    assert bad.returncode == 1 and "at least 1 CMS member and 1 replica" in bad.stderr
    alone = subprocess.run([EPOCHAL, "dev"], capture_output=True, text=True, timeout=60)
    assert alone.returncode == 2 and "add-replica" in alone.stdout  # the help, nothing started
