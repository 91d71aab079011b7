"""A stream cursor as the receiver keeps it on disk (``stream_progress.cursor``). Pure.

Theory of operation
-------------------
The cursor is stored as a small JSON object, UTF-8, whose first byte is always ``{``:

    {"phase":"cells","after":{"token":-7,"partition_key":"0a61","clustering":"","column":"v"},"v":1}
    {"phase":"mutations","after":{"token":9,"partition_key":"0a61","node":2,"log":1,
     "sequence":17,"hlc":123},"v":1}
    {"phase":"done","v":1}

(bytes as hex; ``after`` absent: from the phase's start; ``v`` the format's version). It is
this module's own format, readable with the ``sqlite3`` shell, and no longer tied to the wire.

Replicas before this format stored the protobuf message ``epochal.v1.StreamCursor``. A stream
such a replica left half done is still read: those bytes never start with ``{`` (the byte
would be the tag of field 15, a group, which the message does not have; the message with no
field set is empty), and ``_decode_protobuf`` reads the eight fields the message had, by hand —
storage imports no generated code. Nothing is converted on disk: the next message the stream
stores rewrites its row in this format. (A replica of the older version would fail to resume a
stream this version left half done; starting it over, by cancel and a new operation, works.)
"""

from __future__ import annotations

import json
from typing import Any

from epochal.mtrack import MutationId
from epochal.replica.stream_values import CellPosition, LogPosition, Phase, StreamCursor

VERSION = 1


def encode_cursor(cursor: StreamCursor) -> bytes:
    record: dict[str, Any] = {"v": VERSION, "phase": cursor.phase.value}
    after = cursor.after
    if isinstance(after, CellPosition):
        record["after"] = {
            "token": after.token,
            "partition_key": after.partition_key.hex(),
            "clustering": after.clustering.hex(),
            "column": after.column,
        }
    elif isinstance(after, LogPosition):
        mid = after.mutation_id
        record["after"] = {
            "token": after.token,
            "partition_key": after.partition_key.hex(),
            "node": mid.node,
            "log": mid.log,
            "sequence": mid.sequence,
            "hlc": mid.hlc,
        }
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def decode_cursor(raw: bytes) -> StreamCursor:
    """A stored cursor, in this format or the protobuf one stored before it."""
    if raw.startswith(b"{"):
        return _decode_json(raw)
    return _decode_protobuf(raw)


def _decode_json(raw: bytes) -> StreamCursor:
    record = json.loads(raw)
    if record.get("v") != VERSION:
        raise ValueError(f"stream cursor format {record.get('v')!r} is not {VERSION}")
    phase = Phase(record["phase"])
    after = record.get("after")
    if after is None:
        return StreamCursor(phase)
    token, partition_key = after["token"], bytes.fromhex(after["partition_key"])
    if phase is Phase.CELLS:
        position: CellPosition | LogPosition = CellPosition(
            token, partition_key, bytes.fromhex(after["clustering"]), after["column"]
        )
    else:
        mid = MutationId(
            node=after["node"], log=after["log"], sequence=after["sequence"], hlc=after["hlc"]
        )
        position = LogPosition(token, partition_key, mid)
    return StreamCursor(phase, position)


# ---------------------------------------------------------------------- the protobuf of before

# epochal.v1.StreamCursor's phases by number, and its fields: phase = 1 (enum), started = 2
# (bool), token = 3 (sint64), partition_key = 4, clustering = 5 (bytes), column = 6 (string),
# hlc = 7 (uint64), mutation_id = 8 (MutationId: node = 1, log = 2, sequence = 3, hlc = 4).
_PHASES = (Phase.CELLS, Phase.MUTATIONS, Phase.DONE)
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


def _decode_protobuf(raw: bytes) -> StreamCursor:
    fields = _fields(raw)
    phase_number = fields.get(1, 0)
    if not 0 <= phase_number < len(_PHASES):
        raise ValueError(f"stream cursor phase {phase_number} is not one this replica wrote")
    phase = _PHASES[phase_number]
    if phase is Phase.DONE or not fields.get(2, 0):
        return StreamCursor(phase)
    token = _zigzag(fields.get(3, 0))
    partition_key = fields.get(4, b"")
    if phase is Phase.CELLS:
        clustering, column = fields.get(5, b""), fields.get(6, b"").decode()
        return StreamCursor(phase, CellPosition(token, partition_key, clustering, column))
    mid = _fields(fields.get(8, b""))
    mutation_id = MutationId(
        node=mid.get(1, 0), log=mid.get(2, 0), sequence=mid.get(3, 0), hlc=fields.get(7, 0)
    )
    return StreamCursor(phase, LogPosition(token, partition_key, mutation_id))


def _fields(raw: bytes) -> dict[int, Any]:
    """The message's fields by number: varints as ints, length-delimited ones as bytes (the last
    occurrence wins, as protobuf reads a repeated singular field); fixed-size ones skipped."""
    fields: dict[int, Any] = {}
    at = 0
    while at < len(raw):
        key, at = _varint(raw, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            fields[number], at = _varint(raw, at)
        elif wire_type == _LENGTH:
            size, at = _varint(raw, at)
            if at + size > len(raw):
                raise ValueError("stream cursor: a field runs past the end")
            fields[number], at = raw[at : at + size], at + size
        elif wire_type in (_FIXED64, _FIXED32):
            at += 8 if wire_type == _FIXED64 else 4
        else:
            raise ValueError(f"stream cursor: wire type {wire_type} of field {number}")
    if at != len(raw):
        raise ValueError("stream cursor: the last field runs past the end")
    return fields


def _varint(raw: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):  # a 64-bit varint takes at most ten bytes
        if at >= len(raw):
            raise ValueError("stream cursor: a varint runs past the end")
        byte = raw[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & ((1 << 64) - 1), at
        shift += 7
    raise ValueError("stream cursor: a varint longer than ten bytes")


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)
