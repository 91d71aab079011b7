"""What range streaming reads and writes: scans of a table's cells and log entries in a token
range after a cursor (the source), and a received message stored with its progress in one
transaction (the receiver), so a restart resumes where it stopped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from epochal.replica.data_store import UPSERT_CELL, Stored, store_mutations
from epochal.replica.database import ReplicaDatabase
from epochal.replica.model import Cell, Mutation
from epochal.replica.stream_encoding import decode_cursor, encode_cursor
from epochal.replica.stream_values import StreamedId, StreamProgress
from epochal.runtime.database import transaction

_SCAN_CELLS = (
    "SELECT token, pkey, ckey, col, value, hlc, writer, tombstone FROM cells "
    "WHERE table_id = ? AND {where} AND token <= ? ORDER BY token, pkey, ckey, col LIMIT ?"
)
_SCAN_COHORT = (
    "SELECT table_id, token, pkey FROM cohort_partitions "
    "WHERE cohort_id = ? AND (table_id, token, pkey) > (?, ?, ?) "
    "ORDER BY table_id, token, pkey LIMIT ?"
)
_SCAN_MUTATIONS = (
    "SELECT token, pkey, hlc, node, log, seq, body FROM mutations "
    "WHERE keyspace = ? AND {where} AND token <= ? AND table_id = ? "
    "ORDER BY token, table_id, pkey, hlc, node, log, seq LIMIT ?"
)
CellKey = tuple[int, bytes, bytes, str]  # (token, pkey, ckey, col)
LogKey = tuple[int, bytes, int, int, int, int]  # (token, pkey, hlc, node, log, seq)


# A log entry held by its data (streamed cells) rather than its body: an empty body. It counts in
# summaries like any entry, is never sent as a mutation (``DataStore.mutation_bodies`` skips it),
# and is filled in when the whole mutation arrives (``store_mutations``).
_INSERT_ID = (
    "INSERT INTO mutations (node, log, seq, hlc, keyspace, table_id, token, pkey, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, x'') ON CONFLICT (node, log, seq) DO NOTHING"
)


class StreamStore:
    def __init__(self, db: ReplicaDatabase) -> None:
        self._db = db

    def scan_cells(
        self,
        table_id: str,
        left: int,
        right: int,
        after: CellKey | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` cells of the table with tokens in ``(left, right]`` (``left <
        right``) after ``after``, in key order: (token, pkey, ckey, col, value, hlc, writer,
        tombstone)."""
        if after is None:
            where, params = "token > ?", (table_id, left, right)
        else:
            where, params = "(token, pkey, ckey, col) > (?, ?, ?, ?)", (table_id, *after, right)
        return self._db.query(_SCAN_CELLS.format(where=where), (*params, limit))

    def scan_cohort(
        self, cohort_id: int, after: tuple[str, int, bytes] | None, limit: int
    ) -> list[tuple[str, int, bytes]]:
        """Up to ``limit`` of the partitions recorded as ``cohort_id``'s data after ``after``,
        in key order: (table id, token, partition key)."""
        start = after or ("", -(2**63), b"")
        rows = self._db.query(_SCAN_COHORT, (cohort_id, *start, limit))
        return [(str(t), int(token), bytes(pkey)) for t, token, pkey in rows]

    def scan_mutations(
        self,
        keyspace: str,
        table_id: str,
        left: int,
        right: int,
        after: LogKey | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` log entries of the table with tokens in ``(left, right]`` after
        ``after``, in (token, pkey, hlc, id) order: (token, pkey, hlc, node, log, seq, body)."""
        if after is None:
            where, params = "token > ?", (keyspace, left, right, table_id, limit)
        else:
            token, pkey, hlc, node, log, seq = after
            where = "(token, table_id, pkey, hlc, node, log, seq) > (?, ?, ?, ?, ?, ?, ?)"
            params = (keyspace, token, table_id, pkey, hlc, node, log, seq, right, table_id, limit)
        return self._db.query(_SCAN_MUTATIONS.format(where=where), params)

    def stream_progress(self, operation: str) -> dict[tuple[str, int, int], StreamProgress]:
        """Where each stream of ``operation`` stands, by (table id, left, right). The ``done``
        column repeats the cursor's DONE phase, which is what is read."""
        rows = self._db.query(
            "SELECT table_id, range_left, range_right, cursor, cells, mutations, bytes "
            "FROM stream_progress WHERE operation = ?",
            (operation,),
        )
        return {
            (t, left, right): StreamProgress(decode_cursor(cursor), cells, mutations, size)
            for t, left, right, cursor, cells, mutations, size in rows
        }

    def ingest(
        self,
        cells: Sequence[tuple[str, int, bytes, Cell]],
        mutations: Sequence[tuple[Mutation, bytes]],
        operation: str,
        stream: tuple[str, int, int],
        progress: StreamProgress,
        ids: Sequence[tuple[str, StreamedId]] = (),
    ) -> list[bool]:
        """Store one streamed message — cells (table id, token, partition key, cell), whole
        mutations, and ids of log entries whose cells came with them (keyspace, id: stored
        without a body where not held) — and where its stream now stands, in one durable
        transaction. A mutation's cells are stored with its log entry (only when the entry is
        new), so holding an entry always means holding its cells."""
        table_id = stream[0]
        with transaction(self._db.raw) as cursor:
            cursor.executemany(
                _INSERT_ID,
                [
                    (
                        i.mutation_id.node,
                        i.mutation_id.log,
                        i.mutation_id.sequence,
                        i.mutation_id.hlc,
                        keyspace,
                        table_id,
                        i.token,
                        i.partition_key,
                    )
                    for keyspace, i in ids
                ],
            )
            cursor.executemany(
                UPSERT_CELL,
                [
                    (t, token, pkey, c.clustering, c.column, c.value, c.hlc, c.writer, c.tombstone)
                    for t, token, pkey, c in cells
                ],
            )
            fresh = [s is Stored.NEW for s in store_mutations(cursor, mutations)]
            cursor.execute(
                "INSERT OR REPLACE INTO stream_progress (operation, table_id, range_left, "
                "range_right, cursor, done, cells, mutations, bytes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    operation,
                    *stream,
                    encode_cursor(progress.cursor),
                    progress.done,
                    progress.cells,
                    progress.mutations,
                    progress.bytes,
                ),
            )
        return fresh
