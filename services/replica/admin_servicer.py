"""epochal.v1.ReplicaAdmin (the topology operations this node drives for itself) and
epochal.v1.ReplicaTesting (switches for tests, served only with --enable-test-hooks). Errors go
through the one status table (``status``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

import grpc

from epochal.errors import Aborted, EpochalError, OperationRefused
from epochal.replica.codec import operation_status_to_proto
from epochal.replica.coordinator import Coordinator, Hooks
from epochal.replica.faults import Faults
from epochal.replica.ids import wall_ms
from epochal.replica.operations import Operations
from epochal.replica.status import LOGGED, abort_with
from epochal.replica.stream_receiver import StreamReceiver
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import SequenceKind
from epochal.wire.fields import MalformedInput, within
from epochal.wire.status import abort_status
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)


class AdminServicer:
    """epochal.v1.ReplicaAdmin: the topology operations this node drives for itself."""

    def __init__(self, operations: Operations) -> None:
        self.operations = operations

    def _epoch(self) -> int:
        return self.operations.follower.epoch

    async def Bootstrap(
        self, request: pb.BootstrapRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(
            context, self.operations.bootstrap(tuple(request.tokens), request.num_tokens)
        )

    async def BootstrapResume(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.resume(kind=SequenceKind.JOIN))

    async def BootstrapAbort(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.abort(kind=SequenceKind.JOIN))

    async def Decommission(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.decommission())

    async def DecommissionAbort(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.abort(kind=SequenceKind.LEAVE))

    async def Remove(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.remove(request.node_id))

    async def Replace(
        self, request: pb.ReplaceRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.replace(request.replaced))

    async def Move(
        self, request: pb.MoveRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.move(tuple(request.tokens)))

    async def Resume(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.resume(request.node_id))

    async def Cancel(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return await self._run(context, self.operations.abort(request.node_id))

    async def Cleanup(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.CleanupResponse:
        try:
            epoch, removed = await self.operations.cleanup(within(request.epoch, "epoch"))
        except (OperationRefused, MalformedInput) as error:
            await abort_with(context, error, self._epoch())
        return pb.CleanupResponse(epoch=epoch, removed=removed)

    async def Status(
        self, request: pb.OperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.OperationStatus:
        return operation_status_to_proto(self.operations.status())

    async def _run(
        self, context: grpc.aio.ServicerContext, operation: Awaitable[None]
    ) -> pb.OperationStatus:
        """Run ``operation``; refusals and failures become statuses that say what happened."""
        try:
            await operation
        except EpochalError as error:  # refused here or by the CMS, or the CMS was unreachable
            await abort_with(context, error, self._epoch())
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this call itself was cancelled (the caller went away)
            # The operation this call waited for was stopped by an abort.
            await abort_with(context, Aborted("the operation was aborted"), self._epoch())
        except Exception as error:
            log.error("the operation failed unexpectedly", exc_info=error)
            failed = Aborted(f"the operation failed unexpectedly ({LOGGED}); resume or cancel it")
            await abort_with(context, failed, self._epoch())
        return operation_status_to_proto(self.operations.status())


class TestingServicer:
    """epochal.v1.ReplicaTesting: switches for tests, served only with --enable-test-hooks."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        follower: MetadataFollower,
        coordinator: Coordinator,
        receiver: StreamReceiver,
        faults: Faults,
    ) -> None:
        self.follower = follower
        self.coordinator = coordinator
        self.receiver = receiver
        self.faults = faults

    async def SetHooks(
        self, request: pb.TestHooks, context: grpc.aio.ServicerContext
    ) -> pb.TestHooks:
        try:
            self.faults.set(drop_write_share=request.drop_write_share, isolated=request.isolated)
        except ValueError as error:
            await abort_status(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
        released = self.follower.hold_pushes and not request.hold_metadata_pushes
        self.follower.hold_pushes = request.hold_metadata_pushes
        if released:
            self.follower.fetch_now()  # follow again at once, not at the next pull
        self.coordinator.hooks = Hooks(skip_plan_recheck=request.skip_plan_recheck)
        self.coordinator.reach.cut_off = frozenset(request.cut_off_from)
        self.receiver.delay_ms = request.stream_delay_ms
        ids = self.coordinator.ids
        behind_ms = request.id_clock_behind_ms
        if ids is not None:
            ids.clock_ms = (lambda: wall_ms() - behind_ms) if behind_ms else wall_ms
        return pb.TestHooks(
            hold_metadata_pushes=self.follower.hold_pushes,
            skip_plan_recheck=self.coordinator.hooks.skip_plan_recheck,
            stream_delay_ms=self.receiver.delay_ms,
            drop_write_share=self.faults.drop_write_share,
            isolated=self.faults.isolated,
            id_clock_behind_ms=behind_ms if ids is not None else 0,
            cut_off_from=sorted(self.coordinator.reach.cut_off),
        )
