"""The database under a service: SQLAlchemy engines, Alembic migrations, and one transaction on
a driver's connection.

Both services keep their state through SQLAlchemy (Core, not the ORM) and create their schema
with Alembic at start; the statements they run many times a second are hand-written SQL on the
driver's connection beneath SQLAlchemy (``transaction``), whose per-statement machinery costs
more than those statements do.

SQLite runs in WAL mode with a busy timeout; ``synchronous`` is the durability of a commit on
connections that do not set their own (``FULL``: the WAL is fsynced at every commit). A
PostgreSQL engine may be given a schema of its own, created if missing and put first on every
connection's ``search_path``, so several services can share one database.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command, context
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Engine, MetaData, create_engine, event, text

SQLITE_BUSY_TIMEOUT_S = 30
SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
SYNCHRONOUS = frozenset({"OFF", "NORMAL", "FULL"})


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlite_engine(
    url: str, *, synchronous: str = "FULL", echo: bool = False, any_thread: bool = False
) -> Engine:
    """An engine on a SQLite file (its folder created when missing). ``any_thread`` lets a
    connection be used from a thread other than the one that opened it (never two at once)."""
    if synchronous not in SYNCHRONOUS:
        raise ValueError(f"SQLite synchronous must be one of {sorted(SYNCHRONOUS)}")
    path = url.removeprefix("sqlite:///")
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
    if any_thread:
        connect_args["check_same_thread"] = False
    engine = create_engine(url, echo=echo, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.close()

    return engine


def postgres_engine(url: str, *, schema: str | None = None, echo: bool = False) -> Engine:
    """An engine on PostgreSQL; with ``schema``, every connection works in that schema (created
    when missing)."""
    if schema is not None and not SCHEMA_NAME.match(schema):
        raise ValueError(
            f"bad PostgreSQL schema name {schema!r}: use lower-case letters, digits, _"
        )
    engine = create_engine(url, echo=echo, pool_pre_ping=True)
    if schema is None:
        return engine

    # Registered before the first connection exists, so every pooled connection has it.
    @event.listens_for(engine, "connect")
    def _search_path(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f'SET search_path TO "{schema}"')
        cursor.close()
        dbapi_connection.commit()

    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    return engine


def migrate(
    engine: Engine,
    migrations: Path,
    *,
    check_revision: Callable[[str | None], None] | None = None,
) -> None:
    """Upgrade the schema to the newest revision of the Alembic scripts in ``migrations``, in one
    transaction. ``check_revision`` sees the current revision first (None: a new database) and
    may refuse it by raising, before anything is changed."""
    config = Config()
    config.set_main_option("script_location", str(migrations))
    with engine.begin() as connection:
        if check_revision is not None:
            check_revision(MigrationContext.configure(connection).get_current_revision())
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def run_migrations(metadata: MetaData) -> None:
    """The body of a service's Alembic ``env.py``: migrate on the connection ``migrate`` hands
    over."""
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()


@contextmanager
def transaction(connection: Any) -> Iterator[Any]:
    """One transaction on a DB-API connection (SQLite's sqlite3 and PostgreSQL's psycopg both
    begin one implicitly at the first write): commit what the block executed on the yielded
    cursor, or roll it back if it raised."""
    cursor = connection.cursor()
    try:
        yield cursor
        connection.commit()
    except BaseException:
        connection.rollback()
        raise
    finally:
        cursor.close()
