"""The replica's data model: cells, mutations, and how stored cells become rows. Pure.

Theory of operation
-------------------
A table is partitions of rows of cells. Every cell carries the writer's timestamp (its
mutation's HLC) and the writer's identity (the mutation id's 16-byte key), and the cell with the
highest ``(hlc, writer, tombstone)`` wins: last write wins, a tombstone wins a tie, so replicas
holding the same mutations hold the same cells whatever order they applied them in.

Besides regular columns a row has two cells of its own, as Cassandra's rows have liveness info
and a deletion: ``ROW_MARKER`` (""), which every upsert of the row writes, and ``ROW_DELETION``
("-"), a tombstone a row deletion writes. They are separate cells so that writing a deleted row
again does not overwrite its deletion: the cells older than the deletion stay deleted. A
partition deletion is the cell ``(b"", PARTITION_DELETION)`` ("*"). Column names are
identifiers, so none of the three can collide with one. When a partition is read, a cell
(the marker included) counts only if it is newer than both the partition deletion and its row's
deletion; a row exists while its marker or one of its regular cells does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochal.mtrack import MutationId
from epochal.tcm.keys import EVERYTHING, KeyBounds

ROW_MARKER = ""
ROW_DELETION = "-"
PARTITION_DELETION = "*"
_OWN_CELLS = frozenset({ROW_MARKER, ROW_DELETION})
WRITER_BYTES = 16


def writer_of(mutation_id: MutationId) -> bytes:
    """The 16-byte identity that orders writers with equal timestamps."""
    return mutation_id.pack()[:WRITER_BYTES]


@dataclass(frozen=True, slots=True)
class Cell:
    clustering: bytes
    column: str
    value: bytes | None  # an encoded Value; None for tombstones and row markers
    hlc: int
    writer: bytes
    tombstone: bool

    @property
    def order(self) -> tuple[int, bytes, bool]:
        return (self.hlc, self.writer, self.tombstone)


@dataclass(frozen=True, slots=True)
class RowWrite:
    clustering: bytes
    cells: tuple[tuple[str, bytes | None], ...]  # (column, encoded value or None = delete)
    deleted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutation:
    """One write of one partition, as replicas store it and exchange it whole."""

    id: MutationId
    keyspace: str
    table_id: str
    token: int
    partition_key: bytes
    rows: tuple[RowWrite, ...]
    partition_deleted: bool = False
    tracked: bool = False
    # The cells' time when it is not the id's (0): a write retried under a fresh id past a
    # reconciliation fence keeps its first attempt's, so it never overwrites a write
    # acknowledged in between.
    timestamp: int = 0

    def cells(self) -> list[Cell]:
        hlc, writer = self.timestamp or self.id.hlc, writer_of(self.id)
        cells = []
        if self.partition_deleted:
            cells.append(Cell(b"", PARTITION_DELETION, None, hlc, writer, True))
        for row in self.rows:
            if row.deleted:
                cells.append(Cell(row.clustering, ROW_DELETION, None, hlc, writer, True))
            else:
                cells.append(Cell(row.clustering, ROW_MARKER, None, hlc, writer, False))
            for column, value in row.cells:
                cells.append(Cell(row.clustering, column, value, hlc, writer, value is None))
        return cells


@dataclass(frozen=True, slots=True)
class ResolvedRow:
    clustering: bytes
    cells: tuple[tuple[str, bytes, int], ...]  # (column, encoded value, hlc), live cells only


def merge(*cell_sets: Iterable[Cell]) -> dict[tuple[bytes, str], Cell]:
    """The winning cell of every (clustering, column) across the sets."""
    winners: dict[tuple[bytes, str], Cell] = {}
    for cells in cell_sets:
        for cell in cells:
            slot = (cell.clustering, cell.column)
            held = winners.get(slot)
            if held is None or cell.order > held.order:
                winners[slot] = cell
    return winners


def resolve(
    cells: Iterable[Cell],
    bounds: KeyBounds = EVERYTHING,
    columns: Sequence[str] = (),
) -> list[ResolvedRow]:
    """The live rows in ``bounds`` (in clustering order) with their live cells among
    ``columns`` (all when empty)."""
    winners = merge(cells)
    deletion = winners.get((b"", PARTITION_DELETION))
    floor = (deletion.hlc, deletion.writer) if deletion is not None else (-1, b"")
    wanted = frozenset(columns)
    by_row: dict[bytes, list[Cell]] = {}
    for (clustering, column), cell in winners.items():
        if column != PARTITION_DELETION and bounds.contains(clustering):
            by_row.setdefault(clustering, []).append(cell)
    rows = []
    for clustering in sorted(by_row):
        row_cells = by_row[clustering]
        row_floor = floor
        for cell in row_cells:
            if cell.column == ROW_DELETION:
                row_floor = max(row_floor, (cell.hlc, cell.writer))
        live = [c for c in row_cells if not c.tombstone and (c.hlc, c.writer) > row_floor]
        if not live:
            continue
        shown = tuple(
            (c.column, c.value or b"", c.hlc)
            for c in sorted(live, key=lambda c: c.column)
            if c.column not in _OWN_CELLS and (not wanted or c.column in wanted)
        )
        rows.append(ResolvedRow(clustering, shown))
    return rows


def digest(cells: Iterable[Cell]) -> bytes:
    """A digest of the winning cells (untracked digest reads): equal cells, equal digests."""
    hasher = hashlib.blake2b(digest_size=16)
    for (clustering, column), cell in sorted(merge(cells).items()):
        hasher.update(len(clustering).to_bytes(4, "big") + clustering)
        hasher.update(column.encode() + b"\x00")
        hasher.update(cell.hlc.to_bytes(8, "big") + cell.writer + bytes([cell.tombstone]))
        value = cell.value or b""
        hasher.update(len(value).to_bytes(4, "big") + value)
    return hasher.digest()


def stale_cells(merged: dict[tuple[bytes, str], Cell], held: Iterable[Cell]) -> list[Cell]:
    """The merged cells that a replica holding ``held`` lacks or holds an older version of."""
    mine = {(c.clustering, c.column): c.order for c in held}
    return [
        cell
        for slot, cell in sorted(merged.items())
        if mine.get(slot, (-1, b"", False)) < cell.order
    ]


def cell_bytes(cell: Cell) -> int:
    """What a cell weighs on the wire, roughly (clustering, column, value, time and writer)."""
    return len(cell.clustering) + len(cell.column) + len(cell.value or b"") + 8 + len(cell.writer)
