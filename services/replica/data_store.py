"""Cells and the addressable mutation log: writes (durable when the call returns; a mutation's
cells, log entry and index rows are one transaction, and mutations that arrive together share
one), partition reads, the ids a summary is built from, bodies by id, and cleanup of ranges no
longer owned."""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epochal.mtrack import MutationId
from epochal.replica.database import ReplicaDatabase
from epochal.replica.model import PARTITION_DELETION, ROW_DELETION, Cell, Mutation
from epochal.runtime.database import transaction
from epochal.tcm.keys import KeyBounds
from epochal.tcm.tokens import TokenRange


@dataclass(frozen=True, slots=True)
class CellRepair:
    """Cells an untracked read repair writes, each with its own timestamp and writer."""

    table_id: str
    token: int
    partition_key: bytes
    cells: tuple[Cell, ...]


UPSERT_CELL = (
    "INSERT INTO cells (table_id, token, pkey, ckey, col, value, hlc, writer, tombstone) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (table_id, token, pkey, ckey, col) DO UPDATE SET value = excluded.value, "
    "hlc = excluded.hlc, writer = excluded.writer, tombstone = excluded.tombstone "
    "WHERE (excluded.hlc, excluded.writer, excluded.tombstone) > "
    "(cells.hlc, cells.writer, cells.tombstone)"
)
# An entry held by its id only (streamed with its data: an empty body) takes the whole body.
_INSERT_MUTATION = (
    "INSERT INTO mutations (node, log, seq, hlc, keyspace, table_id, token, pkey, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (node, log, seq) DO UPDATE SET "
    "body = excluded.body WHERE mutations.body = x'' AND mutations.hlc = excluded.hlc"
)
_HELD_MUTATION = "SELECT hlc, body FROM mutations WHERE node = ? AND log = ? AND seq = ?"
_READ_CELLS = (
    "SELECT ckey, col, value, hlc, writer, tombstone FROM cells "
    "WHERE table_id = ? AND token = ? AND pkey = ? AND "
    "((ckey >= ? {upper}) OR (ckey = x'' AND col = '*'))"
)
_PARTITION_IDS = (
    "SELECT node, log, seq, hlc FROM mutations "
    "WHERE keyspace = ? AND token = ? AND table_id = ? AND pkey = ? AND hlc >= ?"
)


@dataclass(frozen=True, slots=True)
class OwnedRanges:
    keyspace: str
    table_ids: tuple[str, ...]
    ranges: tuple[tuple[int, int], ...]  # non-wrapping (left, right]


class DataStore:
    def __init__(self, db: ReplicaDatabase) -> None:
        self._db = db

    def write(
        self, mutations: Sequence[tuple[Mutation, bytes]], repairs: Sequence[CellRepair] = ()
    ) -> list[Stored]:
        """One durable transaction: each mutation's cells, and for tracked ones its log entry
        (keyed by id, so a mutation received twice is stored once, and one with an id held
        here with other content is not stored). Returns, per mutation, what storing it did."""
        with transaction(self._db.raw) as cursor:
            fresh = store_mutations(cursor, mutations)
            for repair in repairs:
                cursor.executemany(
                    UPSERT_CELL,
                    cell_rows(repair.table_id, repair.token, repair.partition_key, repair.cells),
                )
        return fresh

    def read_cells(self, table_id: str, token: int, pkey: bytes, bounds: KeyBounds) -> list[Cell]:
        """The partition's cells in ``bounds``, with its partition deletion if any."""
        if bounds.upper is None:
            sql = _READ_CELLS.format(upper="")
            params: tuple[Any, ...] = (table_id, token, pkey, bounds.lower)
        else:
            sql = _READ_CELLS.format(upper="AND ckey < ?")
            params = (table_id, token, pkey, bounds.lower, bounds.upper)
        return [
            Cell(ckey, col, value, hlc, writer, bool(tombstone))
            for ckey, col, value, hlc, writer, tombstone in self._db.query(sql, params)
        ]

    def partition_ids(
        self, keyspace: str, table_id: str, token: int, pkey: bytes, low_bound: int = 0
    ) -> list[MutationId]:
        rows = self._db.query(_PARTITION_IDS, (keyspace, token, table_id, pkey, low_bound))
        return _ids(rows)

    def range_ids(
        self, keyspace: str, left: int, right: int, low_bound: int = 0
    ) -> list[MutationId]:
        """Ids of the keyspace's mutations with tokens in ``(left, right]`` (wrapping when
        ``left >= right``), at or above ``low_bound``."""
        return [i for i, _ in self.range_ids_by_token(keyspace, left, right, low_bound)]

    def range_ids_by_token(
        self,
        keyspace: str,
        left: int,
        right: int,
        low_bound: int = 0,
        *,
        below: int | None = None,
    ) -> list[tuple[MutationId, int]]:
        """As ``range_ids``, each id with its mutation's token; only ids below ``below`` when
        given."""
        sql = "SELECT node, log, seq, hlc, token FROM mutations WHERE keyspace = ? AND hlc >= ? "
        params: tuple[object, ...] = (keyspace, low_bound)
        if below is not None:
            sql += "AND hlc < ? "
            params += (below,)
        if left < right:
            sql += "AND token > ? AND token <= ?"
        else:
            sql += "AND (token > ? OR token <= ?)"
        rows = self._db.query(sql, (*params, left, right))
        return [(MutationId(node=n, log=g, sequence=q, hlc=h), t) for n, g, q, h, t in rows]

    def window_end(self, keyspace: str, segments: Sequence[tuple[int, int, int]], ids: int) -> int:
        """The HLC of the ``ids + 1``-th lowest id of ``keyspace`` over ``segments`` (each a
        non-wrapping ``(left, right, from)``: tokens ``left < token <= right``, ids at or above
        ``from``), so that at most ``ids`` ids lie below it; 0 when there are not that many."""
        sql = (
            "SELECT hlc FROM mutations WHERE keyspace = ? AND token > ? AND token <= ? "
            "AND hlc >= ? ORDER BY hlc LIMIT ?"
        )
        if len(segments) == 1:
            left, right, low = segments[0]
            row = self._db.query_one(sql + " OFFSET ?", (keyspace, left, right, low, 1, ids))
            return int(row[0]) if row is not None else 0
        lowest = heapq.merge(
            *(
                [int(h) for (h,) in self._db.query(sql, (keyspace, left, right, low, ids + 1))]
                for left, right, low in segments
            )
        )
        return next(itertools.islice(lowest, ids, None), 0)

    def range_log_size(self, keyspace: str, token_range: TokenRange) -> tuple[int, int]:
        """How many log entries of ``keyspace`` the range holds here, and their bytes."""
        entries = size = 0
        for left, right in token_range.pieces():
            row = self._db.query_one(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM mutations "
                "WHERE keyspace = ? AND token > ? AND token <= ?",
                (keyspace, left, right),
            )
            if row is not None:
                entries += int(row[0])
                size += int(row[1])
        return entries, size

    def mutation_bodies(self, ids: Sequence[MutationId]) -> list[bytes]:
        """The stored bodies of those of ``ids`` held here (not those held by id only)."""
        bodies = []
        for mid in ids:
            row = self._db.query_one(
                "SELECT body FROM mutations WHERE node = ? AND log = ? AND seq = ?",
                (mid.node, mid.log, mid.sequence),
            )
            if row is not None and row[0]:  # (an entry held by its id only has no body to send)
                bodies.append(row[0])
        return bodies

    def purge_tombstones(
        self, table_id: str, segments: Sequence[tuple[int, int, int]], limit: int
    ) -> tuple[int, int]:
        """Purge, in one durable transaction, at most ``limit`` of the table's tombstones whose
        time is below their segment's cutoff (each segment a non-wrapping ``(left, right,
        cutoff)``: tokens ``left < token <= right``), with every cell each one shadows — a
        partition deletion the partition's older cells, a row deletion its row's, a cell
        tombstone itself. Returns (tombstones purged, cells deleted with them)."""
        found: list[tuple[Any, ...]] = []
        for left, right, cutoff in segments:
            if cutoff <= 0 or len(found) >= limit:
                continue
            found += self._db.query(
                "SELECT token, pkey, ckey, col, hlc, writer FROM cells "
                "INDEXED BY ix_cells_tombstones WHERE table_id = ? "
                "AND token > ? AND token <= ? AND tombstone = 1 AND hlc < ? LIMIT ?",
                (table_id, left, right, cutoff, limit - len(found)),
            )
        shadowed = 0
        with transaction(self._db.raw) as cursor:
            for token, pkey, ckey, col, hlc, writer in found:
                older = "(hlc, writer, tombstone) < (?, ?, 1)"
                if col == PARTITION_DELETION:
                    where = f"table_id = ? AND token = ? AND pkey = ? AND {older}"
                    params: tuple[Any, ...] = (table_id, token, pkey, hlc, writer)
                elif col == ROW_DELETION:
                    where = f"table_id = ? AND token = ? AND pkey = ? AND ckey = ? AND {older}"
                    params = (table_id, token, pkey, ckey, hlc, writer)
                else:
                    where, params = "0", ()
                if params:
                    cursor.execute(f"DELETE FROM cells WHERE {where}", params)
                    shadowed += cursor.rowcount
                cursor.execute(
                    "DELETE FROM cells WHERE table_id = ? AND token = ? AND pkey = ? AND "
                    "ckey = ? AND col = ? AND tombstone = 1 AND hlc = ?",
                    (table_id, token, pkey, ckey, col, hlc),
                )
        return len(found), shadowed

    def holds(self, mutation: Mutation, body: bytes) -> bool:
        """Whether this replica holds ``mutation`` whole (its log entry has this body): what
        storing it again would answer ``Stored.HELD``. One lookup by primary key."""
        mid = mutation.id
        held = self._db.query_one(_HELD_MUTATION, (mid.node, mid.log, mid.sequence))
        return held is not None and bool(body) and (held[0], bytes(held[1])) == (mid.hlc, body)

    def held_ids(self, ids: Sequence[MutationId]) -> set[tuple[int, int, int]]:
        """The keys of those of ``ids`` with an entry here (whole or by id)."""
        return {
            mid.key
            for mid in ids
            if self._db.query_one(
                "SELECT 1 FROM mutations WHERE node = ? AND log = ? AND seq = ?",
                (mid.node, mid.log, mid.sequence),
            )
        }

    def held_by_id_in(
        self, keyspace: str, table_id: str, left: int, right: int
    ) -> list[tuple[MutationId, int]]:
        """The entries of the table in ``(left, right]`` (``left < right``) held by id only,
        each with its token."""
        rows = self._db.query(
            "SELECT node, log, seq, hlc, token FROM mutations WHERE keyspace = ? "
            "AND table_id = ? AND token > ? AND token <= ? AND body = x''",
            (keyspace, table_id, left, right),
        )
        return [(MutationId(node=n, log=g, sequence=q, hlc=h), t) for n, g, q, h, t in rows]

    def held_by_id(self, ids: Sequence[MutationId]) -> list[MutationId]:
        """Those of ``ids`` held here by id only (their data streamed in, no body)."""
        return [
            mid
            for mid in ids
            if self._db.query_one(
                "SELECT 1 FROM mutations WHERE node = ? AND log = ? AND seq = ? AND body = x''",
                (mid.node, mid.log, mid.sequence),
            )
        ]

    def cleanup(self, owned: Sequence[OwnedRanges]) -> int:
        """Delete every cell and log entry of these keyspaces' tables outside their owned
        ranges, in one durable transaction; returns how many rows went."""
        removed = 0
        with transaction(self._db.raw) as cursor:
            for keyspace in owned:
                outside = (
                    " AND ".join("NOT (token > ? AND token <= ?)" for _ in keyspace.ranges) or "1"
                )
                bounds = [b for r in keyspace.ranges for b in r]
                for table_id in keyspace.table_ids:
                    cursor.execute(
                        f"DELETE FROM cells WHERE table_id = ? AND {outside}", (table_id, *bounds)
                    )
                    removed += cursor.rowcount
                cursor.execute(
                    f"DELETE FROM mutations WHERE keyspace = ? AND {outside}",
                    (keyspace.keyspace, *bounds),
                )
                removed += cursor.rowcount
        return removed


class Stored(enum.Enum):
    """What storing a mutation did."""

    NEW = "new"  # stored
    HELD = "held"  # this id was already stored here, with the same content: nothing to do
    CONFLICT = "conflict"  # this id is stored here with other content: refused, nothing stored


def store_mutations(cursor: Any, mutations: Sequence[tuple[Mutation, bytes]]) -> list[Stored]:
    outcomes = []
    for mutation, body in mutations:
        if mutation.tracked:
            mid = mutation.id
            cursor.execute(
                _INSERT_MUTATION,
                (
                    mid.node,
                    mid.log,
                    mid.sequence,
                    mid.hlc,
                    mutation.keyspace,
                    mutation.table_id,
                    mutation.token,
                    mutation.partition_key,
                    body,
                ),
            )
            if cursor.rowcount == 0:
                # One id, one mutation: a client resending an issued id with other cells, or
                # another time, would otherwise leave replicas holding different mutations
                # under one id, which no summary can tell apart.
                cursor.execute(_HELD_MUTATION, (mid.node, mid.log, mid.sequence))
                held = cursor.fetchone()
                same = held is not None and (held[0], bytes(held[1])) == (mid.hlc, body)
                outcomes.append(Stored.HELD if same else Stored.CONFLICT)
                continue
        outcomes.append(Stored.NEW)
        cursor.executemany(
            UPSERT_CELL,
            cell_rows(mutation.table_id, mutation.token, mutation.partition_key, mutation.cells()),
        )
    return outcomes


def _ids(rows: list[tuple[Any, ...]]) -> list[MutationId]:
    return [MutationId(node=n, log=g, sequence=s, hlc=h) for n, g, s, h in rows]


def cell_rows(
    table_id: str, token: int, pkey: bytes, cells: Sequence[Cell]
) -> list[tuple[Any, ...]]:
    return [
        (table_id, token, pkey, c.clustering, c.column, c.value, c.hlc, c.writer, c.tombstone)
        for c in cells
    ]
