"""A grpc.aio server on 127.0.0.1 for the clients' tests: ``async with serving(servicer,
add_...)`` starts it with the servicer added to each generated ``add_*_to_server``, gives its
address, and stops it after."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from epochal.runtime.processes import free_ports


@contextlib.asynccontextmanager
async def serving(
    servicer: object, *adds: Callable[[Any, grpc.aio.Server], None]
) -> AsyncIterator[str]:
    server = grpc.aio.server()
    for add in adds:
        add(servicer, server)
    address = f"127.0.0.1:{free_ports(1)[0]}"
    server.add_insecure_port(address)
    await server.start()
    try:
        yield address
    finally:
        await server.stop(None)
