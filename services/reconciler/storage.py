"""The reconciler's SQLite database: its identity, the metadata log it follows (lazily, as a
replica keeps it: the CMS holds it durably), where each range it worked stands, and a record of
its rounds (which range, under which lease token, from when to when) — what a restart continues
from, and what shows that two reconcilers never worked one range at once.

The schema is created by Alembic at start (``migrations/``); the statements are hand-written SQL
on the driver's connection (``epochal.runtime.database``). A round's record is written durably
when it ends; everything else here can be rebuilt (the metadata from the CMS, the marks from the
replicas)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochal.runtime.database import migrate, sqlite_engine, transaction
from epochal.runtime.follower import MetadataEntry, StoredMetadata
from epochal.tcm.tokens import TokenRange

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
ROUNDS_KEPT = 20_000


@dataclass(frozen=True, slots=True)
class RangeRecord:
    keyspace: str
    range: TokenRange
    lease_token: int
    low_bound: int
    rounds: int
    delivered: int
    last_outcome: str
    last_round_unix_ms: int


@dataclass(frozen=True, slots=True)
class RoundRecord:
    keyspace: str
    range: TokenRange
    lease_token: int
    started_unix_ms: int
    ended_unix_ms: int
    acted_unix_ms: int  # when the replicas last accepted a call of the round (0: never)
    reconciliation_time: int
    delivered: int
    outcome: str


class ReconcilerStorage:
    def __init__(self, url: str) -> None:
        if not url.startswith("sqlite"):
            raise ValueError(f"a reconciler keeps its state in SQLite; {url!r} is not SQLite")
        self.engine = sqlite_engine(url, synchronous="FULL")
        migrate(self.engine, MIGRATIONS)
        self._conn = self.engine.connect()
        self._lazy_conn = self.engine.connect()
        self._lazy_conn.exec_driver_sql("PRAGMA synchronous=OFF")
        self._lazy_conn.commit()
        self.raw: Any = self._conn.connection.dbapi_connection
        self.lazy_raw: Any = self._lazy_conn.connection.dbapi_connection

    def close(self) -> None:
        self._lazy_conn.close()
        self._conn.close()
        self.engine.dispose()

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self.raw.cursor()
        try:
            return cursor.execute(sql, params).fetchall()
        finally:
            cursor.close()

    # ------------------------------------------------------------------ identity

    def reconciler_id(self, wanted: str) -> str:
        """This reconciler's id: the one stored, else ``wanted`` (a new one when empty), stored.
        A different ``wanted`` than the one stored is refused (ValueError): the lease grants in
        the metadata log name the stored one."""
        rows = self._query("SELECT reconciler_id FROM identity WHERE id = 1")
        if rows:
            stored = str(rows[0][0])
            if wanted and wanted != stored:
                raise ValueError(
                    f"this data directory belongs to reconciler {stored!r}, not {wanted!r}: "
                    "start with that --id or another --data-dir"
                )
            return stored
        chosen = wanted or f"reconciler-{secrets.token_hex(4)}"
        with transaction(self.raw) as cursor:
            cursor.execute("INSERT INTO identity (id, reconciler_id) VALUES (1, ?)", (chosen,))
        return chosen

    # ------------------------------------------------------------------ the metadata log

    def stored_metadata(self) -> StoredMetadata:
        snapshot = self._query(
            "SELECT epoch, metadata FROM metadata_snapshots ORDER BY epoch DESC LIMIT 1"
        )
        since = snapshot[0][0] if snapshot else 0
        entries = [
            MetadataEntry(*row)
            for row in self._query(
                "SELECT epoch, entry_id, transformation FROM metadata_log WHERE epoch > ? "
                "ORDER BY epoch",
                (since,),
            )
        ]
        if not snapshot:
            return StoredMetadata(0, None, entries)
        return StoredMetadata(snapshot[0][0], snapshot[0][1], entries)

    def save_metadata(
        self,
        entries: Sequence[MetadataEntry],
        *,
        snapshot: tuple[int, bytes] | None,
        forget_below: int | None,
    ) -> None:
        with transaction(self.lazy_raw) as cursor:
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

    # ------------------------------------------------------------------ ranges and rounds

    def ranges(self) -> list[RangeRecord]:
        return [
            RangeRecord(ks, TokenRange(left, right), *rest)
            for ks, left, right, *rest in self._query(
                "SELECT keyspace, range_left, range_right, lease_token, low_bound, rounds, "
                "delivered, last_outcome, last_round_unix_ms FROM ranges"
            )
        ]

    def record_round(self, done: RoundRecord, where: RangeRecord) -> None:
        """A round that ended, and where its range stands, in one durable transaction."""
        with transaction(self.raw) as cursor:
            cursor.execute(
                "INSERT INTO rounds (keyspace, range_left, range_right, lease_token, "
                "started_unix_ms, ended_unix_ms, acted_unix_ms, reconciliation_time, delivered, "
                "outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    done.keyspace,
                    done.range.left,
                    done.range.right,
                    done.lease_token,
                    done.started_unix_ms,
                    done.ended_unix_ms,
                    done.acted_unix_ms,
                    done.reconciliation_time,
                    done.delivered,
                    done.outcome,
                ),
            )
            cursor.execute(
                "INSERT INTO ranges (keyspace, range_left, range_right, lease_token, low_bound, "
                "rounds, delivered, last_outcome, last_round_unix_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (keyspace, range_left, range_right) DO UPDATE SET "
                "lease_token = excluded.lease_token, low_bound = excluded.low_bound, "
                "rounds = excluded.rounds, delivered = excluded.delivered, "
                "last_outcome = excluded.last_outcome, "
                "last_round_unix_ms = excluded.last_round_unix_ms",
                (
                    where.keyspace,
                    where.range.left,
                    where.range.right,
                    where.lease_token,
                    where.low_bound,
                    where.rounds,
                    where.delivered,
                    where.last_outcome,
                    where.last_round_unix_ms,
                ),
            )
            cursor.execute(
                "DELETE FROM rounds WHERE round <= (SELECT MAX(round) FROM rounds) - ?",
                (ROUNDS_KEPT,),
            )

    def rounds(self) -> list[RoundRecord]:
        return [
            RoundRecord(ks, TokenRange(left, right), *rest)
            for ks, left, right, *rest in self._query(
                "SELECT keyspace, range_left, range_right, lease_token, started_unix_ms, "
                "ended_unix_ms, acted_unix_ms, reconciliation_time, delivered, outcome "
                "FROM rounds ORDER BY round"
            )
        ]
