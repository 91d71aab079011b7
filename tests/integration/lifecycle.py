"""Helpers for the tests of starting, stopping and restarting servers under load: concurrent
committers that record every status their attempts saw, polling with a deadline, reading what a
server logged after a point, and calling every method of a service."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import empty_pb2, message_factory
from google.protobuf.descriptor import ServiceDescriptor

from epochal.cms_client import CMSClient, Committed
from epochal.devcluster.cms import LocalCMS
from epochal.errors import EpochalError
from epochal.runtime.processes import LocalProcess
from epochal.tcm import CreateKeyspace, ReplicationParams, ReplicationType

# What a clean stop must not log: a traceback, an error line, or the noise seen at shutdown
# before it was fixed at its root (writes to a finished stream, cancelled handlers).
NOISE = re.compile(
    r"Traceback|\bERROR\b|CRITICAL|InvalidStateError|CancelledError|not handled|"
    r"Unexpected \[|Exception"
)


@contextlib.contextmanager
def local_cms(data_dir: Path) -> Iterator[LocalCMS]:
    """Three members on SQLite with quick elections, started; all killed afterwards."""
    cms = LocalCMS(
        data_dir, extra_args=("--election-timeout-ms", "400", "--heartbeat-interval-ms", "50")
    )
    try:
        cms.start()
        yield cms
    finally:
        cms.close()


async def until(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.02)


def keyspace(name: str) -> CreateKeyspace:
    return CreateKeyspace(
        name=name,
        replication=ReplicationParams.simple(1),
        replication_type=ReplicationType.UNTRACKED,
    )


@dataclass
class Committers:
    """``count`` clients committing one keyspace after another through CMSClient (each
    starting at a different member) until stopped; every outcome is kept."""

    addresses: list[str]
    count: int = 6
    acknowledged: dict[str, Committed] = field(default_factory=dict)  # entry id -> answer
    failures: list[str] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._commit(i)) for i in range(self.count)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _commit(self, index: int) -> None:
        async with CMSClient(
            self.addresses, first_member=index, attempt_timeout_s=3.0, total_timeout_s=60.0
        ) as client:
            step = 0
            while not self._stop.is_set():
                entry_id = f"committer{index}-{step}"
                try:
                    committed = await client.commit(keyspace(f"k{index}_{step}"), entry_id)
                except EpochalError as error:
                    self.failures.append(f"{entry_id}: {error!r}")
                else:
                    self.acknowledged[entry_id] = committed
                step += 1

    async def progress(self, commits: int, timeout_s: float = 60.0) -> None:
        """Until ``commits`` more commits are acknowledged."""
        target = len(self.acknowledged) + commits
        await until(f"{commits} more commits", lambda: len(self.acknowledged) >= target, timeout_s)

    def failed_attempts(self) -> Counter[grpc.StatusCode]:
        """How often each status failed an attempt of a commit that was then acknowledged."""
        return Counter(code for c in self.acknowledged.values() for code in c.failed_attempts)


def log_size(process: LocalProcess) -> int:
    return process.log_path.stat().st_size if process.log_path.exists() else 0


def logged_since(process: LocalProcess, offset: int) -> list[str]:
    with process.log_path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace").splitlines()


async def signal_and_time_exit(
    process: LocalProcess, signum: signal.Signals, timeout_s: float
) -> float:
    """Send ``signum`` to the process (ours, by its PID) and return how long it took to exit;
    fails if it is still running ``timeout_s`` later."""
    assert process.process is not None and process.running
    sent = time.monotonic()
    process.process.send_signal(signum)
    await until(f"{process.name} exits", lambda: not process.running, timeout_s)
    return time.monotonic() - sent


async def call_each_method(
    address: str, service: ServiceDescriptor
) -> dict[str, grpc.aio.AioRpcError | None]:
    """Every method of ``service`` called once with an empty request (no request at all for a
    client stream): what each failed with, or None for one that answered."""
    outcomes: dict[str, grpc.aio.AioRpcError | None] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        for method in service.methods:
            request = message_factory.GetMessageClass(method.input_type)()
            response_class = message_factory.GetMessageClass(method.output_type)
            make_call = {
                (False, False): channel.unary_unary,
                (False, True): channel.unary_stream,
                (True, False): channel.stream_unary,
                (True, True): channel.stream_stream,
            }[(method.client_streaming, method.server_streaming)]
            call = make_call(
                f"/{service.full_name}/{method.name}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_class.FromString,
            )
            argument = iter(()) if method.client_streaming else request
            outcomes[method.name] = None
            try:
                if method.server_streaming:
                    async for _ in call(argument, timeout=5.0):
                        pass
                else:
                    await call(argument, timeout=5.0)
            except grpc.aio.AioRpcError as error:
                outcomes[method.name] = error
    return outcomes


async def first_answer(
    address: str, method: str, timeout_s: float = 30.0
) -> grpc.aio.AioRpcError | None:
    """Call ``method`` (a full name, taking an empty request) at ``address`` until the server
    answers at all, past the moments when nothing listens yet: what it failed with, or None."""
    deadline = time.monotonic() + timeout_s
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        while time.monotonic() < deadline:
            try:
                await call(empty_pb2.Empty(), timeout=1.0, wait_for_ready=True)
                return None
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    return error
    raise TimeoutError(f"nothing answered at {address} within {timeout_s} s")
