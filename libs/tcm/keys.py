"""Partition and clustering keys: typed values to order-preserving bytes, and a key's token. Pure.

Theory of operation
-------------------
A key is a tuple of typed values, one per key column. Each component is encoded as a marker
byte ``0x01`` followed by its payload, so that comparing encoded keys byte by byte compares the
tuples component by component:

    INT, BIGINT, TIMESTAMP   8 bytes big-endian of value + 2^63 (negative numbers sort first)
    BOOLEAN                  1 byte, 0 or 1
    DOUBLE                   IEEE 754 bits, sign bit flipped (all bits for negatives); no NaN
    TEXT (UTF-8), BLOB       the bytes with 0x00 escaped as 0x00 0xFF, then a 0x00 terminator
    UUID                     16 bytes

Every encoded component starts with 0x01, so a key that extends a prefix ``p`` sorts between
``p`` and ``p + 0xFF``: that is how a slice over a clustering-key prefix becomes byte bounds
(``slice_bounds``). The partition key uses the same encoding; its token is Cassandra's Murmur3
of the encoded bytes (``epochal.tcm.tokens``), so the SDK and every replica agree on where a
partition lives.
"""

from __future__ import annotations

import math
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from epochal.tcm.schema import ColumnType, Table
from epochal.tcm.tokens import token_of

KeyValue = str | int | bool | float | bytes | uuid.UUID

_MARKER = b"\x01"
_PAST_PREFIX = b"\xff"
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_SIGN = 1 << 63


class BadKey(ValueError):
    """A key value that does not fit its column; the message names the column."""


@dataclass(frozen=True, slots=True)
class KeyBounds:
    """Encoded clustering keys ``k`` with ``lower <= k`` and, when ``upper`` is set,
    ``k < upper``."""

    lower: bytes = b""
    upper: bytes | None = None

    def contains(self, key: bytes) -> bool:
        return self.lower <= key and (self.upper is None or key < self.upper)


EVERYTHING = KeyBounds()


def check_value(column: str, column_type: ColumnType, value: object) -> None:
    """Raise ``BadKey`` unless ``value`` is a valid non-null value of ``column_type``."""
    ok = _CHECKS[column_type](value)
    if not ok:
        raise BadKey(f"column {column!r} is {column_type.value}; {_describe(value)} does not fit")


def _is_int(value: object, bounds: tuple[int, int]) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]
    )


_CHECKS = {
    ColumnType.TEXT: lambda v: isinstance(v, str),
    ColumnType.INT: lambda v: _is_int(v, _INT32),
    ColumnType.BIGINT: lambda v: _is_int(v, _INT64),
    ColumnType.TIMESTAMP: lambda v: _is_int(v, _INT64),
    ColumnType.BOOLEAN: lambda v: isinstance(v, bool),
    ColumnType.DOUBLE: lambda v: isinstance(v, float) and not math.isnan(v),
    ColumnType.BLOB: lambda v: isinstance(v, bytes),
    ColumnType.UUID: lambda v: isinstance(v, uuid.UUID),
}


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    shown = repr(value)
    return f"{type(value).__name__} {shown[:40]}{'…' if len(shown) > 40 else ''}"


def _escaped(data: bytes) -> bytes:
    return data.replace(b"\x00", b"\x00\xff") + b"\x00"


def encode_component(column_type: ColumnType, value: KeyValue) -> bytes:
    if column_type in (ColumnType.INT, ColumnType.BIGINT, ColumnType.TIMESTAMP):
        return _MARKER + (int(value) + _SIGN).to_bytes(8, "big")  # type: ignore[arg-type]
    if column_type is ColumnType.TEXT:
        return _MARKER + _escaped(str(value).encode())
    if column_type is ColumnType.BLOB:
        return _MARKER + _escaped(bytes(value))  # type: ignore[arg-type]
    if column_type is ColumnType.BOOLEAN:
        return _MARKER + (b"\x01" if value else b"\x00")
    if column_type is ColumnType.UUID:
        return _MARKER + value.bytes  # type: ignore[union-attr]
    (bits,) = struct.unpack(">Q", struct.pack(">d", float(value)))  # type: ignore[arg-type]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits & _SIGN else bits | _SIGN
    return _MARKER + bits.to_bytes(8, "big")


def encode_key(
    columns: Sequence[tuple[str, ColumnType]], values: Sequence[KeyValue], *, prefix: bool = False
) -> bytes:
    """Encode ``values`` for the key ``columns`` (all of them, or a prefix when allowed)."""
    if len(values) > len(columns) or (not prefix and len(values) != len(columns)):
        names = [name for name, _ in columns]
        raise BadKey(
            f"the key needs {'at most ' if prefix else ''}{len(columns)} value(s) {names}, "
            f"got {len(values)}"
        )
    parts = []
    for (name, column_type), value in zip(columns, values, strict=False):
        check_value(name, column_type, value)
        parts.append(encode_component(column_type, value))
    return b"".join(parts)


def decode_key(columns: Sequence[tuple[str, ColumnType]], data: bytes) -> tuple[KeyValue, ...]:
    """The inverse of ``encode_key`` for a full key."""
    values = []
    offset = 0
    for name, column_type in columns:
        if data[offset : offset + 1] != _MARKER:
            raise BadKey(f"encoded key is malformed at column {name!r}")
        value, offset = _decode_component(column_type, data, offset + 1)
        values.append(value)
    if offset != len(data):
        raise BadKey("encoded key has trailing bytes")
    return tuple(values)


def _decode_component(column_type: ColumnType, data: bytes, offset: int) -> tuple[KeyValue, int]:
    if column_type in (ColumnType.TEXT, ColumnType.BLOB):
        out = bytearray()
        while True:
            end = data.index(b"\x00", offset)
            out += data[offset:end]
            if data[end + 1 : end + 2] == b"\xff":
                out += b"\x00"
                offset = end + 2
                continue
            raw = bytes(out)
            return (raw.decode() if column_type is ColumnType.TEXT else raw), end + 1
    if column_type is ColumnType.BOOLEAN:
        return data[offset] == 1, offset + 1
    if column_type is ColumnType.UUID:
        return uuid.UUID(bytes=data[offset : offset + 16]), offset + 16
    number = int.from_bytes(data[offset : offset + 8], "big")
    if column_type is ColumnType.DOUBLE:
        bits = number ^ _SIGN if number & _SIGN else number ^ 0xFFFFFFFFFFFFFFFF
        return struct.unpack(">d", bits.to_bytes(8, "big"))[0], offset + 8
    return number - _SIGN, offset + 8


def partition_columns(table: Table) -> tuple[tuple[str, ColumnType], ...]:
    return _typed(table, table.partition_key)


def clustering_columns(table: Table) -> tuple[tuple[str, ColumnType], ...]:
    return _typed(table, table.clustering_key)


def _typed(table: Table, names: Sequence[str]) -> tuple[tuple[str, ColumnType], ...]:
    by_name = {c.name: c.type for c in table.columns}
    return tuple((name, by_name[name]) for name in names)


def partition_token(encoded_partition_key: bytes) -> int:
    return token_of(encoded_partition_key)


def slice_bounds(
    start: bytes | None, start_exclusive: bool, end: bytes | None, end_exclusive: bool
) -> KeyBounds:
    """Byte bounds for clustering keys between two encoded prefixes (None: unbounded)."""
    lower = b"" if start is None else start + (_PAST_PREFIX if start_exclusive else b"")
    upper = None if end is None else end + (b"" if end_exclusive else _PAST_PREFIX)
    return KeyBounds(lower, upper)
