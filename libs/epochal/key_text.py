"""A partition key typed on a command line -> the column values, and the token the SDK gives
them (``epochal endpoints``). Pure: no I/O.

Theory of operation
-------------------
A key is typed as one string: a composite key's components are separated by ":" (``"7:ann"``),
and the last component keeps any further ":", so only it may contain one. Each component
converts to its column's type — int, bigint: a whole number; timestamp: milliseconds since the
Unix epoch; boolean: true or false; double: a number; uuid: its usual form; blob: hex, with or
without 0x; text: as it is — and the values go through the SDK's own encoding
(``epochal.encoding.partition``), which checks they fit (an int's range, an empty one-column
key) and computes the token: a key typed here routes exactly as the same key written through
the SDK. A key that does not convert or does not fit is ``BadKey`` (the key codec's,
``epochal.tcm.keys``), naming the key, its table and, when one is at fault, the column.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping

from epochal.encoding import partition
from epochal.errors import InvalidRequest
from epochal.tcm import ColumnType, Table
from epochal.tcm.keys import BadKey, KeyValue, partition_columns

KEY_SEPARATOR = ":"


def key_token(schema: Table, text: str) -> int:
    """The token of the partition key ``text`` of ``schema``, as the SDK computes it."""
    values = parse_key(schema, text)
    try:
        _, token = partition(schema, values)
    except InvalidRequest as error:
        raise _bad_key(schema, text, error.message) from None
    return token


def parse_key(schema: Table, text: str) -> dict[str, KeyValue]:
    """A partition key typed as text -> column name -> value of the column's type (see the
    module's docstring); ``BadKey`` names the key, table and column."""
    columns = partition_columns(schema)
    parts = text.split(KEY_SEPARATOR, len(columns) - 1)
    if len(parts) != len(columns):
        names = KEY_SEPARATOR.join(name for name, _ in columns)
        raise _bad_key(
            schema, text, f"the partition key is {len(columns)} values, typed as {names}"
        )
    values = {}
    for (name, column_type), part in zip(columns, parts, strict=True):
        try:
            values[name] = _PARSERS[column_type](part)
        except ValueError as error:
            raise _bad_key(schema, text, f"column {name} is {column_type.value}: {error}") from None
    return values


def _bad_key(schema: Table, text: str, reason: str) -> BadKey:
    return BadKey(f"key {text!r} of table {schema.keyspace}.{schema.name}: {reason}")


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def _whole_number(text: str) -> int:
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ValueError(f"{text!r} is not an integer")
    return int(text)


def _milliseconds(text: str) -> int:
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ValueError(f"{text!r} is not a whole number of milliseconds since the Unix epoch")
    return int(text)


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return lowered == "true"


def _double(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a UUID") from None


def _blob(text: str) -> bytes:
    digits = text[2:] if text[:2].lower() == "0x" else text
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise ValueError(f"{text!r} is not hex bytes (like 0x00ff)") from None


_PARSERS: Mapping[ColumnType, Callable[[str], KeyValue]] = {
    ColumnType.TEXT: str,
    ColumnType.INT: _whole_number,
    ColumnType.BIGINT: _whole_number,
    ColumnType.TIMESTAMP: _milliseconds,
    ColumnType.BOOLEAN: _boolean,
    ColumnType.DOUBLE: _double,
    ColumnType.UUID: _uuid,
    ColumnType.BLOB: _blob,
}
