"""Processes the tests did not start themselves (a dev cluster's servers, a child's child),
known by pid and start time, so that a reused pid is never taken for one of them."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pid:
    """A process by its pid and start time (clock ticks after boot, /proc/<pid>/stat)."""

    pid: int
    start_ticks: str

    @classmethod
    def of(cls, pid: int) -> Pid:
        fields = _stat_fields(str(pid))
        assert fields is not None, f"no process {pid}"
        return cls(pid, fields[19])

    @classmethod
    def children_of(cls, parent: int) -> list[Pid]:
        found = []
        for entry in os.listdir("/proc"):
            fields = _stat_fields(entry) if entry.isdigit() else None
            if fields is not None and fields[1] == str(parent):
                found.append(cls(int(entry), fields[19]))
        return found

    @property
    def alive(self) -> bool:
        """Running, or stopped, but not a zombie."""
        fields = _stat_fields(str(self.pid))
        return fields is not None and fields[19] == self.start_ticks and fields[0] != "Z"

    def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _stat_fields(pid: str) -> list[str] | None:
    """/proc/<pid>/stat after the command name: state, ppid, ... (field 3 onwards)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()
