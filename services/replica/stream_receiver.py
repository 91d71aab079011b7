"""The receiver of range streams: it pulls what a sequence moves to this node, stores each
message with the progress it ends at, and reconciles tracked pieces.

Theory of operation
-------------------
The receiver pulls: a joining, replacing or moving node for itself (``receive``, called by the
operation it drives), and any other node a sequence moves ranges to when the node driving the
sequence asks it (``pull``, for ``PullRanges``: the receivers of a decommission, a removal, the
ranges a move gives up; one run per sequence at a time, a repeated call joins it).
``epochal.replica.stream_plan`` says which pieces to stream, from which sources, and which are
done already; each of the others is asked of its sources in turn (``first_that_serves``, the one
retry loop: at most ``STREAM_ROUNDS`` rounds, a longer wait after each) and resumes after the
cursor stored for it. Each message is stored in one durable transaction together with the
progress it ends at, so a stream that stops — the receiver restarted, the source died —
continues after the last message stored, and a mutation is never stored twice (log entries are
keyed by id; an entry's cells are stored with it only when the entry is new).

Topology guard (seed 003): before storing every message the receiver checks that its sequence
is still at START and not cancelling — the check and the store run without yielding the event
loop, so no epoch that closes or cancels the step can slip between them. A source that refuses
because it sees the guard closed is believed only once this node sees it closed too; until
then it counts as a failed source.

A tracked piece streams by difference (seed 002, "Bootstrap / Topology Changes"): its log does
not travel whole. The source sends each partition's log ids with its first cells, read together
(``log_mode`` "ids"): this node stores them as entries held by id — it holds their data, and its
summaries list them, so neither reads nor the reconciler send them again — and they have no body
to send on (a delivery of one borrows the body from another replica, ``borrowed``). Then, before
the node is promoted, the operation itself reconciles the piece with the range's other read
replicas *by difference*: each sends the ids of its log of the piece, and the mutations this node
holds no entry of at all — writes the source missed — are fetched whole, by id, and stored. The
joining node's operation runs that step, not the reconciler: a join finishes correctly whether a
reconciler runs or not. A replica that cannot be reached is skipped with a warning — any quorum a
write reached has another member. Without a way to fetch by id (``coordinator`` unset) the log
travels whole, as before: the source's entries after the cells, every other replica's after.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochal.errors import EpochalError, GuardClosed, Rejected, StreamRefused
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import cell_bytes
from epochal.replica.peer_client import PeerClient
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_difference import Difference
from epochal.replica.stream_plan import (
    Piece,
    PieceStep,
    ReceivePlan,
    Source,
    at_start,
    operation_key,
    plan_receive,
    reconcile_key,
    reconcile_sources,
    resume_cursor,
)
from epochal.replica.stream_values import (
    PullReport,
    PullRequest,
    RangeRequest,
    StreamProgress,
)
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import InProgressSequence
from epochal.tcm.movements import Movement
from epochal.tcm.movements import movements as movement_map
from epochal.telemetry import attributes as attr
from epochal.telemetry import span

if TYPE_CHECKING:
    from epochal.replica.coordinator import Coordinator

log = logging.getLogger(__name__)

STREAM_ROUNDS = 5
RETRY_BACKOFF_S = 0.2  # times the round's number


@dataclass
class StreamProgressView:
    """What an operation's streams have done so far (for Status and the logs)."""

    pieces_total: int = 0
    pieces_done: int = 0
    bytes: int = 0
    cells: int = 0
    mutations: int = 0
    reconciled: int = 0  # log entries reconciliation brought that the streams had not
    mutation_bytes: int = 0  # bytes of whole mutations received (log entries with a body)
    id_entries: int = 0  # log entries received as ids, with their data
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

    def begin(self, plan: ReceivePlan) -> None:
        """Count a plan's pieces, and what their streams stored before this run."""
        self.pieces_total += len(plan.steps)
        self.pieces_done += plan.pieces_done
        self.width_total += plan.width_total
        self.width_done += plan.width_done
        size, cells, mutations = plan.stored_counts
        self.bytes += size
        self.cells += cells
        self.mutations += mutations

    def piece_done(self, piece: Piece) -> None:
        self.pieces_done += 1
        self.width_done += piece.width

    def add(self, report: PullReport) -> None:
        """Count what another receiver streamed."""
        self.bytes += report.streamed_bytes
        self.cells += report.streamed_cells
        self.mutations += report.streamed_mutations
        self.reconciled += report.reconciled_mutations
        self.pieces_done += report.ranges_done
        self.pieces_total += report.ranges_total

    def report(self, node_id: str) -> PullReport:
        return PullReport(
            node_id=node_id,
            streamed_bytes=self.bytes,
            streamed_cells=self.cells,
            streamed_mutations=self.mutations,
            ranges_done=self.pieces_done,
            ranges_total=self.pieces_total,
            reconciled_mutations=self.reconciled,
        )


async def first_that_serves(
    sources: Sequence[Source],
    stream: Callable[[Source], Awaitable[None]],
    failed: Callable[[Source, EpochalError], None],
    *,
    what: str,
    rounds: int = STREAM_ROUNDS,
    backoff_s: float = RETRY_BACKOFF_S,
) -> Source:
    """The source that ``stream`` completed from: each is tried in order, round after round,
    at most ``rounds`` rounds, waiting ``backoff_s`` times the round's number between two. Only
    a peer's failure (an error with the status it answered) is tried again; ``failed`` hears of
    each and may raise to stop. Raises ``StreamRefused`` naming the last failure."""
    if not sources:
        raise StreamRefused(f"no source is left for {what}")
    last = ""
    for round_number in range(1, rounds + 1):
        for source in sources:
            try:
                await stream(source)
                return source
            except EpochalError as error:
                if not error.status:
                    raise  # raised here, not answered by the peer
                failed(source, error)
                last = f"{source.node_id}: {error.status} {error.message}"
        if round_number < rounds:
            await asyncio.sleep(backoff_s * round_number)
    names = ", ".join(s.node_id for s in sources)
    raise StreamRefused(f"could not stream {what} from {names} in {rounds} rounds; last: {last}")


@dataclass(eq=False, repr=False)
class StreamReceiver:
    settings: ReplicaSettings
    follower: MetadataFollower
    storage: ReplicaStorage
    peers: PeerClient
    metrics: ReplicaMetrics
    # Reaches other replicas for their mutations by id (None: tracked logs travel whole).
    coordinator: Coordinator | None = None

    def __post_init__(self) -> None:
        self.delay_ms = 0  # the stream_delay_ms test hook: sleep after each message stored
        self._pulls: dict[tuple[str, int], asyncio.Task[StreamProgressView]] = {}

    async def pull(self, request: PullRequest) -> PullReport:
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
        return view.report(follower.node_id)

    async def _pull(self, sequence: InProgressSequence) -> StreamProgressView:
        view = StreamProgressView()
        with span(attr.REPLICA_PULL_RANGES) as traced:
            traced.set_attribute(attr.SEQUENCE, sequence.describe())
            await self.receive(sequence, movement_map(self.follower.metadata, sequence), view)
            traced.set_attribute(attr.REQUEST_BYTES, view.bytes)
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
        operation = operation_key(sequence)
        plan = plan_receive(
            self.follower.metadata,
            sequence,
            movements,
            self.follower.node_id,
            self.storage.streams.stream_progress(operation),
            nearest=self.settings.stream_sources == "nearest",
        )
        view.begin(plan)
        log.info(
            "streaming %d pieces of %d ranges for %s (%d already done)",
            len(plan.steps),
            plan.ranges,
            sequence.describe(),
            plan.pieces_done,
        )
        for step in plan.steps:
            streamed_from = ""
            if not step.done:
                streamed_from = await self._stream_piece(sequence, plan.operation, step, view)
                view.piece_done(step.piece)
            if step.piece.tracked:
                await self._reconcile(sequence, plan.operation, step.piece, streamed_from, view)

    async def _stream_piece(
        self,
        sequence: InProgressSequence,
        operation: str,
        step: PieceStep,
        view: StreamProgressView,
    ) -> str:
        """Stream the piece from the first source that serves it; returns that source."""
        piece = step.piece
        with span(attr.REPLICA_STREAM_RANGE) as traced:
            traced.set_attribute(attr.KEYSPACE, piece.keyspace)
            traced.set_attribute(attr.TABLE_ID, piece.table_id)
            traced.set_attribute(attr.RANGE, f"({piece.left}, {piece.right}]")
            before = (view.bytes, view.cells, view.mutations)
            source = await first_that_serves(
                step.sources,
                functools.partial(
                    self._stream,
                    sequence=sequence,
                    operation=operation,
                    piece=piece,
                    view=view,
                    log_mode=self._log_mode(piece),
                ),
                functools.partial(self._failed, sequence, piece),
                what=str(piece),
            )
            traced.set_attribute(attr.SOURCE, source.node_id)
            traced.set_attribute(attr.REQUEST_BYTES, view.bytes - before[0])
            traced.set_attribute(attr.CELLS, view.cells - before[1])
            traced.set_attribute(attr.MUTATIONS, view.mutations - before[2])
        return source.node_id

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
        node is promoted at MID holding every acknowledged write of the range."""
        difference = (
            Difference(self.settings, self.follower, self.storage, self.coordinator, piece)
            if self.coordinator is not None
            else None
        )
        sources = reconcile_sources(self.follower.metadata, piece, streamed_from)
        for source in sources:
            stream = reconcile_key(operation, source.node_id)
            progress = self.storage.streams.stream_progress(stream).get(piece.key)
            if progress is not None and progress.done:
                continue
            with span(attr.REPLICA_RECONCILE_RANGE) as traced:
                traced.set_attribute(attr.KEYSPACE, piece.keyspace)
                traced.set_attribute(attr.RANGE, f"({piece.left}, {piece.right}]")
                traced.set_attribute(attr.SOURCE, source.node_id)
                before = view.reconciled
                try:
                    await first_that_serves(
                        (source,),
                        functools.partial(
                            self._stream,
                            sequence=sequence,
                            operation=stream,
                            piece=piece,
                            view=view,
                            log_only=True,
                            log_mode=self._log_mode(piece),
                            difference=difference,
                        ),
                        functools.partial(self._failed, sequence, piece),
                        what=str(piece),
                    )
                except StreamRefused as refused:
                    log.warning("reconciling %s failed, skipped: %s", piece, refused)
                traced.set_attribute(attr.RECONCILED, view.reconciled - before)
        if difference is not None:
            # writes only the stream's source held whole (it may give the range up): whole here
            covered = await difference.cover(streamed_from)
            if covered:
                self.storage.data.write(covered)
                size = sum(len(body) for _, body in covered)
                view.bytes += size
                view.mutation_bytes += size
                self.metrics.streamed_in_mutation_bytes.inc(size)

    def _failed(
        self, sequence: InProgressSequence, piece: Piece, source: Source, error: EpochalError
    ) -> None:
        """Log and count a source's failure; raises ``GuardClosed`` when the source refused
        and this node sees the step closed too."""
        if isinstance(error, Rejected):
            guard = at_start(self.follower.metadata, sequence.node_id, sequence.prepared_epoch)
            if guard:
                raise GuardClosed(guard) from None
        log.warning(
            "stream of %s from %s failed: %s %s", piece, source.node_id, error.status, error.message
        )
        self.metrics.stream_failures.inc()

    async def _delayed(self) -> None:
        """The stream_delay_ms test hook: wait that long after each message stored, re-reading
        the hook as it waits so that a test can hold streams and then release them."""
        started = time.monotonic()
        while (time.monotonic() - started) * 1000 < self.delay_ms:
            await asyncio.sleep(0.01)

    async def _stream(
        self,
        source: Source,
        sequence: InProgressSequence,
        operation: str,
        piece: Piece,
        view: StreamProgressView,
        *,
        log_only: bool = False,
        log_mode: str = "",
        difference: Difference | None = None,
    ) -> None:
        """One StreamRange call, from where the stream stored under ``operation`` stopped;
        ``log_only`` asks for the log entries only and counts the new ones as reconciled. With
        ``log_mode`` "ids" the log comes as ids: with the cells, stored as entries held by id;
        alone (``log_only``), the mutations this node holds no entry of are fetched whole from
        the source and stored with the message's progress."""
        follower = self.follower
        progress = self.storage.streams.stream_progress(operation).get(piece.key)
        request = RangeRequest(
            epoch=follower.epoch,
            receiver=follower.node_id,
            sequence_node=sequence.node_id,
            prepared_epoch=sequence.prepared_epoch,
            keyspace=piece.keyspace,
            table_id=piece.table_id,
            left=piece.left,
            right=piece.right,
            after=resume_cursor(progress, log_only=log_only),
            max_message_bytes=self.settings.stream_message_bytes,
            log_mode=log_mode,
        )
        stored = progress or StreamProgress(request.after)
        chunks = self.peers.stream_range(
            source.address, request, timeout_s=self.settings.stream_timeout_s
        )
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                if chunk.epoch > follower.epoch:
                    follower.fetch_now()
                cells = [(piece.table_id, c.token, c.partition_key, c.cell) for c in chunk.cells]
                mutations = list(chunk.mutations)
                ids = [(piece.keyspace, i) for i in chunk.ids]
                filled = 0  # bytes of partition cells taken for ids held by id elsewhere
                if difference is not None and log_only and chunk.ids:  # by difference
                    more, fills, kept = await difference.lacking(source.node_id, chunk.ids)
                    mutations += more
                    cells += fills
                    filled = sum(cell_bytes(c) for _, _, _, c in fills)
                    ids = [(piece.keyspace, i) for i in kept]
                size = (
                    chunk.size_bytes
                    + sum(len(body) for _, body in mutations[len(chunk.mutations) :])
                    + filled
                )
                entries = len(mutations) + len(ids)  # log entries: whole, or by id with the cells
                stored = stored.advanced(
                    chunk.cursor, cells=len(cells), mutations=entries, size_bytes=size
                )
                # The guard and the store, with no await between them.
                guard = at_start(follower.metadata, sequence.node_id, sequence.prepared_epoch)
                if guard:
                    raise GuardClosed(guard)
                fresh = self.storage.streams.ingest(
                    cells, mutations, operation, piece.key, stored, ids
                )
                view.bytes += size
                view.mutation_bytes += sum(len(body) for _, body in mutations) + filled
                view.id_entries += len(ids)
                self.metrics.streamed_in_mutation_bytes.inc(
                    sum(len(b) for _, b in mutations) + filled
                )
                self.metrics.streamed_in_ids.inc(len(ids))
                if log_only:
                    view.reconciled += sum(fresh)
                    self.metrics.reconciled_mutations.inc(sum(fresh))
                else:
                    view.cells += len(cells)
                    view.mutations += entries
                self.metrics.streamed_in_bytes.inc(size)
                self.metrics.streamed_in_cells.inc(len(cells))
                self.metrics.streamed_in_mutations.inc(len(mutations))
                await self._delayed()

    def _log_mode(self, piece: Piece) -> str:
        return "ids" if piece.tracked and self.coordinator is not None else ""
