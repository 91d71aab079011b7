"""What a dev cluster leaves in its data directory, read by ``epochal dev`` from any terminal.

- ``cluster.json``: the supervisor (pid, control address, log), the cluster's phase
  (``starting``, ``serving``, ``failed``, ``stopping``, ``stopped``), the folder of the span
  files (``traces/`` by default) and every process —
  name, kind, address, datacenter and rack, pid, log — so that ``dev up`` on a stopped cluster
  starts it again at the same addresses, with its data;
- ``supervisor.pid`` and ``pids/<name>.pid``: one pid per file (then the process's start time, so
  that a pid the system reused for another program is not taken for it), removed when the
  process stops;
- ``control.token``: the secret a command sends with each request to the supervisor's control
  port (loopback; the file is readable by its owner only);
- ``supervisor.log`` and ``<name>.log``: each process's output;
- ``traces/<service>-<instance>.jsonl``: each process's spans (unless ``EPOCHAL_TRACE_DIR``
  names another folder, or ``--no-traces``);
- ``prometheus/targets.json``: every process's metrics endpoint, in Prometheus' file service
  discovery format (``deploy/prometheus/prometheus.yml`` reads it), labelled with its ``service``
  (cms, replica, reconciler) and ``name``.

Files are replaced atomically (written aside, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
SUPERVISOR_PID = "supervisor.pid"
SUPERVISOR_LOG = "supervisor.log"
TOKEN_FILE = "control.token"
PIDS = "pids"
PROMETHEUS = "prometheus"
TARGETS_FILE = "targets.json"


@dataclass
class ProcessRecord:
    name: str
    kind: str  # cms, replica, reconciler
    address: str
    log: str
    pid: int = 0
    datacenter: str = ""
    rack: str = ""
    candidate: bool = False  # a CMS member added as a candidate (not an initial voter)
    metrics: str = ""  # host:port of its Prometheus endpoint ("": none)


@dataclass
class ClusterRecord:
    phase: str = "starting"
    message: str = ""
    supervisor_pid: int = 0
    control: str = ""  # host:port of the supervisor's control endpoint
    traces: str = ""  # the folder of the processes' span files ("": they write none)
    processes: list[ProcessRecord] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[ProcessRecord]:
        return [p for p in self.processes if p.kind == kind]

    @property
    def cluster_flag(self) -> str:
        """What ``EPOCHAL_CLUSTER`` names: the replicas' addresses."""
        return ",".join(p.address for p in self.of_kind("replica"))


def scrape_targets(record: ClusterRecord) -> list[dict[str, Any]]:
    """Prometheus file service discovery: one group per process that serves metrics."""
    return [
        {"targets": [p.metrics], "labels": {"service": p.kind, "name": p.name}}
        for p in record.processes
        if p.metrics
    ]


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(aside, path)


class DataDir:
    """The files of one dev cluster's data directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def state_file(self) -> Path:
        return self.path / STATE_FILE

    @property
    def supervisor_log(self) -> Path:
        return self.path / SUPERVISOR_LOG

    def read(self) -> ClusterRecord | None:
        try:
            raw: dict[str, Any] = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise RuntimeError(f"{self.state_file} cannot be read: {error}") from None
        processes = [ProcessRecord(**p) for p in raw.pop("processes", [])]
        return ClusterRecord(**raw, processes=processes)

    @property
    def targets_file(self) -> Path:
        return self.path / PROMETHEUS / TARGETS_FILE

    def write(self, record: ClusterRecord) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.state_file, json.dumps(asdict(record), indent=2) + "\n")
        (self.path / PROMETHEUS).mkdir(exist_ok=True)
        write_atomically(self.targets_file, json.dumps(scrape_targets(record), indent=2) + "\n")
        pids = self.path / PIDS
        pids.mkdir(exist_ok=True)
        wanted = {p.name: p.pid for p in record.processes if p.pid}
        for name, pid in wanted.items():
            write_atomically(pids / f"{name}.pid", f"{pid} {started(pid)}\n")
        for stale in pids.glob("*.pid"):
            if stale.stem not in wanted:
                stale.unlink(missing_ok=True)
        if record.supervisor_pid:
            pid = record.supervisor_pid
            write_atomically(self.path / SUPERVISOR_PID, f"{pid} {started(pid)}\n")
        else:
            (self.path / SUPERVISOR_PID).unlink(missing_ok=True)

    def new_token(self) -> str:
        token = secrets.token_hex(16)
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path / TOKEN_FILE, token + "\n", mode=0o600)
        return token

    def token(self) -> str:
        try:
            return (self.path / TOKEN_FILE).read_text().strip()
        except FileNotFoundError:
            return ""

    def supervisor_pid(self) -> int:
        """The pid of this data directory's supervisor if it runs, else 0."""
        found = _pid_file(self.path / SUPERVISOR_PID)
        return found.pid if found is not None and found.runs() else 0

    def pid_files(self) -> dict[str, RecordedPid]:
        found = {}
        for file in sorted((self.path / PIDS).glob("*.pid")):
            recorded = _pid_file(file)
            if recorded is not None:
                found[file.stem] = recorded
        return found


@dataclass(frozen=True)
class RecordedPid:
    """A process by its pid and start time (a pid the system reused does not match)."""

    pid: int
    start: str

    def runs(self) -> bool:
        """Alive (not a zombie waiting to be reaped) and still the process recorded."""
        return self.pid > 0 and started(self.pid) == self.start != ""


def _pid_file(path: Path) -> RecordedPid | None:
    try:
        pid, start = path.read_text().split()
        return RecordedPid(int(pid), start)
    except (OSError, ValueError):
        return None


def started(pid: int) -> str:
    """When ``pid`` started (clock ticks after boot, /proc/<pid>/stat); "" if it is not
    running (or is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()
    return "" if fields[0] == "Z" else fields[19]
