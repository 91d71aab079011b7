"""The bare grpc.aio baselines that benchmarks measure against, served by a process of its own
on loopback: a unary echo (sequential p50 latency and calls/s at a given concurrency) and a
server stream of fixed-size messages (MB/s received). Not a benchmark itself."""

from __future__ import annotations

import asyncio
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import grpc

from epochal.runtime.processes import free_ports

PAYLOAD = b"x" * 300


async def serve_echo(port: int) -> None:
    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        count, size = struct.unpack(">QQ", request)
        message = b"s" * size
        for _ in range(count):
            yield message

    server = grpc.aio.server()
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", handlers),))
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


async def measure_stream(port: int, total_bytes: int, message_bytes: int) -> float:
    """MB/s (2**20 bytes) of one server stream of ``total_bytes`` in ``message_bytes`` messages,
    after a short warm-up stream."""
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 2 * message_bytes)]
    ) as channel:
        await channel.channel_ready()
        stream = channel.unary_stream("/bench.Echo/Stream")
        async for _ in stream(struct.pack(">QQ", 64, message_bytes)):
            pass
        count = max(1, total_bytes // message_bytes)
        received = 0
        started = time.perf_counter()
        async for message in stream(struct.pack(">QQ", count, message_bytes)):
            received += len(message)
        elapsed = time.perf_counter() - started
    assert received == count * message_bytes, (received, count * message_bytes)
    return received / elapsed / 2**20


if __name__ == "__main__":
    asyncio.run(serve_echo(int(sys.argv[1])))
