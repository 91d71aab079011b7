"""The bare grpc.aio unary echo that benchmarks measure against, in a process of its own on
loopback: sequential p50 latency and calls/s at a given concurrency. Not a benchmark itself."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from epochal.processes import free_ports

PAYLOAD = b"x" * 300


async def serve_echo(port: int) -> None:
    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Echo", {"Echo": handler}),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


@contextmanager
def echo_server() -> Iterator[int]:
    """Run the echo server (this module as a script) and yield its port."""
    (port,) = free_ports(1)
    process = subprocess.Popen([sys.executable, __file__, str(port)], start_new_session=True)
    try:
        yield port
    finally:
        process.kill()
        process.wait()


async def measure_echo(
    port: int, seconds: float, calls: int, concurrency: int
) -> tuple[float, float]:
    """(sequential p50 in ms, calls/s with ``concurrency`` callers)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await channel.channel_ready()
        echo = channel.unary_unary("/bench.Echo/Echo")
        for _ in range(200):
            await echo(PAYLOAD)
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            await echo(PAYLOAD)
            latencies.append(time.perf_counter() - started)
        done = 0
        stop_at = time.perf_counter() + seconds

        async def caller() -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                await echo(PAYLOAD)
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return statistics.median(latencies) * 1000, done / elapsed


if __name__ == "__main__":
    asyncio.run(serve_echo(int(sys.argv[1])))
