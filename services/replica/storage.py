"""Durable state of a replica, in one SQLite database.

Theory of operation
-------------------
SQLAlchemy creates the engine and Alembic the schema (migrations run at start, after a check
that refuses a database of an older storage format: one written before revision 0003 holds
tokens that are not Cassandra's, which nothing can convert, so it must not be upgraded and
misread); the statements run many times a second are hand-written SQL on the driver's
connection underneath, as in the CMS (SQLAlchemy's per-statement machinery costs more than the
statements). Everything runs on the replica's event loop, synchronously: a point write or read
takes tens of microseconds, and a hand-off to a thread and back costs more than that.

Three connections, for three kinds of write:

* data (``write``) is **durable** when the call returns: WAL mode with ``synchronous=FULL``
  fsyncs the WAL at every commit (``--sync normal`` makes it ``NORMAL``: no fsync per commit, a
  power loss may lose the newest). A mutation's cells, its log entry and its index rows are one
  transaction; several mutations that arrive together share one (group commit), each whole.
* identity (the node id, the register entry id, coordinator logs and the reserved sequence
  and HLC ceilings) is **always durable** (``synchronous=FULL`` whatever ``--sync`` says): an id
  issued above a ceiling a power loss forgot would be issued again after the restart, and a
  replica that already holds the first mutation with that id would drop the second.
* the applied metadata log is **lazy** (``synchronous=OFF``): it is a copy of what the CMS holds
  durably, so losing its tail only means fetching it again after a restart.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochal.mtrack import MutationId
from epochal.replica.model import Cell, Mutation
from epochal.replica.stream_encoding import decode_cursor, encode_cursor
from epochal.replica.stream_values import StreamProgress
from epochal.runtime.database import migrate, sqlite_engine, transaction
from epochal.runtime.follower import MetadataEntry, StoredMetadata
from epochal.tcm.keys import KeyBounds

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Revisions of storage format 1, whose tokens hash the order-preserving key encoding instead of
# Cassandra's serialization of the key (see migrations/versions/0003_cassandra_tokens.py).
FORMAT_1_REVISIONS = frozenset({"0001", "0002"})


class StorageFormatError(Exception):
    """The database was written in a storage format this replica does not read."""


@dataclass(frozen=True, slots=True)
class NodeStateRow:
    node_id: str
    register_entry_id: str
    hlc_ceiling: int


@dataclass(frozen=True, slots=True)
class LogRow:
    log: int
    keyspace: str
    keyspace_epoch: int
    range_left: int
    range_right: int
    opened_epoch: int
    sealed: bool
    sequence_ceiling: int


@dataclass(frozen=True, slots=True)
class CellRepair:
    """Cells an untracked read repair writes, each with its own timestamp and writer."""

    table_id: str
    token: int
    partition_key: bytes
    cells: tuple[Cell, ...]


_UPSERT_CELL = (
    "INSERT INTO cells (table_id, token, pkey, ckey, col, value, hlc, writer, tombstone) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (table_id, token, pkey, ckey, col) DO UPDATE SET value = excluded.value, "
    "hlc = excluded.hlc, writer = excluded.writer, tombstone = excluded.tombstone "
    "WHERE (excluded.hlc, excluded.writer, excluded.tombstone) > "
    "(cells.hlc, cells.writer, cells.tombstone)"
)
_INSERT_MUTATION = (
    "INSERT INTO mutations (node, log, seq, hlc, keyspace, table_id, token, pkey, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (node, log, seq) DO NOTHING"
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

_SCAN_CELLS = (
    "SELECT token, pkey, ckey, col, value, hlc, writer, tombstone FROM cells "
    "WHERE table_id = ? AND {where} AND token <= ? ORDER BY token, pkey, ckey, col LIMIT ?"
)
_SCAN_MUTATIONS = (
    "SELECT token, pkey, hlc, node, log, seq, body FROM mutations "
    "WHERE keyspace = ? AND {where} AND token <= ? AND table_id = ? "
    "ORDER BY token, table_id, pkey, hlc, node, log, seq LIMIT ?"
)
CellKey = tuple[int, bytes, bytes, str]  # (token, pkey, ckey, col)
LogKey = tuple[int, bytes, int, int, int, int]  # (token, pkey, hlc, node, log, seq)


@dataclass(frozen=True, slots=True)
class OwnedRanges:
    keyspace: str
    table_ids: tuple[str, ...]
    ranges: tuple[tuple[int, int], ...]  # non-wrapping (left, right]


class ReplicaStorage:
    def __init__(self, url: str, *, sync: str = "full", echo: bool = False) -> None:
        if not url.startswith("sqlite"):
            raise ValueError(f"a replica stores its data in SQLite; {url!r} is not a SQLite URL")
        self.url = url
        self.engine = sqlite_engine(
            url, synchronous="FULL" if sync == "full" else "NORMAL", echo=echo
        )
        try:
            migrate(self.engine, MIGRATIONS, check_revision=self._refuse_old_format)
        except StorageFormatError:
            self.engine.dispose()
            raise
        self._conn = self.engine.connect()
        self._lazy_conn = self.engine.connect()
        self._lazy_conn.exec_driver_sql("PRAGMA synchronous=OFF")
        self._lazy_conn.commit()
        self._durable_conn = self.engine.connect()
        self._durable_conn.exec_driver_sql("PRAGMA synchronous=FULL")
        self._durable_conn.commit()
        self._raw: Any = self._conn.connection.dbapi_connection
        self._lazy_raw: Any = self._lazy_conn.connection.dbapi_connection
        self._durable_raw: Any = self._durable_conn.connection.dbapi_connection

    def _refuse_old_format(self, revision: str | None) -> None:
        """Before migrating: Alembic would upgrade a format-1 database and its tokens would then
        be misread. A new database has no revision and is created at the newest format."""
        if revision in FORMAT_1_REVISIONS:
            raise StorageFormatError(
                f"{self.url.removeprefix('sqlite:///')} was written by an older replica "
                f"(storage revision {revision}), whose partition-key tokens are not Cassandra's; "
                "there is no conversion. Start the replica with an empty --data-dir (move this "
                "one away or delete it) and write its data again."
            )

    def close(self) -> None:
        self._durable_conn.close()
        self._lazy_conn.close()
        self._conn.close()
        self.engine.dispose()

    # ------------------------------------------------------------------ identity

    def node_state(self) -> NodeStateRow:
        row = self._query_one("SELECT node_id, register_entry_id, hlc_ceiling FROM node_state")
        return NodeStateRow(*row)

    def set_register_entry_id(self, entry_id: str) -> None:
        self._execute("UPDATE node_state SET register_entry_id = ?", (entry_id,))

    def set_node_id(self, node_id: str) -> None:
        self._execute("UPDATE node_state SET node_id = ?", (node_id,))

    def set_hlc_ceiling(self, ceiling: int) -> None:
        self._execute("UPDATE node_state SET hlc_ceiling = ?", (ceiling,))

    # ------------------------------------------------------------------ coordinator logs

    def coordinator_logs(self) -> list[LogRow]:
        rows = self._query(
            "SELECT log, keyspace, keyspace_epoch, range_left, range_right, opened_epoch, "
            "sealed, sequence_ceiling FROM coordinator_logs ORDER BY log"
        )
        return [LogRow(*row[:6], bool(row[6]), row[7]) for row in rows]

    def open_log(self, row: LogRow, seal: Sequence[int]) -> None:
        """Durably record a new log (and seal the logs it replaces) before its first id."""
        with transaction(self._durable_raw) as cursor:
            cursor.executemany(
                "UPDATE coordinator_logs SET sealed = 1 WHERE log = ?", [(s,) for s in seal]
            )
            cursor.execute(
                "INSERT INTO coordinator_logs (log, keyspace, keyspace_epoch, range_left, "
                "range_right, opened_epoch, sealed, sequence_ceiling) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.log,
                    row.keyspace,
                    row.keyspace_epoch,
                    row.range_left,
                    row.range_right,
                    row.opened_epoch,
                    row.sealed,
                    row.sequence_ceiling,
                ),
            )

    def set_sequence_ceiling(self, log: int, ceiling: int) -> None:
        self._execute(
            "UPDATE coordinator_logs SET sequence_ceiling = ? WHERE log = ?", (ceiling, log)
        )

    # ------------------------------------------------------------------ applied metadata

    def stored_metadata(self) -> StoredMetadata:
        snapshot = self._query_one(
            "SELECT epoch, metadata FROM metadata_snapshots ORDER BY epoch DESC LIMIT 1"
        )
        since = snapshot[0] if snapshot else 0
        entries = self.metadata_entries(since, None)
        if snapshot is None:
            return StoredMetadata(0, None, entries)
        return StoredMetadata(snapshot[0], snapshot[1], entries)

    def metadata_entries(self, since: int, limit: int | None) -> list[MetadataEntry]:
        sql = "SELECT epoch, entry_id, transformation FROM metadata_log WHERE epoch > ? "
        sql += "ORDER BY epoch" + ("" if limit is None else f" LIMIT {int(limit)}")
        return [MetadataEntry(*row) for row in self._query(sql, (since,))]

    def oldest_metadata_epoch(self) -> int:
        row = self._query_one("SELECT MIN(epoch) FROM metadata_log")
        return int(row[0] or 0) if row else 0

    def save_metadata(
        self,
        entries: Sequence[MetadataEntry],
        *,
        snapshot: tuple[int, bytes] | None = None,
        forget_below: int | None = None,
    ) -> None:
        """Lazily: applied entries, a snapshot of the metadata, and what may be forgotten."""
        with transaction(self._lazy_raw) as cursor:
            cursor.executemany(
                "INSERT INTO metadata_log (epoch, entry_id, transformation) VALUES (?, ?, ?) "
                "ON CONFLICT (epoch) DO NOTHING",
                [(e.epoch, e.entry_id, e.transformation) for e in entries],
            )
            if snapshot is not None:
                cursor.execute(
                    "INSERT INTO metadata_snapshots (epoch, metadata) VALUES (?, ?) "
                    "ON CONFLICT (epoch) DO NOTHING",
                    snapshot,
                )
                cursor.execute("DELETE FROM metadata_snapshots WHERE epoch < ?", (snapshot[0],))
            if forget_below is not None:
                cursor.execute("DELETE FROM metadata_log WHERE epoch < ?", (forget_below,))

    # ------------------------------------------------------------------ data

    def write(
        self, mutations: Sequence[tuple[Mutation, bytes]], repairs: Sequence[CellRepair] = ()
    ) -> list[Stored]:
        """One durable transaction: each mutation's cells, and for tracked ones its log entry
        (keyed by id, so a mutation received twice is stored once, and one with an id held
        here with other content is not stored). Returns, per mutation, what storing it did."""
        with transaction(self._raw) as cursor:
            fresh = _store_mutations(cursor, mutations)
            for repair in repairs:
                cursor.executemany(
                    _UPSERT_CELL,
                    _cell_rows(repair.table_id, repair.token, repair.partition_key, repair.cells),
                )
        return fresh

    # ------------------------------------------------------------------ streaming

    def scan_cells(
        self, table_id: str, left: int, right: int, after: CellKey | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` cells of the table with tokens in ``(left, right]`` (``left <
        right``) after ``after``, in key order: (token, pkey, ckey, col, value, hlc, writer,
        tombstone)."""
        if after is None:
            where, params = "token > ?", (table_id, left, right, limit)
        else:
            where, params = (
                "(token, pkey, ckey, col) > (?, ?, ?, ?)",
                (
                    table_id,
                    *after,
                    right,
                    limit,
                ),
            )
        return self._query(_SCAN_CELLS.format(where=where), params)

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
        return self._query(_SCAN_MUTATIONS.format(where=where), params)

    def stream_progress(self, operation: str) -> dict[tuple[str, int, int], StreamProgress]:
        """Where each stream of ``operation`` stands, by (table id, left, right). The ``done``
        column repeats the cursor's DONE phase, which is what is read."""
        rows = self._query(
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
    ) -> list[bool]:
        """Store one streamed message — cells (table id, token, partition key, cell) and whole
        mutations — and where its stream now stands, in one durable transaction. A mutation's
        cells are stored with its log entry (only when the entry is new), so holding an entry
        always means holding its cells."""
        with transaction(self._raw) as cursor:
            cursor.executemany(
                _UPSERT_CELL,
                [
                    (t, token, pkey, c.clustering, c.column, c.value, c.hlc, c.writer, c.tombstone)
                    for t, token, pkey, c in cells
                ],
            )
            fresh = [s is Stored.NEW for s in _store_mutations(cursor, mutations)]
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
            for ckey, col, value, hlc, writer, tombstone in self._query(sql, params)
        ]

    def partition_ids(
        self, keyspace: str, table_id: str, token: int, pkey: bytes, low_bound: int = 0
    ) -> list[MutationId]:
        rows = self._query(_PARTITION_IDS, (keyspace, token, table_id, pkey, low_bound))
        return _ids(rows)

    def range_ids(
        self, keyspace: str, left: int, right: int, low_bound: int = 0
    ) -> list[MutationId]:
        """Ids of the keyspace's mutations with tokens in ``(left, right]`` (wrapping when
        ``left >= right``)."""
        base = "SELECT node, log, seq, hlc FROM mutations WHERE keyspace = ? AND hlc >= ? AND "
        if left < right:
            rows = self._query(
                base + "token > ? AND token <= ?", (keyspace, low_bound, left, right)
            )
        else:
            rows = self._query(
                base + "(token > ? OR token <= ?)", (keyspace, low_bound, left, right)
            )
        return _ids(rows)

    def mutation_bodies(self, ids: Sequence[MutationId]) -> list[bytes]:
        """The stored bodies of those of ``ids`` held here."""
        bodies = []
        for mid in ids:
            row = self._query_one(
                "SELECT body FROM mutations WHERE node = ? AND log = ? AND seq = ?",
                (mid.node, mid.log, mid.sequence),
            )
            if row is not None:
                bodies.append(row[0])
        return bodies

    def cleanup(self, owned: Sequence[OwnedRanges]) -> int:
        """Delete every cell and log entry of these keyspaces' tables outside their owned
        ranges, in one durable transaction; returns how many rows went."""
        removed = 0
        with transaction(self._raw) as cursor:
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

    # ------------------------------------------------------------------ helpers

    def _execute(self, sql: str, params: tuple[Any, ...]) -> None:
        """An identity write: durable whatever ``--sync`` says."""
        with transaction(self._durable_raw) as cursor:
            cursor.execute(sql, params)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self._raw.cursor()
        try:
            return cursor.execute(sql, params).fetchall()
        finally:
            cursor.close()

    def _query_one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        rows = self._query(sql, params)
        return rows[0] if rows else None


class Stored(enum.Enum):
    """What storing a mutation did."""

    NEW = "new"  # stored
    HELD = "held"  # this id was already stored here, with the same content: nothing to do
    CONFLICT = "conflict"  # this id is stored here with other content: refused, nothing stored


def _store_mutations(cursor: Any, mutations: Sequence[tuple[Mutation, bytes]]) -> list[Stored]:
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
            _UPSERT_CELL,
            _cell_rows(mutation.table_id, mutation.token, mutation.partition_key, mutation.cells()),
        )
    return outcomes


def _ids(rows: list[tuple[Any, ...]]) -> list[MutationId]:
    return [MutationId(node=n, log=g, sequence=s, hlc=h) for n, g, s, h in rows]


def _cell_rows(
    table_id: str, token: int, pkey: bytes, cells: Sequence[Cell]
) -> list[tuple[Any, ...]]:
    return [
        (table_id, token, pkey, c.clustering, c.column, c.value, c.hlc, c.writer, c.tombstone)
        for c in cells
    ]
