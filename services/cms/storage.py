"""Durable state of a CMS member: acceptor state, the metadata log, entry ids, snapshots.

Theory of operation
-------------------
Two threads use this object, each on connections of its own, so no connection is ever shared:
the member loop makes every write (``save_acceptor``, ``save_applied``, ``install``,
``insert_entries``), and one reader thread makes every read (``load``, ``entries_since``,
``latest_snapshot``, ...). A write is committed when its call returns, so a read started after
it sees it. SQLAlchemy gives the engines, migrations and reads (Core, not the ORM); the writes
are a few hand-written statements (``_HotSQL``) run on the driver's connection beneath, since
they run many times a second and SQLAlchemy's per-statement machinery costs more than they do.

Two kinds of writes, as DESIGN.md "Commit point" allows:

* ``save_acceptor`` is **durable** when it returns: a promise or an accepted slot is a vote, and
  a vote must survive a crash. SQLite: WAL mode with ``synchronous=FULL`` fsyncs the WAL at every
  commit. PostgreSQL: an ordinary commit (``synchronous_commit`` on).
* ``save_applied`` (the log, entry ids, snapshots, the applied slot) is **lazy**: it is derived
  from chosen slots that a quorum already holds durably, so a crash that loses it only means the
  member re-learns those slots. It is still one atomic transaction, on a second connection whose
  commits do not wait for the disk: SQLite ``synchronous=OFF`` (the WAL is one append-only file,
  so the next FULL commit's fsync covers these frames too; a crash can lose the tail, never
  corrupt it), PostgreSQL ``synchronous_commit = off`` (its WAL is flushed in order, so a later
  synchronous commit flushes it as well).

PostgreSQL members may share a database: each uses its own schema (tables and Alembic's version
table live there; ``search_path`` is set on every connection).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from epochal.cms import tables as t
from epochal.cmscore.rows import (
    AcceptedRow,
    EntryIdRow,
    LogEntryRow,
    SnapshotRow,
    StoredState,
)
from epochal.runtime.database import (
    is_sqlite,
    migrate,
    postgres_engine,
    sqlite_engine,
    transaction,
)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class CMSStorage:
    def __init__(self, url: str, *, schema: str | None = None, echo: bool = False) -> None:
        self.url = url
        self.is_sqlite = is_sqlite(url)
        self.schema = None if self.is_sqlite else schema
        self.engine = self._create_engine(echo)
        migrate(self.engine, MIGRATIONS)
        self._conn: Connection = self.engine.connect()
        # A second connection whose commits need not be durable yet (see the module docstring).
        self._lazy_conn: Connection = self.engine.connect()
        if self.is_sqlite:
            self._lazy_conn.exec_driver_sql("PRAGMA synchronous=OFF")
        else:
            self._lazy_conn.exec_driver_sql("SET synchronous_commit = off")
        self._lazy_conn.commit()
        self._read_conn: Connection = self.engine.connect()  # the reader thread's
        # The drivers' own connections under the two writers, for the writes made many times a
        # second; SQLAlchemy never has a transaction open on them between calls.
        self._raw = self._conn.connection.dbapi_connection
        self._lazy_raw = self._lazy_conn.connection.dbapi_connection
        self._sql = _HotSQL("?" if self.engine.dialect.paramstyle == "qmark" else "%s")

    # ------------------------------------------------------------------ setup

    def _create_engine(self, echo: bool) -> Engine:
        if self.is_sqlite:
            # The member loop and the reader thread each open connections of their own.
            return sqlite_engine(self.url, synchronous="FULL", echo=echo, any_thread=True)
        return postgres_engine(self.url, schema=self.schema, echo=echo)

    def close(self) -> None:
        self._read_conn.close()
        self._lazy_conn.close()
        self._conn.close()
        self.engine.dispose()

    # ------------------------------------------------------------------ writes

    def save_acceptor(
        self, promised: tuple[int, str] | None, accepted: Sequence[AcceptedRow]
    ) -> None:
        """Durable when it returns. The one write on the commit path: hand-written SQL on the
        driver's connection (SQLAlchemy's per-statement machinery costs more than the write)."""
        with transaction(self._raw) as cursor:
            if promised is not None:
                cursor.execute(self._sql.update_promise, (promised[0], promised[1]))
            if accepted:
                cursor.executemany(
                    self._sql.upsert_accepted,
                    [(r.slot, r.ballot_round, r.ballot_node, r.value) for r in accepted],
                )

    def save_applied(
        self,
        *,
        applied_slot: int,
        entries: Sequence[LogEntryRow],
        entry_ids: Sequence[EntryIdRow],
        forget_entry_ids_below_epoch: int | None = None,
        snapshots: Sequence[SnapshotRow] = (),
        forget_accepted_up_to: int | None = None,
    ) -> None:
        """Atomic but lazy: a crash may lose it, never half of it."""
        sql = self._sql
        with transaction(self._lazy_raw) as cursor:
            self._write_entries(cursor, entries)
            self._write_entry_ids(cursor, entry_ids)
            if forget_entry_ids_below_epoch is not None:
                cursor.execute(sql.forget_entry_ids, (forget_entry_ids_below_epoch,))
            self._write_snapshots(cursor, snapshots)
            if forget_accepted_up_to is not None:
                cursor.execute(sql.forget_accepted, (forget_accepted_up_to,))
            cursor.execute(sql.set_applied_slot, (applied_slot,))

    def install(
        self,
        *,
        snapshot: SnapshotRow | None,
        entries: Sequence[LogEntryRow],
        entry_ids: Sequence[EntryIdRow],
        applied_slot: int,
    ) -> None:
        """Durably replace the applied state with one copied from a peer (state transfer)."""
        sql = self._sql
        with transaction(self._raw) as cursor:
            if snapshot is not None:
                # Entries held already stay: they are a prefix of the same log. The gap
                # between them and the snapshot is filled later (insert_entries).
                cursor.execute(sql.forget_snapshots_from, (snapshot.epoch,))
                self._write_snapshots(cursor, [snapshot])
            if entries:
                cursor.execute(sql.forget_entries_from, (entries[0].epoch,))
                self._write_entries(cursor, entries)
            cursor.execute(sql.forget_all_entry_ids)
            self._write_entry_ids(cursor, entry_ids)
            cursor.execute(sql.forget_accepted, (applied_slot,))
            cursor.execute(sql.set_applied_slot, (applied_slot,))

    def insert_entries(self, entries: Sequence[LogEntryRow]) -> None:
        """Fill a gap in the log with entries copied from a peer (already known ones are kept)."""
        with transaction(self._lazy_raw) as cursor:
            self._write_entries(cursor, entries)

    def _write_entries(self, cursor: Any, entries: Sequence[LogEntryRow]) -> None:
        if entries:
            cursor.executemany(
                self._sql.insert_entry,
                [(e.epoch, e.slot, e.entry_id, e.kind, e.transformation) for e in entries],
            )

    def _write_entry_ids(self, cursor: Any, entry_ids: Sequence[EntryIdRow]) -> None:
        if entry_ids:
            cursor.executemany(
                self._sql.insert_entry_id, [(i.entry_id, i.epoch, i.digest) for i in entry_ids]
            )

    def _write_snapshots(self, cursor: Any, snapshots: Sequence[SnapshotRow]) -> None:
        if snapshots:
            cursor.executemany(
                self._sql.insert_snapshot, [(x.epoch, x.slot, x.metadata) for x in snapshots]
            )

    # ------------------------------------------------------------------ reads

    def contiguous_prefix(self) -> int:
        """The largest k such that this log holds every epoch 1..k."""
        log = t.log_entries
        with self._read_conn.begin():
            first = self._read_conn.execute(select(func.min(log.c.epoch))).scalar()
            if first != 1:
                return 0
            following = log.alias("following")
            end = self._read_conn.execute(
                select(func.min(log.c.epoch)).where(
                    ~select(following.c.epoch).where(following.c.epoch == log.c.epoch + 1).exists()
                )
            ).scalar()
        return int(end or 0)

    def load(self) -> StoredState:
        conn = self._read_conn
        with conn.begin():
            promise = conn.execute(select(t.promise.c.ballot_round, t.promise.c.ballot_node)).one()
            accepted = tuple(
                AcceptedRow(*row)
                for row in conn.execute(
                    select(
                        t.accepted_slots.c.slot,
                        t.accepted_slots.c.ballot_round,
                        t.accepted_slots.c.ballot_node,
                        t.accepted_slots.c.value,
                    ).order_by(t.accepted_slots.c.slot)
                )
            )
            applied_slot = conn.execute(
                select(t.member_state.c.value).where(t.member_state.c.key == "applied_slot")
            ).scalar_one()
            snapshot = self._latest_snapshot(conn)
            since = snapshot.epoch if snapshot is not None else 0
            entries = tuple(self._entries_since(conn, since, None))
            ids = tuple(
                EntryIdRow(*row)
                for row in conn.execute(
                    select(
                        t.entry_ids.c.entry_id, t.entry_ids.c.epoch, t.entry_ids.c.digest
                    ).order_by(t.entry_ids.c.epoch)
                )
            )
        promised = (
            None
            if promise.ballot_round == 0 and promise.ballot_node == ""
            else (promise.ballot_round, promise.ballot_node)
        )
        return StoredState(promised, accepted, applied_slot, snapshot, entries, ids)

    def entries_since(self, epoch: int, limit: int) -> list[LogEntryRow]:
        with self._read_conn.begin():
            return self._entries_since(self._read_conn, epoch, limit)

    def latest_snapshot(self) -> SnapshotRow | None:
        with self._read_conn.begin():
            return self._latest_snapshot(self._read_conn)

    def snapshot_epochs(self) -> list[int]:
        with self._read_conn.begin():
            return list(
                self._read_conn.execute(
                    select(t.snapshots.c.epoch).order_by(t.snapshots.c.epoch)
                ).scalars()
            )

    def latest_epoch(self) -> int:
        with self._read_conn.begin():
            latest = self._read_conn.execute(select(func.max(t.log_entries.c.epoch))).scalar()
            snapshot = self._read_conn.execute(select(func.max(t.snapshots.c.epoch))).scalar()
        return max(latest or 0, snapshot or 0)

    @staticmethod
    def _entries_since(conn: Connection, epoch: int, limit: int | None) -> list[LogEntryRow]:
        query = (
            select(
                t.log_entries.c.epoch,
                t.log_entries.c.slot,
                t.log_entries.c.entry_id,
                t.log_entries.c.kind,
                t.log_entries.c.transformation,
            )
            .where(t.log_entries.c.epoch > epoch)
            .order_by(t.log_entries.c.epoch)
        )
        if limit is not None:
            query = query.limit(limit)
        return [LogEntryRow(*row) for row in conn.execute(query)]

    @staticmethod
    def _latest_snapshot(conn: Connection) -> SnapshotRow | None:
        row = conn.execute(
            select(t.snapshots.c.epoch, t.snapshots.c.slot, t.snapshots.c.metadata)
            .order_by(t.snapshots.c.epoch.desc())
            .limit(1)
        ).first()
        return SnapshotRow(*row) if row is not None else None


class _HotSQL:
    """Every write statement, in the SQL both SQLite and PostgreSQL accept."""

    def __init__(self, mark: str) -> None:
        def params(count: int) -> str:
            return ", ".join([mark] * count)

        self.update_promise = (
            f"UPDATE paxos_promise SET ballot_round = {mark}, ballot_node = {mark} WHERE id = 1"
        )
        self.upsert_accepted = (
            f"INSERT INTO paxos_accepted (slot, ballot_round, ballot_node, value) "
            f"VALUES ({params(4)}) ON CONFLICT (slot) DO UPDATE SET "
            "ballot_round = excluded.ballot_round, ballot_node = excluded.ballot_node, "
            "value = excluded.value"
        )
        # A backfill may have written an entry first: the log is immutable, so keep it.
        self.insert_entry = (
            "INSERT INTO metadata_log (epoch, slot, entry_id, kind, transformation) "
            f"VALUES ({params(5)}) ON CONFLICT (epoch) DO NOTHING"
        )
        self.insert_entry_id = (
            f"INSERT INTO entry_ids (entry_id, epoch, digest) VALUES ({params(3)}) "
            "ON CONFLICT (entry_id) DO NOTHING"
        )
        self.forget_entry_ids = f"DELETE FROM entry_ids WHERE epoch < {mark}"
        self.insert_snapshot = (
            f"INSERT INTO metadata_snapshots (epoch, slot, metadata) VALUES ({params(3)}) "
            "ON CONFLICT (epoch) DO NOTHING"
        )
        self.forget_accepted = f"DELETE FROM paxos_accepted WHERE slot <= {mark}"
        self.forget_snapshots_from = f"DELETE FROM metadata_snapshots WHERE epoch >= {mark}"
        self.forget_entries_from = f"DELETE FROM metadata_log WHERE epoch >= {mark}"
        self.forget_all_entry_ids = "DELETE FROM entry_ids"
        self.set_applied_slot = f"UPDATE member_state SET value = {mark} WHERE key = 'applied_slot'"
