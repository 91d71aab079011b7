"""gRPC servicers of a replica: translate protobuf <-> domain values, call the core, map errors.

Every answer carries this node's epoch: in the response, or, for an error, in the trailing
metadata ``epochal-epoch`` (with ``epochal-rule`` naming the rule and, for a write,
``epochal-mutation-id`` the id a retry must reuse).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import grpc

from epochal.errors import Aborted, EpochalError, OperationRefused
from epochal.mtrack import EXPLICIT_CELLS, MutationId
from epochal.replica.codec import (
    bounds_from_proto,
    cell_to_proto,
    cells_from_proto,
    chunk_to_proto,
    consistency_from_proto,
    id_from_proto,
    id_to_proto,
    mutation_from_proto,
    operation_status_to_proto,
    pull_report_to_proto,
    pull_request_from_proto,
    range_request_from_proto,
    read_draft,
    rows_to_proto,
    session_hlc_from,
    write_draft,
)
from epochal.replica.coordinator import Coordinator, Hooks
from epochal.replica.handles import OUTCOME_NUMBERS
from epochal.replica.local_replica import LocalReplica, PartitionRead, PeerReply
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.operations import Operations
from epochal.replica.settings import ReplicaSettings
from epochal.replica.status import abort_with, code_of, expected
from epochal.replica.storage import CellRepair, ReplicaStorage
from epochal.replica.stream_receiver import StreamReceiver
from epochal.replica.stream_source import StreamSource
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import SequenceKind
from epochal.wire.fields import MalformedInput
from epochal.wire.log import fetch_response_to_proto
from epochal.wire.metadata import MetadataEncoder
from epochal.wire.multiplex import answer_with, serve
from epochal.wire.v1 import cms_pb2
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)
REPAIRED_IDS_SHOWN = 1000  # ReadStats.repaired lists at most this many


class ReplicaServicer:
    """epochal.v1.Replica: the client API."""

    def __init__(
        self,
        settings: ReplicaSettings,
        follower: MetadataFollower,
        coordinator: Coordinator,
        storage: ReplicaStorage,
        metrics: ReplicaMetrics,
        *,
        closing: asyncio.Event,
    ) -> None:
        self.settings = settings
        self.follower = follower
        self.coordinator = coordinator
        self.storage = storage
        self.metrics = metrics
        self.closing = closing  # the server is stopping: Session streams end
        self._encoder = MetadataEncoder()

    async def Write(
        self, request: pb.WriteRequest, context: grpc.aio.ServicerContext
    ) -> pb.WriteResponse:
        try:
            return await self._write(request)
        except Exception as error:
            await abort_with(context, error, self.follower.epoch)
            raise

    async def Read(
        self, request: pb.ReadRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReadResponse:
        try:
            return await self._read(request)
        except Exception as error:
            await abort_with(context, error, self.follower.epoch)
            raise

    async def Session(
        self, requests: AsyncIterator[pb.SessionRequests], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SessionReplies]:
        async for replies in serve(
            requests,
            context,
            self._session_request,
            lambda r: pb.SessionReplies(replies=r),
            self.closing,
            _shutting_down(self.settings),
        ):
            yield replies

    def _session_request(self, request: pb.SessionRequest) -> Any:
        request_id = request.id
        kind = request.WhichOneof("body")
        if kind is None:
            failure = self._failure(MalformedInput("a session request needs a write or a read"))
            return pb.SessionReply(id=request_id, failure=failure)
        work = self._write(request.write) if kind == "write" else self._read(request.read)
        return answer_with(
            asyncio.ensure_future(work),
            lambda response: pb.SessionReply(id=request_id, **{kind: response}),
            lambda error: pb.SessionReply(id=request_id, failure=self._failure(error)),
        )

    def _failure(self, error: BaseException) -> pb.SessionFailure:
        """What Write or Read would have answered as a status, as a message."""
        failure = expected(error)
        message = pb.SessionFailure(
            code=code_of(failure).name,
            message=failure.message,
            rule=failure.rule,
            epoch=self.follower.epoch,
        )
        if failure.mutation_id:
            message.mutation_id.CopyFrom(
                id_to_proto(MutationId.unpack(bytes.fromhex(failure.mutation_id)))
            )
        return message

    async def _write(self, request: pb.WriteRequest) -> pb.WriteResponse:
        """Raises MalformedInput or an expected error (epochal.errors)."""
        draft = write_draft(request.mutation)
        level = consistency_from_proto(request.consistency)
        retry_of = id_from_proto(request.mutation_id) if request.HasField("mutation_id") else None
        result = await self.coordinator.write(
            draft,
            level,
            client_epoch=request.epoch,
            session_hlc=session_hlc_from(request.session_hlc),
            retry_of=retry_of,
        )
        return pb.WriteResponse(
            epoch=result.epoch,
            mutation_id=id_to_proto(result.mutation_id),
            acknowledged=result.acknowledged,
        )

    async def _read(self, request: pb.ReadRequest) -> pb.ReadResponse:
        """Raises MalformedInput or an expected error (epochal.errors)."""
        draft = read_draft(request)
        level = consistency_from_proto(request.consistency)
        result = await self.coordinator.read(
            draft,
            level,
            client_epoch=request.epoch,
            session_hlc=session_hlc_from(request.session_hlc),
        )
        stats = result.stats
        return pb.ReadResponse(
            epoch=result.epoch,
            rows=rows_to_proto(result.table, result.rows),
            hlc=result.hlc,
            stats=pb.ReadStats(
                replicas=stats.replicas,
                data_replica=stats.data_replica,
                repaired_mutations=len(stats.repaired),
                repaired=[id_to_proto(i) for i in stats.repaired[:REPAIRED_IDS_SHOWN]],
                digest_mismatch=stats.digest_mismatch,
                repaired_cells=stats.repaired_cells,
                summary_rounds=stats.summary_rounds,
                summaries_agreed=stats.summaries_agreed,
                differing=[
                    pb.DifferingLogs(replica=node, logs=[pb.LogKey(node=n, log=g) for n, g in logs])
                    for node, logs in sorted(stats.differing.items())
                ],
            ),
        )

    async def FetchLog(
        self, request: cms_pb2.FetchLogRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.FetchLogResponse:
        """The log as applied here: entries after since_epoch, or this node's metadata as a
        snapshot when it no longer keeps the entries the caller needs."""
        metadata = self.follower.metadata
        latest = metadata.epoch
        since = request.since_epoch
        if since >= latest:
            return fetch_response_to_proto(
                snapshot_encoded=None, entries=[], latest_epoch=latest, has_more=False
            )
        oldest = self.storage.oldest_metadata_epoch()
        if since == 0 or oldest == 0 or since + 1 < oldest:
            return fetch_response_to_proto(
                snapshot_encoded=self._encoder.encode(metadata),
                entries=[],
                latest_epoch=latest,
                has_more=False,
            )
        page = min(
            request.max_entries or self.settings.fetch_page_entries,
            self.settings.fetch_page_entries,
        )
        rows = [
            (e.epoch, e.entry_id, e.transformation)
            for e in self.storage.metadata_entries(since, page)
            if e.epoch <= latest
        ]
        reached = rows[-1][0] if rows else since
        return fetch_response_to_proto(
            snapshot_encoded=None, entries=rows, latest_epoch=latest, has_more=reached < latest
        )

    async def Describe(
        self, request: pb.ReplicaDescribeRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReplicaDescribeResponse:
        metadata = self.follower.metadata
        node = metadata.nodes.get(self.coordinator.node_id)
        ids = self.coordinator.ids
        return pb.ReplicaDescribeResponse(
            node_id=self.coordinator.node_id,
            address=self.settings.address,
            datacenter=self.settings.datacenter,
            rack=self.settings.rack,
            epoch=metadata.epoch,
            ready=self.follower.caught_up and bool(self.coordinator.node_id),
            state=node.state.value if node is not None else "",
            hlc=ids.hlc.last if ids is not None else 0,
            metrics=self.metrics.snapshot(),
            cms_addresses=self.follower.cms_addresses(),
        )

    async def AppliedEpochs(
        self, request: pb.AppliedEpochsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppliedEpochsResponse:
        return pb.AppliedEpochsResponse(
            epochs=[
                pb.AppliedEpoch(epoch=epoch, applied_unix_ns=ns)
                for epoch, ns in self.follower.applied_at
                if epoch > request.since_epoch
            ]
        )


class PeerServicer:
    """epochal.v1.ReplicaPeer: what other replicas' coordinators ask of this one, over one
    Exchange stream each. Every request is served as soon as it arrives (a write joins the next
    group commit without a task of its own); answers go back in batches, each by its id."""

    def __init__(
        self,
        settings: ReplicaSettings,
        local: LocalReplica,
        follower: MetadataFollower,
        source: StreamSource,
        receiver: StreamReceiver,
        *,
        closing: asyncio.Event,
    ) -> None:
        self.settings = settings
        self.local = local
        self.follower = follower
        self.source = source
        self.receiver = receiver
        self.closing = closing  # the server is stopping: Exchange streams end

    async def AwaitEpoch(
        self, request: pb.AwaitEpochRequest, context: grpc.aio.ServicerContext
    ) -> pb.AwaitEpochResponse:
        timeout_ms = min(request.timeout_ms or self.settings.catch_up_timeout_ms, 60_000)
        await self.follower.catch_up(request.epoch, timeout_ms / 1000)
        return pb.AwaitEpochResponse(epoch=self.follower.epoch, node_id=self.follower.node_id)

    async def StreamRange(
        self, request: pb.StreamRangeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamChunk]:
        try:
            async for chunk in self.source.serve(range_request_from_proto(request)):
                yield chunk_to_proto(chunk)
        except (EpochalError, MalformedInput) as error:
            await abort_with(context, error, self.follower.epoch)

    async def PullRanges(
        self, request: pb.PullRangesRequest, context: grpc.aio.ServicerContext
    ) -> pb.PullRangesResponse:
        try:
            return pull_report_to_proto(await self.receiver.pull(pull_request_from_proto(request)))
        except EpochalError as error:  # the guard closed, or no source would serve a range
            await abort_with(context, error, self.follower.epoch)
        except Exception as error:
            await abort_with(context, Aborted(f"streaming failed: {error}"), self.follower.epoch)
        raise AssertionError("unreachable: context.abort raises")

    async def Exchange(
        self, requests: AsyncIterator[pb.PeerRequests], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PeerReplies]:
        async for replies in serve(
            requests,
            context,
            self._request,
            lambda r: pb.PeerReplies(replies=r),
            self.closing,
            _shutting_down(self.settings),
        ):
            yield replies

    def _request(self, request: pb.PeerRequest) -> Any:
        request_id = request.id
        kind = request.WhichOneof("body")
        try:
            future = self._serve(kind, getattr(request, kind) if kind else None)
        except MalformedInput as error:
            return pb.PeerReply(id=request_id, malformed=str(error))
        return answer_with(
            future,
            lambda reply: pb.PeerReply(id=request_id, **{kind: _reply_to_proto(kind, reply)}),
            lambda error: pb.PeerReply(id=request_id, malformed=f"failed: {error!r}"),
        )

    def _serve(self, kind: str | None, request: Any) -> asyncio.Future[PeerReply]:
        """Start serving one request; raises MalformedInput for one that makes no sense."""
        local = self.local
        if kind == "apply":
            if request.HasField("cell_repair"):
                repair = request.cell_repair
                cells = CellRepair(
                    repair.table_id,
                    repair.token,
                    repair.partition_key,
                    tuple(cells_from_proto(repair.cells)),
                )
                return asyncio.ensure_future(
                    local.apply_cells(request.epoch, cells, repair.keyspace)
                )
            mutation = mutation_from_proto(request.mutation)
            body = request.mutation.SerializeToString()
            return local.apply_soon(request.epoch, mutation, body, repair=request.repair)
        if kind == "read":
            cells = request.sketch_cells
            if cells and (cells > EXPLICIT_CELLS or cells % 3):
                raise MalformedInput(f"sketch_cells must be a multiple of 3 up to {EXPLICIT_CELLS}")
            return asyncio.ensure_future(
                local.read(
                    request.epoch,
                    _partition(request),
                    data=request.data,
                    summary=request.summary,
                    want_digest=request.digest,
                    sketch_logs=[(log.node, log.log) for log in request.sketch_logs],
                    sketch_cells=cells,
                )
            )
        if kind == "fetch":
            ids = [id_from_proto(i, "ids") for i in request.ids]
            return asyncio.ensure_future(local.fetch(request.epoch, ids))
        raise MalformedInput("a peer request needs a body: apply, read or fetch")


def _shutting_down(settings: ReplicaSettings) -> str:
    return f"replica {settings.address} is shutting down; try another replica"


def _reply_to_proto(kind: str, reply: PeerReply) -> Any:
    common = {
        "epoch": reply.epoch,
        "outcome": OUTCOME_NUMBERS[reply.outcome],
        "message": reply.message,
    }
    if kind == "apply":
        return pb.ApplyResponse(**common)
    if kind == "read":
        return pb.LocalReadResponse(
            **common,
            cells=[cell_to_proto(c) for c in reply.cells],
            summary=reply.summary.encode() if reply.summary is not None else b"",
            digest=reply.digest,
            sketch=reply.sketch.encode() if reply.sketch is not None else b"",
        )
    return pb.FetchMutationsResponse(
        **common,
        mutations=[pb.StoredMutation.FromString(b) for b in reply.bodies],
        examined=reply.examined,
    )


def _partition(request: pb.LocalReadRequest) -> PartitionRead:
    return PartitionRead(
        request.keyspace,
        request.table_id,
        request.token,
        request.partition_key,
        bounds_from_proto(request.bounds),
    )


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
            epoch, removed = await self.operations.cleanup(request.epoch)
        except OperationRefused as error:
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
            await abort_with(context, Aborted(f"the operation failed: {error}"), self._epoch())
        return operation_status_to_proto(self.operations.status())


class TestingServicer:
    """epochal.v1.ReplicaTesting: switches for tests, served only with --enable-test-hooks."""

    __test__ = False  # not a pytest class

    def __init__(
        self, follower: MetadataFollower, coordinator: Coordinator, receiver: StreamReceiver
    ) -> None:
        self.follower = follower
        self.coordinator = coordinator
        self.receiver = receiver

    async def SetHooks(
        self, request: pb.TestHooks, context: grpc.aio.ServicerContext
    ) -> pb.TestHooks:
        released = self.follower.hold_pushes and not request.hold_metadata_pushes
        self.follower.hold_pushes = request.hold_metadata_pushes
        if released:
            self.follower.fetch_now()  # follow again at once, not at the next pull
        self.coordinator.hooks = Hooks(skip_plan_recheck=request.skip_plan_recheck)
        self.receiver.delay_ms = request.stream_delay_ms
        return pb.TestHooks(
            hold_metadata_pushes=self.follower.hold_pushes,
            skip_plan_recheck=self.coordinator.hooks.skip_plan_recheck,
            stream_delay_ms=self.receiver.delay_ms,
        )
