"""The replica's one SQLite database: the engine, the schema (Alembic, after refusing an older
storage format), and three connections for three kinds of write; the repositories over it
(``identity_store``, ``metadata_store``, ``data_store``, ``stream_store``) hold the SQL.
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
"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epochal.runtime.database import migrate, sqlite_engine, transaction

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Revisions of storage format 1, whose tokens hash the order-preserving key encoding instead of
# Cassandra's serialization of the key (see migrations/versions/0003_cassandra_tokens.py).
FORMAT_1_REVISIONS = frozenset({"0001", "0002"})


class StorageFormatError(Exception):
    """The database was written in a storage format this replica does not read."""


class ReplicaDatabase:
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
        self.raw: Any = self._conn.connection.dbapi_connection
        self.lazy_raw: Any = self._lazy_conn.connection.dbapi_connection
        self.durable_raw: Any = self._durable_conn.connection.dbapi_connection

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

    def size_bytes(self) -> int:
        """The bytes of the database's pages in use (its pages less the free ones): the
        replica's load, as ``nodetool status`` shows it. Two pragmas: no scan."""
        cursor = self.raw.cursor()
        try:
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            free = cursor.execute("PRAGMA freelist_count").fetchone()[0]
            page_size = cursor.execute("PRAGMA page_size").fetchone()[0]
        finally:
            cursor.close()
        return max(int(pages) - int(free), 0) * int(page_size)

    def close(self) -> None:
        self._durable_conn.close()
        self._lazy_conn.close()
        self._conn.close()
        self.engine.dispose()

    def execute_durable(self, sql: str, params: tuple[Any, ...]) -> None:
        """An identity write: durable whatever ``--sync`` says."""
        with transaction(self.durable_raw) as cursor:
            cursor.execute(sql, params)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self.raw.cursor()
        try:
            return cursor.execute(sql, params).fetchall()
        finally:
            cursor.close()

    def query_one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None
