"""Local server processes on 127.0.0.1, for ``make run``, tests and benchmarks.

Each process runs in its own process group with its own log file; ``stop`` sends SIGTERM
(graceful) and SIGKILL if it does not exit in time, ``kill`` sends SIGKILL. Only processes
started here are signalled, by their PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


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

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        if self.running:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(command),
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if not self.running:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    async def wait_serving(self, deadline: float) -> None:
        """Until the process's gRPC health check answers SERVING (``deadline``: monotonic)."""
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if not self.running:
                    raise RuntimeError(f"{self.name} exited; log:\n{tail(self.log_path)}")
                with contextlib.suppress(grpc.aio.AioRpcError):
                    answer = await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{self.name} not SERVING in time; log:\n{tail(self.log_path)}"
                    )
                await asyncio.sleep(0.1)
