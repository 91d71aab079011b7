"""The values a range stream is made of: where it stands, what it asks, what it carries. Pure.

Theory of operation
-------------------
A stream sends one table's data in one non-wrapping token range ``(left, right]`` in two
phases: the cells in (token, partition key, clustering key, column) order, then — tracked
keyspaces only — the mutation-log entries in (token, partition key, hlc, id) order. A
``StreamCursor`` names the phase and the last item sent in it (``after``; None: from the
phase's start), so that the next request continues after it; its ``DONE`` phase is the
stream's last message. The receiver stores each message with the ``StreamProgress`` it ends at
(the cursor and the counts so far) in one transaction, which is why a stream resumes where it
stopped, after a restart too.

These values are what the source, the receiver, the operations and the peer client exchange;
the gRPC layer (``epochal.replica.codec``) converts them to and from protobuf, and
``epochal.replica.stream_encoding`` keeps the cursor on disk. A cursor that does not fit its
phase cannot be built.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from epochal.mtrack import MutationId
from epochal.replica.model import Cell, Mutation


class Phase(enum.Enum):
    CELLS = "cells"
    MUTATIONS = "mutations"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class CellPosition:
    """The last cell sent (the cells phase)."""

    token: int
    partition_key: bytes
    clustering: bytes
    column: str

    @property
    def key(self) -> tuple[int, bytes, bytes, str]:
        """As ``StreamStore.scan_cells`` continues after it."""
        return (self.token, self.partition_key, self.clustering, self.column)


@dataclass(frozen=True, slots=True)
class LogPosition:
    """The last mutation-log entry sent (the mutations phase)."""

    token: int
    partition_key: bytes
    mutation_id: MutationId

    @property
    def key(self) -> tuple[int, bytes, int, int, int, int]:
        """As ``StreamStore.scan_mutations`` continues after it."""
        mid = self.mutation_id
        return (self.token, self.partition_key, mid.hlc, mid.node, mid.log, mid.sequence)


@dataclass(frozen=True, slots=True)
class StreamCursor:
    """Where a stream stopped: the next message continues after ``after`` in ``phase``."""

    phase: Phase = Phase.CELLS
    after: CellPosition | LogPosition | None = None

    def __post_init__(self) -> None:
        expected = {Phase.CELLS: CellPosition, Phase.MUTATIONS: LogPosition}.get(self.phase)
        if self.after is not None and not isinstance(self.after, expected or ()):
            raise ValueError(f"a {self.phase.value} cursor cannot stand after {self.after!r}")

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE


DONE = StreamCursor(Phase.DONE)


@dataclass(frozen=True, slots=True)
class StreamProgress:
    """Where one stream stands on the receiver's disk, with what it stored so far."""

    cursor: StreamCursor
    cells: int = 0
    mutations: int = 0
    bytes: int = 0

    @property
    def done(self) -> bool:
        return self.cursor.done

    def advanced(
        self, cursor: StreamCursor, *, cells: int, mutations: int, size_bytes: int
    ) -> StreamProgress:
        """After one more message, which ends at ``cursor``."""
        return StreamProgress(
            cursor, self.cells + cells, self.mutations + mutations, self.bytes + size_bytes
        )


@dataclass(frozen=True, slots=True)
class StreamedCell:
    token: int
    partition_key: bytes
    cell: Cell


@dataclass(frozen=True, slots=True)
class StreamedId:
    """A log entry's id, without its body (``log_mode`` "ids")."""

    mutation_id: MutationId
    token: int
    partition_key: bytes
    whole: bool = False  # the sender holds it whole (not by id only)


LOG_MODES = ("", "ids", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeRequest:
    """``StreamRange``: a table's data in ``(left, right]`` for ``sequence_node``'s sequence
    prepared at ``prepared_epoch`` (the topology guard), continuing after ``after``."""

    epoch: int  # the receiver's: the source catches up to it first
    receiver: str
    sequence_node: str
    prepared_epoch: int
    keyspace: str
    table_id: str
    left: int
    right: int
    after: StreamCursor
    max_message_bytes: int = 0  # 0: the source's own setting
    # A tracked table's log: "" whole entries after the cells; "ids": each partition's ids with
    # its first cells, read with them (or alone, from the log phase); "none": cells only.
    log_mode: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeChunk:
    """One message a source sends: cells, or log entries in the encoding the log stores them
    in, and the cursor the message ends at."""

    epoch: int  # the source's
    cells: tuple[StreamedCell, ...] = ()
    mutations: tuple[bytes, ...] = ()
    ids: tuple[StreamedId, ...] = ()
    cursor: StreamCursor


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedChunk:
    """One message as the receiver gets it: the log entries decoded (each with the bytes to
    store), and its size on the wire."""

    epoch: int
    cells: tuple[StreamedCell, ...]
    mutations: tuple[tuple[Mutation, bytes], ...]
    cursor: StreamCursor
    size_bytes: int
    ids: tuple[StreamedId, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PullRequest:
    """``PullRanges``: stream what ``sequence_node``'s sequence moves to the node asked."""

    epoch: int  # the driver's: the receiver catches up to it first
    sequence_node: str
    prepared_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PullReport:
    """What a receiver streamed for a sequence (``PullRanges``' answer)."""

    node_id: str
    streamed_bytes: int
    streamed_cells: int
    streamed_mutations: int
    ranges_done: int
    ranges_total: int
    reconciled_mutations: int
