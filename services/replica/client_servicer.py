"""epochal.v1.Replica, the clients' service: writes, reads and sessions coordinated here, the
metadata log as applied here, and what this node is. Translates protobuf <-> domain values and
answers every error through the one status table (``status``).

Every answer carries this node's epoch: in the response, or, for an error, in the trailing
metadata ``epochal-epoch`` (with ``epochal-rule`` naming the rule, for a write
``epochal-mutation-id`` the id a retry must reuse, and for too few answers
``epochal-replicas-bin`` what each replica did); a Session carries the same in its
``SessionFailure``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from epochal.mtrack import MutationId
from epochal.replica.codec import (
    consistency_from_proto,
    id_from_proto,
    id_to_proto,
    read_draft,
    rows_to_proto,
    session_hlc_from,
    write_draft,
)
from epochal.replica.coordinator import Coordinator
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.settings import ReplicaSettings
from epochal.replica.status import abort_with, code_of, expected
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.follower import MetadataFollower
from epochal.telemetry.context import parent_of, spawn_in, tracing
from epochal.wire.fields import MalformedInput, within
from epochal.wire.log import fetch_response_to_proto
from epochal.wire.metadata import MetadataEncoder
from epochal.wire.multiplex import answer_with, serve
from epochal.wire.status import bounded_message, replicas_to_proto
from epochal.wire.v1 import cms_pb2
from epochal.wire.v1 import replica_pb2 as pb

REPAIRED_IDS_SHOWN = 1000  # ReadStats.repaired lists at most this many


@dataclass(eq=False, repr=False)
class ReplicaServicer:
    """epochal.v1.Replica: the client API."""

    settings: ReplicaSettings
    follower: MetadataFollower
    coordinator: Coordinator
    storage: ReplicaStorage
    metrics: ReplicaMetrics
    closing: asyncio.Event = field(kw_only=True)  # the server is stopping: Session streams end

    # Write and Read start the coordinator's span, a child of the caller's (epochal.wire.handlers).
    TRACED_METHODS = frozenset({"Write", "Read"})

    def __post_init__(self) -> None:
        self._encoder = MetadataEncoder()
        self._tracing = tracing()

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
            shutting_down(self.settings),
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
            spawn_in(parent_of(request) if self._tracing else None, work),
            lambda response: pb.SessionReply(id=request_id, **{kind: response}),
            lambda error: pb.SessionReply(id=request_id, failure=self._failure(error)),
        )

    def _failure(self, error: BaseException) -> pb.SessionFailure:
        """What Write or Read would have answered as a status, as a message."""
        failure = expected(error)
        message = pb.SessionFailure(
            code=code_of(failure).name,
            message=bounded_message(failure.message),
            rule=failure.rule,
            epoch=self.follower.epoch,
        )
        if failure.mutation_id:
            message.mutation_id.CopyFrom(
                id_to_proto(MutationId.unpack(bytes.fromhex(failure.mutation_id)))
            )
        if failure.replicas is not None:
            message.replicas.CopyFrom(replicas_to_proto(failure.replicas))
        return message

    async def _write(self, request: pb.WriteRequest) -> pb.WriteResponse:
        """Raises MalformedInput or an expected error (epochal.errors)."""
        draft = write_draft(request.mutation)
        level = consistency_from_proto(request.consistency)
        retry_of = id_from_proto(request.mutation_id) if request.HasField("mutation_id") else None
        result = await self.coordinator.write(
            draft,
            level,
            client_epoch=within(request.epoch, "epoch"),
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
            client_epoch=within(request.epoch, "epoch"),
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
        oldest = self.storage.metadata.oldest_metadata_epoch()
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
            for e in self.storage.metadata.metadata_entries(since, page)
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
            load_bytes=self.storage.db.size_bytes(),
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


def shutting_down(settings: ReplicaSettings) -> str:
    return f"replica {settings.address} is shutting down; try another replica"
