"""Local server processes on 127.0.0.1, for ``make run``, tests and benchmarks.

Each process runs in its own session (a Ctrl-C meant for the program that started them reaches
that program, which stops them) with its own log file; ``stop`` sends SIGTERM (graceful) and
SIGKILL if it does not exit in time, ``stop_all`` does that to many at once, ``kill`` sends
SIGKILL. Only processes started here are signalled, by their PID.

A child never outlives the program that started it, even one that was SIGKILLed: the child
calls ``die_with_parent`` first thing (``epochal.runtime.service.run`` does), which asks the kernel
for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``, Linux) and exits at once if the parent is
already gone (its parent pid is no longer the one ``EPOCHAL_PARENT_PID`` names: it died before
the request was made). The child makes the request itself, after exec, because doing it between
fork and exec (``preexec_fn``) would make Python fork a process full of gRPC threads instead of
vfork-ing it, and gRPC's fork handlers break the child. The kernel sends the signal when the
parent *thread* exits, so every child is started from one long-lived thread (``_spawner``) that
ends only with the process, never from a caller's thread that may end any time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochal.wire.standard import HealthProbe
from epochal.wire.tls import Security


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_address(taken: Collection[str], host: str = "127.0.0.1") -> str:
    """``host:port`` of a free port that is not in ``taken``: a port picked earlier for a
    process not yet started is free until it starts, so it must not be handed out twice."""
    while True:
        address = f"{host}:{free_ports(1, host)[0]}"
        if address not in taken:
            return address


# Enough for a server's grace period (5 s by default) and its interpreter's exit.
STOP_TIMEOUT_S = 6.0
PARENT_PID_ENV = "EPOCHAL_PARENT_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
EXIT_PARENT_GONE = 69  # EX_UNAVAILABLE


def die_with_parent() -> None:
    """In a child started by ``LocalProcess``: get SIGTERM when the parent dies, and exit now
    if it already has. Does nothing in a process started otherwise."""
    parent = os.environ.pop(PARENT_PID_ENV, "")
    if not parent.isdigit():
        return
    if sys.platform.startswith("linux"):
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = (ctypes.c_int, *(ctypes.c_ulong,) * 4)
        if prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != int(parent):
        print(f"the parent process {parent} is gone; exiting", file=sys.stderr)
        os._exit(EXIT_PARENT_GONE)


class _Spawner:
    """One daemon thread that starts every child, so the parent thread the kernel watches for
    PDEATHSIG lives as long as the process (a caller's thread may end any time)."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def run(self, function: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="epochal-spawner", daemon=True
                )
                self._thread.start()
        done: Future[Any] = Future()
        self._requests.put((function, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            function, done = self._requests.get()
            try:
                done.set_result(function())
            except BaseException as error:
                done.set_exception(error)


_spawner = _Spawner()


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class LocalProcess:
    name: str
    address: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    metrics_address: str = ""  # its Prometheus endpoint, host:port ("": none)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        if self.running:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            environment = {**os.environ, **(env or {}), PARENT_PID_ENV: str(os.getpid())}
            self.process = _spawner.run(
                lambda: subprocess.Popen(
                    list(command),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=environment,
                    start_new_session=True,
                )
            )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        stop_all([self], timeout_s)

    def kill(self) -> None:
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    def _terminate(self) -> bool:
        """SIGTERM if running; whether it was."""
        if not self.running:
            return False
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return True

    async def wait_serving(self, deadline: float, security: Security | None = None) -> None:
        """Until the process's gRPC health check answers SERVING (``deadline``: monotonic;
        ``security``: how to call it, default the process's)."""
        probe = HealthProbe(self.address, security)
        try:
            while True:
                if not self.running:
                    raise RuntimeError(f"{self.name} exited; log:\n{tail(self.log_path)}")
                if await probe.serving(timeout_s=1.0):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{self.name} not SERVING in time; log:\n{tail(self.log_path)}"
                    )
                await asyncio.sleep(0.1)
        finally:
            await probe.close()


def stop_all(processes: Iterable[LocalProcess], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to every running process at once, then SIGKILL to those still running
    ``timeout_s`` later: stopping many takes as long as the slowest, not the sum."""
    stopping = [p for p in processes if p._terminate()]
    deadline = time.monotonic() + timeout_s
    for process in stopping:
        assert process.process is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.process.wait(max(deadline - time.monotonic(), 0))
    for process in stopping:
        process.kill()
