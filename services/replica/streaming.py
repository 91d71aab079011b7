"""Streaming ranges to a node taking them over: the source's server stream and the receiver.

Theory of operation
-------------------
The receiver pulls: a joining, replacing or moving node for itself, and any other node a
sequence moves ranges to when the node driving the sequence asks it (``PullRanges``: the
receivers of a decommission, a removal or a move). For each movement of its sequence
(``epochal.tcm.movements``), each table of each keyspace with the movement's replication
params, and each non-wrapping piece of the range, it calls ``StreamRange`` on a source: the
source answers the piece's cells in key order, then (tracked keyspaces) its mutation-log
entries, in messages of about ``--stream-message-bytes``; gRPC's flow control holds the
source back while the receiver is busy. Each message is stored in one durable transaction
together with the cursor it ends at (``stream_progress``), so a stream that stops — the
receiver restarted, the source died — continues after the last message stored, and a
mutation is never stored twice (log entries are keyed by id; a log entry's cells are stored
with it only when the entry is new).

Topology guards (seed 003): the stream belongs to one sequence (node, PREPARE epoch) at its
START step. The source refuses a request whose sequence is not at START at its epoch, and the
receiver checks before storing every message that its sequence is still at START and not
cancelling — the check and the store run without yielding the event loop, so no epoch that
closes or cancels the step can slip between them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from epochal.errors import GuardClosed, StreamRefused, Unavailable
from epochal.mtrack import MutationId
from epochal.replica.codec import (
    cell_to_proto,
    cells_from_proto,
    id_to_proto,
    mutation_from_body,
)
from epochal.replica.coordinator import span
from epochal.replica.local_replica import replica_group
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import Cell
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage, StreamProgress
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata, InProgressSequence, ReplicationType, Step
from epochal.tcm.movements import Movement
from epochal.tcm.movements import movements as movement_map
from epochal.wire.channels import Channels
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)

Phase = pb.StreamCursor.Phase
SCAN_ROWS = 512
CELL_OVERHEAD_BYTES = 40  # token, hlc, writer and framing, roughly
STREAM_ATTEMPTS = 5
RETRY_BACKOFF_S = 0.2  # times the attempt number


def at_start(metadata: ClusterMetadata, node_id: str, prepared_epoch: int) -> str | None:
    """None when ``node_id``'s sequence prepared at ``prepared_epoch`` is at START and not
    cancelling at ``metadata``; else why not."""
    sequence = metadata.sequences.get(node_id)
    if sequence is None or sequence.prepared_epoch != prepared_epoch:
        return (
            f"{node_id} has no sequence prepared at epoch {prepared_epoch} at epoch "
            f"{metadata.epoch}"
        )
    if sequence.cancelling or sequence.done is not Step.START:
        return f"{sequence.describe()} is not at its START step at epoch {metadata.epoch}"
    return None


def _sequence_node(request: pb.StreamRangeRequest) -> str:
    return request.sequence_node or request.receiver


# --------------------------------------------------------------------------- the source


class StreamSource:
    def __init__(
        self,
        settings: ReplicaSettings,
        follower: MetadataFollower,
        storage: ReplicaStorage,
        metrics: ReplicaMetrics,
    ) -> None:
        self.settings = settings
        self.follower = follower
        self.storage = storage
        self.metrics = metrics

    async def serve(self, request: pb.StreamRangeRequest) -> AsyncIterator[pb.StreamChunk]:
        """The range's chunks; raises Unavailable (behind the request's epoch) or GuardClosed
        (the sequence is not, or no longer, at its START step)."""
        follower = self.follower
        if request.epoch > follower.epoch and not await follower.catch_up(
            request.epoch, self.settings.catch_up_timeout_ms / 1000
        ):
            raise Unavailable(
                f"{follower.node_id} could not catch up to epoch {request.epoch} in time"
            )
        problem = self._refusal(request)
        if problem:
            raise GuardClosed(problem)
        tracked = (
            follower.metadata.keyspaces[request.keyspace].replication_type
            is ReplicationType.TRACKED
        )
        budget = max(request.max_message_bytes or self.settings.stream_message_bytes, 1024)
        cursor = pb.StreamCursor()
        cursor.CopyFrom(request.after)
        while cursor.phase != Phase.DONE:
            problem = at_start(follower.metadata, _sequence_node(request), request.prepared_epoch)
            if problem:
                raise GuardClosed(problem)
            chunk = pb.StreamChunk()
            if cursor.phase == Phase.CELLS:
                self._cells(request, cursor, chunk, budget)
                if cursor.phase == Phase.MUTATIONS and not tracked:
                    cursor.phase = Phase.DONE
            else:
                self._mutations(request, cursor, chunk, budget)
            chunk.epoch = follower.epoch
            chunk.cursor.CopyFrom(cursor)
            self.metrics.streamed_out_bytes.inc(chunk.ByteSize())
            yield chunk

    def _refusal(self, request: pb.StreamRangeRequest) -> str | None:
        metadata = self.follower.metadata
        me = self.follower.node_id
        if not request.left < request.right:
            return f"the range ({request.left}, {request.right}] must not wrap: send its pieces"
        problem = at_start(metadata, _sequence_node(request), request.prepared_epoch)
        if problem:
            return problem
        keyspace = metadata.keyspaces.get(request.keyspace)
        if keyspace is None or request.table_id not in {t.id for t in keyspace.tables.values()}:
            return (
                f"table {request.table_id} of {request.keyspace!r} does not exist at epoch "
                f"{metadata.epoch}"
            )
        if me not in replica_group(metadata, request.keyspace, request.right, write=False):
            return (
                f"{me} does not replicate token {request.right} of {request.keyspace} at epoch "
                f"{metadata.epoch}"
            )
        return None

    def _cells(
        self,
        request: pb.StreamRangeRequest,
        cursor: pb.StreamCursor,
        chunk: pb.StreamChunk,
        budget: int,
    ) -> None:
        size = 0
        while size < budget:
            after = (
                (cursor.token, cursor.partition_key, cursor.clustering, cursor.column)
                if cursor.started
                else None
            )
            rows = self.storage.scan_cells(
                request.table_id, request.left, request.right, after, SCAN_ROWS
            )
            for token, pkey, ckey, col, value, hlc, writer, tombstone in rows:
                chunk.cells.append(
                    pb.StreamedCell(
                        token=token,
                        partition_key=pkey,
                        cell=cell_to_proto(Cell(ckey, col, value, hlc, writer, bool(tombstone))),
                    )
                )
                cursor.started = True
                cursor.token, cursor.partition_key, cursor.clustering, cursor.column = (
                    token,
                    pkey,
                    ckey,
                    col,
                )
                size += len(pkey) + len(ckey) + len(col) + len(value or b"") + CELL_OVERHEAD_BYTES
                if size >= budget:
                    return
            if len(rows) < SCAN_ROWS:
                cursor.Clear()
                cursor.phase = Phase.MUTATIONS
                return

    def _mutations(
        self,
        request: pb.StreamRangeRequest,
        cursor: pb.StreamCursor,
        chunk: pb.StreamChunk,
        budget: int,
    ) -> None:
        size = 0
        while size < budget:
            after = None
            if cursor.started:
                mid = cursor.mutation_id
                after = (
                    cursor.token,
                    cursor.partition_key,
                    cursor.hlc,
                    mid.node,
                    mid.log,
                    mid.sequence,
                )
            rows = self.storage.scan_mutations(
                request.keyspace, request.table_id, request.left, request.right, after, SCAN_ROWS
            )
            for token, pkey, hlc, node, log_id, seq, body in rows:
                chunk.mutations.append(body)
                cursor.started = True
                cursor.token, cursor.partition_key, cursor.hlc = token, pkey, hlc
                cursor.mutation_id.CopyFrom(
                    id_to_proto(MutationId(node=node, log=log_id, sequence=seq, hlc=hlc))
                )
                size += len(body)
                if size >= budget:
                    return
            if len(rows) < SCAN_ROWS:
                cursor.Clear()
                cursor.phase = Phase.DONE
                return


# --------------------------------------------------------------------------- the receiver


@dataclass(frozen=True, slots=True)
class Piece:
    """One stream: a table's cells and log entries in a non-wrapping range."""

    movement: Movement
    keyspace: str
    table_id: str
    left: int
    right: int
    tracked: bool

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.table_id, self.left, self.right)


@dataclass
class StreamProgressView:
    """What an operation's streams have done so far (for Status and the logs)."""

    pieces_total: int = 0
    pieces_done: int = 0
    bytes: int = 0
    cells: int = 0
    mutations: int = 0
    reconciled: int = 0  # log entries reconciliation brought that the streams had not
    started: float = field(default_factory=time.monotonic)
    width_total: int = 0
    width_done: int = 0

    @property
    def eta_s(self) -> float:
        """Seconds left, from the share of the token space streamed so far; -1 unknown."""
        if not self.width_done or not self.width_total:
            return -1.0
        elapsed = time.monotonic() - self.started
        return elapsed * (self.width_total - self.width_done) / self.width_done


def pieces(metadata: ClusterMetadata, movements: tuple[Movement, ...]) -> list[Piece]:
    result = []
    for movement in movements:
        for keyspace in sorted(metadata.keyspaces.values(), key=lambda k: k.name):
            if keyspace.replication != movement.params:
                continue
            for table in sorted(keyspace.tables.values(), key=lambda t: t.id):
                for left, right in movement.range.pieces():
                    tracked = keyspace.replication_type is ReplicationType.TRACKED
                    result.append(Piece(movement, keyspace.name, table.id, left, right, tracked))
    return result


class StreamReceiver:
    def __init__(
        self,
        settings: ReplicaSettings,
        follower: MetadataFollower,
        storage: ReplicaStorage,
        channels: Channels,
        metrics: ReplicaMetrics,
    ) -> None:
        self.settings = settings
        self.follower = follower
        self.storage = storage
        self.channels = channels
        self.metrics = metrics
        self.delay_ms = 0  # the stream_delay_ms test hook: sleep after each message stored
        self._pulls: dict[tuple[str, int], asyncio.Task[StreamProgressView]] = {}

    async def pull(self, request: pb.PullRangesRequest) -> pb.PullRangesResponse:
        """PullRanges: stream what another node's sequence moves to this one.

        One run per sequence at a time: a repeated call (the driver retried, or resumed after a
        restart) waits for the run in progress; a call after it ended starts a run that skips
        the pieces already done. Raises ``GuardClosed`` when the sequence is not at START here.
        """
        follower = self.follower
        if request.epoch > follower.epoch:
            await follower.catch_up(request.epoch, self.settings.catch_up_timeout_ms / 1000)
        problem = at_start(follower.metadata, request.sequence_node, request.prepared_epoch)
        if problem:
            raise GuardClosed(problem)
        key = (request.sequence_node, request.prepared_epoch)
        task = self._pulls.get(key)
        if task is None or task.done():
            sequence = follower.metadata.sequences[request.sequence_node]
            task = asyncio.get_running_loop().create_task(self._pull(sequence))
            self._pulls[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        view = await asyncio.shield(task)
        return pb.PullRangesResponse(
            node_id=follower.node_id,
            streamed_bytes=view.bytes,
            streamed_cells=view.cells,
            streamed_mutations=view.mutations,
            ranges_done=view.pieces_done,
            ranges_total=view.pieces_total,
            reconciled_mutations=view.reconciled,
        )

    async def _pull(self, sequence: InProgressSequence) -> StreamProgressView:
        view = StreamProgressView()
        with span("replica.pull_ranges") as traced:
            traced.set_attribute("sequence", sequence.describe())
            await self.receive(sequence, movement_map(self.follower.metadata, sequence), view)
            traced.set_attribute("bytes", view.bytes)
        return view

    def _forget(self, key: tuple[str, int], task: asyncio.Task[StreamProgressView]) -> None:
        if self._pulls.get(key) is task:
            del self._pulls[key]
        if not task.cancelled() and task.exception() is not None:
            log.warning("pulling the ranges of %s@%d failed: %s", *key, task.exception())

    async def receive(
        self,
        sequence: InProgressSequence,
        movements: tuple[Movement, ...],
        view: StreamProgressView,
    ) -> None:
        """Stream every piece ``movements`` give this node that is not done yet."""
        me = self.follower.node_id
        operation = f"{sequence.node_id}@{sequence.prepared_epoch}"
        mine = tuple(m for m in movements if m.receiver == me)
        todo = pieces(self.follower.metadata, mine)
        stored = self.storage.stream_progress(operation)
        view.pieces_total += len(todo)
        view.width_total += sum(p.right - p.left for p in todo)
        for piece in todo:
            progress = stored.get(piece.key)
            if progress is not None:
                view.bytes += progress.bytes
                view.cells += progress.cells
                view.mutations += progress.mutations
                if progress.done:
                    view.pieces_done += 1
                    view.width_done += piece.right - piece.left
        log.info(
            "streaming %d pieces of %d ranges for %s (%d already done)",
            len(todo),
            len(mine),
            sequence.describe(),
            view.pieces_done,
        )
        for piece in todo:
            progress = stored.get(piece.key)
            source = ""
            if progress is None or not progress.done:
                with span("replica.stream_range") as traced:
                    traced.set_attribute("keyspace", piece.keyspace)
                    traced.set_attribute("table_id", piece.table_id)
                    traced.set_attribute("range", f"({piece.left}, {piece.right}]")
                    before = (view.bytes, view.cells, view.mutations)
                    source = await self._piece(sequence, operation, piece, progress, view)
                    traced.set_attribute("source", source)
                    traced.set_attribute("bytes", view.bytes - before[0])
                    traced.set_attribute("cells", view.cells - before[1])
                    traced.set_attribute("mutations", view.mutations - before[2])
                view.pieces_done += 1
                view.width_done += piece.right - piece.left
            if piece.tracked:
                await self._reconcile(sequence, operation, piece, source, view)

    async def _reconcile(
        self,
        sequence: InProgressSequence,
        operation: str,
        piece: Piece,
        streamed_from: str,
        view: StreamProgressView,
    ) -> None:
        """The bounded partial reconciliation of a tracked piece (until the reconciler does it):
        the log entries of the range's other read replicas, stored when new. A write a quorum
        acknowledged without the node the piece was streamed from is then here too, so the
        node is promoted at MID holding every acknowledged write of the range. Bounded by the
        range's log, not by the difference; a replica that cannot be reached is skipped with a
        warning (any quorum the write reached has another member)."""
        others = dict.fromkeys(piece.movement.sources + piece.movement.fallback)
        others.pop(streamed_from, None)
        for source in others:
            address = self._address(source)
            if address is None:
                continue
            stream = f"{operation}<{source}"
            progress = self.storage.stream_progress(stream).get(piece.key)
            if progress is not None and progress.done:
                continue
            with span("replica.reconcile_range") as traced:
                traced.set_attribute("keyspace", piece.keyspace)
                traced.set_attribute("range", f"({piece.left}, {piece.right}]")
                traced.set_attribute("source", source)
                before = view.reconciled
                problem = ""
                for attempt in range(STREAM_ATTEMPTS):
                    try:
                        await self._stream(
                            address, sequence, stream, piece, progress, view, reconcile=True
                        )
                        break
                    except grpc.aio.AioRpcError as error:
                        problem = self._failed(sequence, piece, source, error)
                        progress = self.storage.stream_progress(stream).get(piece.key)
                        await asyncio.sleep(RETRY_BACKOFF_S * (attempt + 1))
                else:
                    log.warning(
                        "reconciling %s (%d, %d] from %s failed, skipped: %s",
                        piece.keyspace,
                        piece.left,
                        piece.right,
                        source,
                        problem,
                    )
                traced.set_attribute("reconciled", view.reconciled - before)

    async def _piece(
        self,
        sequence: InProgressSequence,
        operation: str,
        piece: Piece,
        progress: StreamProgress | None,
        view: StreamProgressView,
    ) -> str:
        """Stream the piece from the first source that serves it; returns that source."""
        sources = list(piece.movement.sources)
        if self.settings.stream_sources == "nearest":
            sources += piece.movement.fallback
        if not sources:
            raise StreamRefused(f"no source is left for {piece.keyspace} {piece.movement.range}")
        last_error = ""
        for attempt in range(STREAM_ATTEMPTS):
            for source in sources:
                address = self._address(source)
                if address is None:
                    continue
                try:
                    await self._stream(address, sequence, operation, piece, progress, view)
                    return source
                except grpc.aio.AioRpcError as error:
                    last_error = self._failed(sequence, piece, source, error)
                    progress = self.storage.stream_progress(operation).get(piece.key)
            await asyncio.sleep(RETRY_BACKOFF_S * (attempt + 1))
        raise StreamRefused(
            f"could not stream {piece.keyspace} ({piece.left}, {piece.right}] from "
            f"{', '.join(sources)} in {STREAM_ATTEMPTS} rounds; last: {last_error}"
        )

    def _failed(
        self,
        sequence: InProgressSequence,
        piece: Piece,
        source: str,
        error: grpc.aio.AioRpcError,
    ) -> str:
        """Log and count a failed stream; raises ``GuardClosed`` when its step was closed."""
        problem = f"{source}: {error.code().name} {error.details()}"
        if error.code() is grpc.StatusCode.FAILED_PRECONDITION:
            guard = at_start(self.follower.metadata, sequence.node_id, sequence.prepared_epoch)
            if guard:
                raise GuardClosed(guard) from None
        log.warning(
            "stream of %s (%d, %d] from %s failed: %s",
            piece.table_id,
            piece.left,
            piece.right,
            source,
            problem,
        )
        self.metrics.stream_failures.inc()
        return problem

    async def _delayed(self) -> None:
        """The stream_delay_ms test hook: wait that long after each message stored, re-reading
        the hook as it waits so that a test can hold streams and then release them."""
        started = time.monotonic()
        while (time.monotonic() - started) * 1000 < self.delay_ms:
            await asyncio.sleep(0.01)

    def _address(self, node_id: str) -> str | None:
        info = self.follower.metadata.nodes.get(node_id)
        return info.address if info is not None else None

    async def _stream(
        self,
        address: str,
        sequence: InProgressSequence,
        operation: str,
        piece: Piece,
        progress: StreamProgress | None,
        view: StreamProgressView,
        *,
        reconcile: bool = False,
    ) -> StreamProgress | None:
        """One StreamRange call, from where ``progress`` stopped; ``reconcile`` asks for the
        log entries only and counts the new ones as reconciled."""
        if progress is not None:
            after = pb.StreamCursor.FromString(progress.cursor)
        else:
            after = pb.StreamCursor(phase=Phase.MUTATIONS if reconcile else Phase.CELLS)
        request = pb.StreamRangeRequest(
            epoch=self.follower.epoch,
            receiver=self.follower.node_id,
            prepared_epoch=sequence.prepared_epoch,
            keyspace=piece.keyspace,
            table_id=piece.table_id,
            left=piece.left,
            right=piece.right,
            after=after,
            max_message_bytes=self.settings.stream_message_bytes,
            sequence_node=sequence.node_id,
        )
        call = self.channels.peer(address).StreamRange(
            request, timeout=self.settings.stream_timeout_s
        )
        counts = (progress.cells, progress.mutations, progress.bytes) if progress else (0, 0, 0)
        async for chunk in call:
            if chunk.epoch > self.follower.epoch:
                self.follower.fetch_now()
            decoded = cells_from_proto(c.cell for c in chunk.cells)
            cells = [
                (piece.table_id, c.token, c.partition_key, cell)
                for c, cell in zip(chunk.cells, decoded, strict=True)
            ]
            mutations = [(mutation_from_body(body), body) for body in chunk.mutations]
            size = chunk.ByteSize()
            counts = (counts[0] + len(cells), counts[1] + len(mutations), counts[2] + size)
            progress = StreamProgress(
                chunk.cursor.SerializeToString(),
                chunk.cursor.phase == Phase.DONE,
                *counts,
            )
            # The guard and the store, with no await between them.
            guard = at_start(self.follower.metadata, sequence.node_id, sequence.prepared_epoch)
            if guard:
                raise GuardClosed(guard)
            fresh = self.storage.ingest(cells, mutations, operation, piece.key, progress)
            view.bytes += size
            if reconcile:
                view.reconciled += sum(fresh)
                self.metrics.reconciled_mutations.inc(sum(fresh))
            else:
                view.cells += len(cells)
                view.mutations += len(mutations)
            self.metrics.streamed_in_bytes.inc(size)
            self.metrics.streamed_in_cells.inc(len(cells))
            self.metrics.streamed_in_mutations.inc(len(mutations))
            await self._delayed()
        if progress is None or not progress.done:
            # The source ended the stream without saying it was complete: ask again.
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.DATA_LOSS,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="the stream ended before its last message",
            )
        return progress
