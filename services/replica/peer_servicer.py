"""epochal.v1.ReplicaPeer, replica to replica: a coordinator's requests over the ``Exchange``
stream, a progress barrier's ``AwaitEpoch``, and range streaming (``StreamRange`` served from
here, ``PullRanges`` asked of the receiver). Translates protobuf <-> domain values; errors go
through the one status table (``status``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from epochal.errors import Aborted, EpochalError
from epochal.mtrack import EXPLICIT_CELLS
from epochal.mtrack.hlc import MAX_HLC
from epochal.replica.client_servicer import shutting_down
from epochal.replica.codec import (
    bounds_from_proto,
    cell_repair_from_proto,
    cell_to_proto,
    chunk_to_proto,
    id_from_proto,
    id_to_proto,
    mutation_from_proto,
    pull_report_to_proto,
    pull_request_from_proto,
    range_request_from_proto,
)
from epochal.replica.exchange_codec import OUTCOME_NUMBERS
from epochal.replica.faults import ISOLATED, Faults
from epochal.replica.local_replica import LocalReplica, Outcome, PartitionRead, PeerReply
from epochal.replica.peer_tracing import served
from epochal.replica.settings import ReplicaSettings
from epochal.replica.status import LOGGED, abort_with
from epochal.replica.stream_receiver import StreamReceiver
from epochal.replica.stream_source import StreamSource
from epochal.runtime.follower import MetadataFollower
from epochal.telemetry.context import recorded_parent_of
from epochal.wire.fields import MalformedInput, within
from epochal.wire.multiplex import answer_with, serve
from epochal.wire.status import bounded_message
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)
DROPPED = "the drop_write_share test hook"


@dataclass(eq=False, repr=False)
class PeerServicer:
    """epochal.v1.ReplicaPeer: what other replicas' coordinators ask of this one, over one
    Exchange stream each. Every request is served as soon as it arrives (a write joins the next
    group commit without a task of its own); answers go back in batches, each by its id."""

    settings: ReplicaSettings
    local: LocalReplica
    follower: MetadataFollower
    source: StreamSource
    receiver: StreamReceiver
    faults: Faults = field(kw_only=True)
    closing: asyncio.Event = field(kw_only=True)  # the server is stopping: Exchange streams end

    async def AwaitEpoch(
        self, request: pb.AwaitEpochRequest, context: grpc.aio.ServicerContext
    ) -> pb.AwaitEpochResponse:
        try:
            epoch = within(request.epoch, "epoch")
        except MalformedInput as error:
            await abort_with(context, error, self.follower.epoch)
        timeout_ms = min(request.timeout_ms or self.settings.catch_up_timeout_ms, 60_000)
        await self.follower.catch_up(epoch, timeout_ms / 1000)
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
        except (EpochalError, MalformedInput) as error:  # the guard closed, no source would
            await abort_with(context, error, self.follower.epoch)  # serve a range; bad input
        except Exception as error:
            log.error("PullRanges failed unexpectedly", exc_info=error)
            failed = Aborted(f"streaming failed unexpectedly ({LOGGED}); resume the operation")
            await abort_with(context, failed, self.follower.epoch)
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
            shutting_down(self.settings),
        ):
            yield replies

    def _request(self, request: pb.PeerRequest) -> Any:
        request_id = request.id
        kind = request.WhichOneof("body")
        try:
            body = getattr(request, kind) if kind else None
            parent = recorded_parent_of(request)  # its work calls no one: no context to pass on
            if parent is False:
                future = self._serve(kind, body)
            else:
                future = served(
                    kind or "",
                    self.local.node_id,
                    parent,
                    lambda: self._serve(kind, body),
                    repair=kind == "apply" and body.repair,
                )
        except MalformedInput as error:
            return pb.PeerReply(id=request_id, malformed=bounded_message(str(error)))
        return answer_with(
            future,
            lambda reply: pb.PeerReply(id=request_id, **{kind: _reply_to_proto(kind, reply)}),
            lambda error: pb.PeerReply(id=request_id, malformed=_failed(kind, error)),
        )

    def _serve(self, kind: str | None, request: Any) -> asyncio.Future[PeerReply]:
        """Start serving one request; raises MalformedInput for one that makes no sense."""
        local = self.local
        if self.faults.isolated:
            return _refused(local, Outcome.OVERLOADED, f"{local.node_id} is {ISOLATED}")
        if kind is None:
            raise MalformedInput("a peer request needs a body: apply, read, fetch or deliver")
        epoch = within(request.epoch, f"{kind}.epoch")
        if kind == "apply":
            if request.HasField("cell_repair"):
                repair = request.cell_repair
                cells = cell_repair_from_proto(repair)
                return asyncio.ensure_future(local.apply_cells(epoch, cells, repair.keyspace))
            mutation = mutation_from_proto(request.mutation)
            if not request.repair and self.faults.drops_write():
                return _refused(
                    local, Outcome.OVERLOADED, f"{local.node_id} dropped the write ({DROPPED})"
                )
            body = request.mutation.SerializeToString()
            return local.apply_soon(epoch, mutation, body, repair=request.repair)
        if kind == "read":
            cells = request.sketch_cells
            if cells and (cells > EXPLICIT_CELLS or cells % 3):
                raise MalformedInput(f"sketch_cells must be a multiple of 3 up to {EXPLICIT_CELLS}")
            return asyncio.ensure_future(
                local.read(
                    epoch,
                    _partition(request),
                    data=request.data,
                    summary=request.summary,
                    want_digest=request.digest,
                    sketch_logs=[(log.node, log.log) for log in request.sketch_logs],
                    sketch_cells=cells,
                )
            )
        if kind == "deliver":
            delivered = [(mutation_from_proto(m), m.SerializeToString()) for m in request.mutations]
            return asyncio.ensure_future(local.deliver(epoch, delivered))
        ids = [id_from_proto(i, "fetch.ids") for i in request.ids]
        return asyncio.ensure_future(
            local.fetch(epoch, ids, keyspace=request.keyspace, token=request.token)
        )


def _refused(local: LocalReplica, outcome: Outcome, message: str) -> asyncio.Future[PeerReply]:
    future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
    future.set_result(PeerReply(local.follower.epoch, outcome, message))
    return future


def _reply_to_proto(kind: str, reply: PeerReply) -> Any:
    common = {
        "epoch": reply.epoch,
        "outcome": OUTCOME_NUMBERS[reply.outcome],
        "message": bounded_message(reply.message),
    }
    if kind == "apply":
        return pb.ApplyResponse(**common, fence=reply.fence)
    if kind == "read":
        return pb.LocalReadResponse(
            **common,
            cells=[cell_to_proto(c) for c in reply.cells],
            summary=reply.summary.encode() if reply.summary is not None else b"",
            digest=reply.digest,
            sketch=reply.sketch.encode() if reply.sketch is not None else b"",
            cohorts=[pb.CohortMark(id=m.id, high=m.high) for m in reply.cohorts],
        )
    if kind == "deliver":
        return pb.DeliverMutationsResponse(**common, stored=reply.examined)
    return pb.FetchMutationsResponse(
        **common,
        mutations=[pb.StoredMutation.FromString(b) for b in reply.bodies],
        examined=reply.examined,
        held=[id_to_proto(i) for i in reply.held],
    )


def _partition(request: pb.LocalReadRequest) -> PartitionRead:
    return PartitionRead(
        request.keyspace,
        request.table_id,
        request.token,
        request.partition_key,
        bounds_from_proto(request.bounds),
        within(request.low_bound, "read.low_bound", MAX_HLC),
    )


def _failed(kind: str, error: BaseException) -> str:
    """What a peer is told of a request that failed here other than by a refusal: a
    cancellation (this replica is stopping), or a bug — logged with its traceback, never
    answered with its Python text."""
    if isinstance(error, asyncio.CancelledError):
        return "the request was cancelled here (this replica is stopping); try another"
    log.error("a peer's %s request failed unexpectedly", kind, exc_info=error)
    return f"internal error serving a {kind} request ({LOGGED})"
