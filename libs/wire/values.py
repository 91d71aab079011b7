"""Typed cell and key values <-> epochal.v1.Value (only here is a Value built or read).

Python values: TEXT ``str``, INT/BIGINT ``int``, BOOLEAN ``bool``, DOUBLE ``float``, BLOB
``bytes``, UUID ``uuid.UUID``, TIMESTAMP ``int`` milliseconds since the Unix epoch (a timezone-
aware ``datetime`` is accepted too); ``None`` is null. A stored cell value is the Value's
serialized bytes, so replicas store and return it without converting it.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from google.protobuf.message import DecodeError

from epochal.tcm import ColumnType
from epochal.wire.v1 import replica_pb2 as pb

KIND_OF_TYPE = {
    ColumnType.TEXT: "text",
    ColumnType.INT: "int",
    ColumnType.BIGINT: "int",
    ColumnType.BOOLEAN: "boolean",
    ColumnType.DOUBLE: "double",
    ColumnType.BLOB: "blob",
    ColumnType.UUID: "uuid",
    ColumnType.TIMESTAMP: "timestamp",
}


class BadValue(ValueError):
    """A value that does not fit its column; the message names the column."""


def to_proto(column: str, column_type: ColumnType, value: Any) -> pb.Value:
    """A Python value of a column -> Value (``None`` -> the null Value)."""
    if value is None:
        return pb.Value()
    if column_type is ColumnType.TIMESTAMP and isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise BadValue(f"column {column!r}: use a timezone-aware datetime")
        value = int(value.timestamp() * 1000)
    if column_type is ColumnType.UUID and isinstance(value, uuid.UUID):
        return pb.Value(uuid=value.bytes)
    kind = KIND_OF_TYPE[column_type]
    expected = _PYTHON_TYPES[kind]
    if not isinstance(value, expected) or (kind == "int" and isinstance(value, bool)):
        raise BadValue(
            f"column {column!r} is {column_type.value}; got {type(value).__name__} {value!r:.40}"
        )
    if kind == "double":
        value = float(value)
    try:
        return pb.Value(**{kind: value})
    except (ValueError, TypeError) as error:
        raise BadValue(f"column {column!r}: {error}") from None


_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "text": str,
    "int": int,
    "boolean": bool,
    "double": (float, int),
    "blob": (bytes, bytearray),
    "uuid": uuid.UUID,
    "timestamp": int,
}


def from_proto(value: pb.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind is None:
        return None
    raw = getattr(value, kind)
    if kind == "uuid":
        return uuid.UUID(bytes=raw)
    return raw


def encode(value: pb.Value) -> bytes:
    return value.SerializeToString()


def decode(data: bytes) -> pb.Value:
    return pb.Value.FromString(data)


def encoded_kind(data: bytes) -> tuple[str, int | None]:
    """The kind of a stored (encoded) cell value, and the number for an ``int``; ``BadValue``
    unless the bytes are the canonical encoding of one non-null Value (a peer's mutation is
    checked with this before it is stored)."""
    try:
        value = pb.Value.FromString(data)
    except DecodeError as error:
        raise BadValue(f"not an encoded value: {error}") from None
    kind = value.WhichOneof("kind")
    value.DiscardUnknownFields()  # so that bytes around a value cannot ride along stored
    if kind is None or value.SerializeToString() != data:
        raise BadValue("not the canonical encoding of one value")
    if kind == "uuid" and len(value.uuid) != 16:
        raise BadValue(f"a uuid is 16 bytes, got {len(value.uuid)}")
    return kind, value.int if kind == "int" else None
