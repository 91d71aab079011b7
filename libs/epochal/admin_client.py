"""An asyncio client for one replica's admin calls: its topology operations
(``epochal.v1.ReplicaAdmin``), what it says of itself (``Replica.Describe``) and, on a replica
started with ``--enable-test-hooks``, its test switches (``ReplicaTesting.SetHooks``).

Requests and answers are the domain values of ``epochal.admin`` (``epochal.admin_encoding``
converts them); a failed call raises the ``EpochalError`` its status stands for
(``epochal.status.from_rpc_error``), so a caller reads the status with
``epochal.status.code_of`` and the reason with ``error.message``. Nothing is retried here: an
operation's call answers when it has finished, and a caller whose call failed or timed out asks
``status`` what became of it (the operation goes on).

    async with AdminClient("127.0.0.1:9004") as admin:
        status = await admin.run(Bootstrap(num_tokens=16))
"""

from __future__ import annotations

from typing import TypeVar

import grpc

from epochal.admin import (
    Cleanup,
    CleanupResult,
    OperationRequest,
    OperationStatus,
    ReplicaDescription,
    Status,
    TestHooks,
)
from epochal.admin_encoding import (
    Call,
    cleanup_call,
    describe_call,
    operation_call,
    set_hooks_call,
)
from epochal.status import from_rpc_error
from epochal.wire.channels import channel
from epochal.wire.tls import Security

Reply = TypeVar("Reply")

OPERATION_TIMEOUT_S = 120.0  # an operation streams and waits for barriers: minutes
QUICK_TIMEOUT_S = 5.0  # a call the replica answers at once


class AdminClient:
    def __init__(self, address: str, security: Security | None = None) -> None:
        """``security``: TLS files (an operator's certificate) or INSECURE; None: the
        process's (``epochal.wire.channels.use``)."""
        self.address = address
        self._channel = channel(address, security)

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close(grace=None)

    async def run(
        self, request: OperationRequest, *, timeout_s: float = OPERATION_TIMEOUT_S
    ) -> OperationStatus:
        """Run the operation; its status once it has finished, failed or been aborted (an
        operation refused, or failed on the way, raises)."""
        return await self._unary(operation_call(request), timeout_s)

    async def status(self, *, timeout_s: float = QUICK_TIMEOUT_S) -> OperationStatus:
        """What this node's operation is doing, now."""
        return await self._unary(operation_call(Status()), timeout_s)

    async def cleanup(
        self, request: Cleanup | None = None, *, timeout_s: float = OPERATION_TIMEOUT_S
    ) -> CleanupResult:
        """Delete what this node no longer replicates (``Cleanup(epoch=...)``: once caught up
        to that epoch)."""
        return await self._unary(cleanup_call(request or Cleanup()), timeout_s)

    async def describe(self, *, timeout_s: float = QUICK_TIMEOUT_S) -> ReplicaDescription:
        return await self._unary(describe_call(), timeout_s)

    async def set_hooks(self, hooks: TestHooks, *, timeout_s: float = QUICK_TIMEOUT_S) -> TestHooks:
        """Set the replica's test switches; the switches it then has."""
        return await self._unary(set_hooks_call(hooks), timeout_s)

    async def _unary(self, call: Call[Reply], timeout_s: float) -> Reply:
        method = self._channel.unary_unary(call.path, response_deserializer=call.decode)
        try:
            reply: Reply = await method(call.request, timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        return reply
