"""One transaction on a DB-API connection, for the statements services run many times a second
on the driver's connection beneath SQLAlchemy (SQLite's sqlite3 and PostgreSQL's psycopg both
begin a transaction implicitly at the first write)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def transaction(connection: Any) -> Iterator[Any]:
    """Commit what the block executed on the yielded cursor, or roll it back if it raised."""
    cursor = connection.cursor()
    try:
        yield cursor
        connection.commit()
    except BaseException:
        connection.rollback()
        raise
    finally:
        cursor.close()
