"""The source of a range stream: ``StreamRange`` read off this node's storage, chunk by chunk.

Theory of operation
-------------------
A node taking a range over asks for one table's data in one non-wrapping piece of it
(``RangeRequest``), after a cursor. The source first catches up to the receiver's epoch, then
refuses (``GuardClosed``) unless the request's sequence is at its START step, the table exists,
and this node is a read replica of the range. It answers the cells in key order, then — for a
tracked keyspace — the mutation-log entries, in chunks of about ``max_message_bytes`` (the
request's, else ``--stream-message-bytes``), each ending at the cursor to continue after; the
last one's cursor is DONE. With ``log_mode`` "ids" a tracked table's log travels as ids, without
bodies: each partition's ids are read together with its first cells — so every id sent is of a
mutation whose cells the receiver gets (from that state or a newer one) — and the log phase is
skipped; asked alone (a stream that starts at the log phase), the log is sent as ids. With
"none" only the cells are sent. The guard is checked again before each chunk: once the sequence
leaves START, or starts cancelling, the stream ends with ``GuardClosed``. Chunks are yielded one
at a time, so gRPC's flow control holds the source back while the receiver is busy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from epochal.errors import GuardClosed, Unavailable
from epochal.mtrack import MutationId
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import Cell
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_plan import at_start
from epochal.replica.stream_values import (
    DONE,
    CellPosition,
    LogPosition,
    Phase,
    RangeChunk,
    RangeRequest,
    StreamCursor,
    StreamedCell,
    StreamedId,
)
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ReplicationType

SCAN_ROWS = 512
ID_BYTES = 32  # an id and a token, roughly
CELL_OVERHEAD_BYTES = 40  # token, hlc, writer and framing, roughly
MIN_MESSAGE_BYTES = 1024


@dataclass(eq=False, repr=False)
class StreamSource:
    settings: ReplicaSettings
    follower: MetadataFollower
    storage: ReplicaStorage
    metrics: ReplicaMetrics

    async def serve(self, request: RangeRequest) -> AsyncIterator[RangeChunk]:
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
        budget = max(
            request.max_message_bytes or self.settings.stream_message_bytes, MIN_MESSAGE_BYTES
        )
        with_ids = tracked and request.log_mode == "ids"
        cursor = request.after
        while not cursor.done:
            problem = at_start(follower.metadata, request.sequence_node, request.prepared_epoch)
            if problem:
                raise GuardClosed(problem)
            if cursor.phase is Phase.CELLS:
                before = cursor
                cells, cursor, size = self._cells(request, cursor, budget)
                ids = self._partition_ids(request, before, cells) if with_ids else ()
                size += sum(_id_bytes(i) for i in ids)
                if cursor.phase is Phase.MUTATIONS and (not tracked or request.log_mode):
                    cursor = DONE
                chunk = RangeChunk(epoch=follower.epoch, cells=cells, ids=ids, cursor=cursor)
            elif with_ids:
                ids, cursor, size = self._log_ids(request, cursor, budget)
                chunk = RangeChunk(epoch=follower.epoch, ids=ids, cursor=cursor)
            else:
                mutations, cursor, size = self._mutations(request, cursor, budget)
                chunk = RangeChunk(epoch=follower.epoch, mutations=mutations, cursor=cursor)
            self.metrics.streamed_out_bytes.inc(size)
            yield chunk

    def _refusal(self, request: RangeRequest) -> str | None:
        metadata = self.follower.metadata
        me = self.follower.node_id
        if not request.left < request.right:
            return f"the range ({request.left}, {request.right}] must not wrap: send its pieces"
        problem = at_start(metadata, request.sequence_node, request.prepared_epoch)
        if problem:
            return problem
        keyspace = metadata.keyspaces.get(request.keyspace)
        if keyspace is None or request.table_id not in {t.id for t in keyspace.tables.values()}:
            return (
                f"table {request.table_id} of {request.keyspace!r} does not exist at epoch "
                f"{metadata.epoch}"
            )
        if me not in metadata.replica_group(request.keyspace, request.right, write=False):
            return (
                f"{me} does not replicate token {request.right} of {request.keyspace} at epoch "
                f"{metadata.epoch}"
            )
        return None

    def _cells(
        self, request: RangeRequest, cursor: StreamCursor, budget: int
    ) -> tuple[tuple[StreamedCell, ...], StreamCursor, int]:
        """About ``budget`` bytes of cells after ``cursor``, the cursor they end at, and their
        size (the cursor moves to the mutations phase after the range's last cell)."""
        assert cursor.after is None or isinstance(cursor.after, CellPosition)
        rows, ended, size = _take(
            lambda after: self.storage.streams.scan_cells(
                request.table_id, request.left, request.right, after, SCAN_ROWS
            ),
            cursor.after,
            budget,
            _cell_bytes,
            key_length=4,
        )
        cells = tuple(
            StreamedCell(token, pkey, Cell(ckey, col, value, hlc, writer, bool(tombstone)))
            for token, pkey, ckey, col, value, hlc, writer, tombstone in rows
        )
        if ended:
            return cells, StreamCursor(Phase.MUTATIONS), size
        return cells, StreamCursor(Phase.CELLS, CellPosition(*rows[-1][:4])), size

    def _partition_ids(
        self, request: RangeRequest, before: StreamCursor, cells: tuple[StreamedCell, ...]
    ) -> tuple[StreamedId, ...]:
        """The log ids of each partition whose first cells ``cells`` holds (one that started
        before ``before``'s position had its ids sent then), read now, with those cells."""
        started = before.after
        seen = {(started.token, started.partition_key)} if started is not None else set()
        ids: list[StreamedId] = []
        for cell in cells:
            key = (cell.token, cell.partition_key)
            if key in seen:
                continue
            seen.add(key)
            ids += (
                StreamedId(i, cell.token, cell.partition_key)
                for i in self.storage.data.partition_ids(
                    request.keyspace, request.table_id, cell.token, cell.partition_key
                )
            )
        return tuple(ids)

    def _log_ids(
        self, request: RangeRequest, cursor: StreamCursor, budget: int
    ) -> tuple[tuple[StreamedId, ...], StreamCursor, int]:
        """As ``_mutations``, the entries' ids only."""
        assert cursor.after is None or isinstance(cursor.after, LogPosition)
        rows, ended, size = _take(
            lambda after: self.storage.streams.scan_mutations(
                request.keyspace, request.table_id, request.left, request.right, after, SCAN_ROWS
            ),
            cursor.after,
            budget,
            lambda row: ID_BYTES + len(row[1]),
            key_length=6,
        )
        ids = tuple(
            StreamedId(
                MutationId(node=node, log=log_id, sequence=seq, hlc=hlc), token, pkey, bool(body)
            )
            for token, pkey, hlc, node, log_id, seq, body in rows
        )
        if ended:
            return ids, DONE, size
        last = ids[-1]
        return (
            ids,
            StreamCursor(
                Phase.MUTATIONS, LogPosition(last.token, last.partition_key, last.mutation_id)
            ),
            size,
        )

    def _mutations(
        self, request: RangeRequest, cursor: StreamCursor, budget: int
    ) -> tuple[tuple[bytes, ...], StreamCursor, int]:
        """About ``budget`` bytes of log entries after ``cursor``, the cursor they end at (DONE
        after the range's last entry), and their size."""
        assert cursor.after is None or isinstance(cursor.after, LogPosition)
        rows, ended, size = _take(
            lambda after: self.storage.streams.scan_mutations(
                request.keyspace, request.table_id, request.left, request.right, after, SCAN_ROWS
            ),
            cursor.after,
            budget,
            _body_bytes,
            key_length=6,
        )
        bodies = tuple(row[-1] for row in rows if row[-1])  # (entries held by id only: none)
        if ended:
            return bodies, DONE, size
        token, pkey, hlc, node, log_id, seq, _ = rows[-1]
        mid = MutationId(node=node, log=log_id, sequence=seq, hlc=hlc)
        return bodies, StreamCursor(Phase.MUTATIONS, LogPosition(token, pkey, mid)), size


def _take(
    scan: Callable[[tuple[Any, ...] | None], list[tuple[Any, ...]]],
    position: CellPosition | LogPosition | None,
    budget: int,
    size_of: Callable[[tuple[Any, ...]], int],
    *,
    key_length: int,
) -> tuple[list[tuple[Any, ...]], bool, int]:
    """Rows after ``position``, page by page, until they reach ``budget`` bytes or the range
    ends: the rows, whether the range ended, and their size. A row's first ``key_length``
    columns are its key, after which the next page continues."""
    after = position.key if position is not None else None
    taken: list[tuple[Any, ...]] = []
    size = 0
    while True:
        rows = scan(after)
        for row in rows:
            taken.append(row)
            size += size_of(row)
            if size >= budget:
                return taken, False, size
        if len(rows) < SCAN_ROWS:
            return taken, True, size
        after = rows[-1][:key_length]


def _cell_bytes(row: tuple[Any, ...]) -> int:
    _, pkey, ckey, col, value, *_ = row
    return len(pkey) + len(ckey) + len(col) + len(value or b"") + CELL_OVERHEAD_BYTES


def _body_bytes(row: tuple[Any, ...]) -> int:
    return len(row[-1])


def _id_bytes(streamed: StreamedId) -> int:
    return ID_BYTES + len(streamed.partition_key)
