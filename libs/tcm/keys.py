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
(``slice_bounds``). Storage keeps partition keys in this encoding too.

A partition key's token is NOT computed from that encoding: it is Cassandra's Murmur3
(``epochal.tcm.tokens``) of Cassandra's serialization of the key (``serialize_partition_key``),
so that ``partition_token`` gives every key the token Cassandra gives it, and the SDK and every
replica agree on where a partition lives:

    one column               the type's own bytes: TEXT UTF-8; INT 4 bytes and BIGINT 8 bytes
                             big-endian two's complement; TIMESTAMP 8 bytes (signed ms);
                             BOOLEAN 1 byte; DOUBLE IEEE 754 big-endian; BLOB as is; UUID 16
    several columns          CompositeType: per component a 2-byte big-endian length, the
                             type's bytes, then one 0x00 (end-of-component) byte

As in Cassandra, a one-column key that serializes to no bytes (an empty TEXT or BLOB) is refused,
and so is a key of more than 65535 bytes serialized; an empty component of a several-column key
is a valid key (Cassandra accepts it too: CASSANDRA-11487).
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
_END_OF_COMPONENT = b"\x00"
# Cassandra refuses a longer partition key; CompositeType's component lengths are 2 bytes.
MAX_PARTITION_KEY_BYTES = 0xFFFF


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
    _check_arity(columns, values, prefix=prefix)
    parts = []
    for (name, column_type), value in zip(columns, values, strict=False):
        check_value(name, column_type, value)
        parts.append(encode_component(column_type, value))
    return b"".join(parts)


def _check_arity(
    columns: Sequence[tuple[str, ColumnType]], values: Sequence[KeyValue], *, prefix: bool
) -> None:
    if len(values) > len(columns) or (not prefix and len(values) != len(columns)):
        names = [name for name, _ in columns]
        raise BadKey(
            f"the key needs {'at most ' if prefix else ''}{len(columns)} value(s) {names}, "
            f"got {len(values)}"
        )


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


def decode_canonical(
    columns: Sequence[tuple[str, ColumnType]], data: bytes
) -> tuple[KeyValue, ...]:
    """``decode_key`` for bytes another node sent: ``BadKey`` unless ``data`` is exactly what
    ``encode_key`` makes of valid values (a short component, an unescaped NUL, a NaN, an int
    out of its column's range, trailing bytes: all refused)."""
    try:
        values = decode_key(columns, data)
    except (ValueError, IndexError, struct.error) as error:
        raise BadKey(f"encoded key does not decode: {error}") from None
    if encode_key(columns, values) != data:
        raise BadKey("encoded key is not in its canonical form")
    return values


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


def partition_token(columns: Sequence[tuple[str, ColumnType]], values: Sequence[KeyValue]) -> int:
    """The token of the partition key ``values`` of ``columns``: the one Cassandra gives it.

    Raises ``BadKey`` for a key Cassandra refuses too (see ``serialize_partition_key``)."""
    return token_of(serialize_partition_key(columns, values))


def serialize_partition_key(
    columns: Sequence[tuple[str, ColumnType]], values: Sequence[KeyValue]
) -> bytes:
    """Cassandra's bytes for the partition key ``values`` of ``columns``: the type's bytes for one
    column, CompositeType for several. Raises ``BadKey`` if a value does not fit its column, if
    a one-column key is empty, or if the key is longer than Cassandra allows."""
    assert columns, "a table has at least one partition-key column"
    _check_arity(columns, values, prefix=False)
    parts = []
    for (name, column_type), value in zip(columns, values, strict=True):
        check_value(name, column_type, value)
        parts.append(_SERIALIZERS[column_type](value))
    single = len(parts) == 1
    size = len(parts[0]) if single else sum(2 + len(part) + 1 for part in parts)
    if size == 0:
        name, column_type = columns[0]
        raise BadKey(
            f"column {name!r} may not be empty: it is the only partition-key column, and "
            f"Cassandra refuses an empty partition key ({column_type.value})"
        )
    if size > MAX_PARTITION_KEY_BYTES:
        raise BadKey(
            f"the partition key is {size} bytes serialized; the limit is {MAX_PARTITION_KEY_BYTES}"
        )
    if single:
        return parts[0]
    return b"".join(len(part).to_bytes(2, "big") + part + _END_OF_COMPONENT for part in parts)


_SERIALIZERS = {
    ColumnType.TEXT: str.encode,
    ColumnType.INT: lambda v: v.to_bytes(4, "big", signed=True),
    ColumnType.BIGINT: lambda v: v.to_bytes(8, "big", signed=True),
    ColumnType.TIMESTAMP: lambda v: v.to_bytes(8, "big", signed=True),
    ColumnType.BOOLEAN: lambda v: b"\x01" if v else b"\x00",
    ColumnType.DOUBLE: lambda v: struct.pack(">d", v),
    ColumnType.BLOB: bytes,
    ColumnType.UUID: lambda v: v.bytes,
}


def slice_bounds(
    start: bytes | None, start_exclusive: bool, end: bytes | None, end_exclusive: bool
) -> KeyBounds:
    """Byte bounds for clustering keys between two encoded prefixes (None: unbounded)."""
    lower = b"" if start is None else start + (_PAST_PREFIX if start_exclusive else b"")
    upper = None if end is None else end + (b"" if end_exclusive else _PAST_PREFIX)
    return KeyBounds(lower, upper)
