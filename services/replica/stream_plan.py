"""What a sequence streams to this node: which pieces, from which sources, in which order, and
where each resumes. Pure: the metadata, the movement map and the progress on disk in, a plan out.

Theory of operation
-------------------
A sequence's movement map (``epochal.tcm.movements``) says which ranges each receiver takes
and which nodes may send them. A receiver streams, for each movement to it, each table of each
keyspace with the movement's replication params, each non-wrapping piece of the range — one
``Piece`` per (table, piece), in movement order, then keyspace name, table id and piece (a
wrapping range's piece up to the largest token first).
Its sources are the movement's ``sources`` (``--stream-sources strict``), then its ``fallback``
(``nearest``), each with its address at the plan's epoch; a node the directory no longer names
is no source.

Progress is stored per piece under the sequence's key, ``<node>@<prepared epoch>``: a piece
whose stream reached its DONE cursor is not streamed again; one that stopped resumes after its
cursor. A tracked piece is then reconciled with the range's other read replicas (every source
and fallback but the one it was streamed from), each stream's progress stored under
``<node>@<prepared epoch><<source>``; those streams carry log entries only, so they start at
the mutations phase.

The topology guard, ``at_start``: a stream belongs to one sequence at its START step, not
cancelling. The source checks it before it serves each message, the receiver before it stores
each one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochal.replica.stream_values import Phase, StreamCursor, StreamProgress
from epochal.tcm import ClusterMetadata, InProgressSequence, ReplicationType, Step
from epochal.tcm.movements import Movement

PieceKey = tuple[str, int, int]  # (table id, left, right): how progress is stored


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


def operation_key(sequence: InProgressSequence) -> str:
    """Under which the progress of the sequence's streams to this node is stored."""
    return f"{sequence.node_id}@{sequence.prepared_epoch}"


def reconcile_key(operation: str, source: str) -> str:
    """Under which the progress of reconciling with ``source`` is stored."""
    return f"{operation}<{source}"


@dataclass(frozen=True, slots=True)
class Source:
    node_id: str
    address: str


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
    def key(self) -> PieceKey:
        return (self.table_id, self.left, self.right)

    @property
    def width(self) -> int:
        return self.right - self.left

    def __str__(self) -> str:
        return f"{self.keyspace} {self.table_id} ({self.left}, {self.right}]"


@dataclass(frozen=True, slots=True)
class PieceStep:
    piece: Piece
    sources: tuple[Source, ...]  # in the order to try
    progress: StreamProgress | None  # as stored; None: not started

    @property
    def done(self) -> bool:
        return self.progress is not None and self.progress.done


@dataclass(frozen=True, slots=True)
class ReceivePlan:
    operation: str  # operation_key of the sequence
    ranges: int  # the movements to this node
    steps: tuple[PieceStep, ...]  # in the order to stream them

    @property
    def pieces_done(self) -> int:
        return sum(step.done for step in self.steps)

    @property
    def width_total(self) -> int:
        return sum(step.piece.width for step in self.steps)

    @property
    def width_done(self) -> int:
        return sum(step.piece.width for step in self.steps if step.done)

    @property
    def stored_counts(self) -> tuple[int, int, int]:
        """(bytes, cells, mutations) the pieces' streams already stored."""
        stored = [step.progress for step in self.steps if step.progress is not None]
        return (
            sum(p.bytes for p in stored),
            sum(p.cells for p in stored),
            sum(p.mutations for p in stored),
        )


def pieces(metadata: ClusterMetadata, movements: tuple[Movement, ...]) -> tuple[Piece, ...]:
    result = []
    for movement in movements:
        for keyspace in sorted(metadata.keyspaces.values(), key=lambda k: k.name):
            if keyspace.replication != movement.params:
                continue
            tracked = keyspace.replication_type is ReplicationType.TRACKED
            for table in sorted(keyspace.tables.values(), key=lambda t: t.id):
                for left, right in movement.range.pieces():
                    result.append(Piece(movement, keyspace.name, table.id, left, right, tracked))
    return tuple(result)


def plan_receive(
    metadata: ClusterMetadata,
    sequence: InProgressSequence,
    movements: tuple[Movement, ...],
    receiver: str,
    stored: Mapping[PieceKey, StreamProgress],
    *,
    nearest: bool,
) -> ReceivePlan:
    """What ``receiver`` streams for ``sequence``, given the progress ``stored`` under its
    ``operation_key``; ``nearest`` allows each movement's fallback sources after its own."""
    mine = tuple(m for m in movements if m.receiver == receiver)
    steps = []
    for piece in pieces(metadata, mine):
        candidates = piece.movement.sources + (piece.movement.fallback if nearest else ())
        steps.append(PieceStep(piece, _sources(metadata, candidates), stored.get(piece.key)))
    return ReceivePlan(operation_key(sequence), len(mine), tuple(steps))


def reconcile_sources(
    metadata: ClusterMetadata, piece: Piece, streamed_from: str
) -> tuple[Source, ...]:
    """The range's other read replicas, for a tracked piece streamed from ``streamed_from``
    ("" when it was streamed before this run)."""
    movement = piece.movement
    others = dict.fromkeys(movement.sources + movement.fallback)
    return _sources(metadata, tuple(n for n in others if n != streamed_from))


def resume_cursor(progress: StreamProgress | None, *, log_only: bool) -> StreamCursor:
    """Where a stream's next request starts: after its stored cursor, else at the start of
    its first phase (the log entries, for a stream of ``log_only``)."""
    if progress is not None:
        return progress.cursor
    return StreamCursor(Phase.MUTATIONS if log_only else Phase.CELLS)


def _sources(metadata: ClusterMetadata, node_ids: tuple[str, ...]) -> tuple[Source, ...]:
    sources = []
    for node_id in node_ids:
        info = metadata.nodes.get(node_id)
        if info is not None:
            sources.append(Source(node_id, info.address))
    return tuple(sources)
