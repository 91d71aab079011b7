"""Starting and stopping servers, for tests: waiting for a line in a server's log, a signal and
how long the process took to exit and what it logged meanwhile, what a clean stop must not log,
and every method of a service called once."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import grpc
from google.protobuf import empty_pb2, message_factory
from google.protobuf.descriptor import ServiceDescriptor

from epochal.devcluster.cluster import LocalCluster
from epochal.runtime.processes import LocalProcess
from epochal.wire.channels import channel as open_channel

from .waiting import until

GRACE_S = 5.0  # the servers' default --shutdown-grace-s

# What a clean stop must not log: a traceback, an error line, or the noise seen at shutdown
# before it was fixed at its root (writes to a finished stream, cancelled handlers).
NOISE = re.compile(
    r"Traceback|\bERROR\b|CRITICAL|InvalidStateError|CancelledError|not handled|"
    r"Unexpected \[|Exception"
)


async def until_logged(
    pattern: re.Pattern[str], processes: Iterable[LocalProcess], timeout_s: float = 60.0
) -> re.Match[str]:
    """Until the log of one of ``processes`` has a match of ``pattern``; the first found."""
    logs = [process.log_path for process in processes]

    def found() -> re.Match[str] | None:
        for path in logs:
            match = pattern.search(path.read_text(errors="replace")) if path.exists() else None
            if match:
                return match
        return None

    names = ", ".join(path.stem for path in logs)
    return await until(f"{pattern.pattern!r} in the log of {names}", found, timeout_s)


def assert_quiet(lines: list[str], name: str) -> None:
    """No traceback, error or shutdown noise in ``lines``, what ``name`` logged."""
    noise = [line for line in lines if NOISE.search(line)]
    assert not noise, f"{name} logged:\n" + "\n".join(lines)


@dataclass(frozen=True)
class Exited:
    seconds: float  # from the signal to the exit
    logged: list[str]  # what the process logged from the signal on


async def signal_and_time_exit(
    process: LocalProcess, signum: signal.Signals, timeout_s: float
) -> Exited:
    """Send ``signum`` to the process (ours, by its PID), and wait for it to exit; fails if
    it is still running ``timeout_s`` later."""
    assert process.process is not None and process.running
    offset = process.log_path.stat().st_size if process.log_path.exists() else 0
    sent = time.monotonic()
    process.process.send_signal(signum)
    await until(f"{process.name} exits", lambda: not process.running, timeout_s)
    took = time.monotonic() - sent
    with process.log_path.open("rb") as log:
        log.seek(offset)
        return Exited(took, log.read().decode(errors="replace").splitlines())


async def call_each_method(
    address: str, service: ServiceDescriptor
) -> dict[str, grpc.aio.AioRpcError | None]:
    """Every method of ``service`` called once with an empty request (no request at all for a
    client stream): what each failed with, or None for one that answered."""
    outcomes: dict[str, grpc.aio.AioRpcError | None] = {}
    async with open_channel(address) as channel:
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
    async with open_channel(address) as channel:
        call = channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        while time.monotonic() < deadline:
            try:
                await call(empty_pb2.Empty(), timeout=1.0, wait_for_ready=True)
                return None
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    return error
    raise TimeoutError(f"nothing answered at {address} within {timeout_s} s")


@contextlib.contextmanager
def paused(cluster: LocalCluster, *names: str) -> Iterator[None]:
    """The named replicas SIGSTOPped for the block (SIGCONT after, whatever happens)."""
    with paused_processes(*(cluster.nodes[name] for name in names)):
        yield


@contextlib.contextmanager
def paused_processes(*local: LocalProcess) -> Iterator[None]:
    """These processes (replicas, CMS members, reconcilers) SIGSTOPped for the block (SIGCONT
    after, whatever happens)."""
    processes = [process.process for process in local]
    try:
        for process in processes:
            assert process is not None
            process.send_signal(signal.SIGSTOP)
        yield
    finally:
        for process in processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)
