"""Varints and a bounds-checked reader for the summary encodings.

Unsigned values are LEB128 varints of at most 64 bits, in their shortest form (so decoding then
encoding gives back the same bytes); signed values are zigzag varints. Every way a buffer can be
wrong (truncated, overlong, too large, trailing bytes, a field out of range) surfaces as
``MalformedSummary``: ``decoding`` turns the ``ValueError`` of a constructor into one, and the
reader raises it itself, so no ``IndexError`` or ``struct.error`` escapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from epochal.mtrack.errors import MalformedSummary

MAX_U64 = (1 << 64) - 1
_MAX_VARINT_BYTES = 10


def put_uvarint(out: bytearray, value: int) -> None:
    assert 0 <= value <= MAX_U64, value
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def put_svarint(out: bytearray, value: int) -> None:
    put_uvarint(out, value << 1 if value >= 0 else (-value << 1) - 1)


@contextmanager
def decoding(what: str) -> Iterator[None]:
    try:
        yield
    except MalformedSummary:
        raise
    except ValueError as error:
        raise MalformedSummary(f"{what}: {error}") from error


class Reader:
    __slots__ = ("_data", "_offset", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = bytes(data)
        self._offset = 0
        self._what = what

    @property
    def remaining(self) -> int:
        return len(self._data) - self._offset

    def fail(self, problem: str) -> MalformedSummary:
        return MalformedSummary(f"{self._what}: {problem} at byte {self._offset}")

    def uvarint(self) -> int:
        value = 0
        for index in range(_MAX_VARINT_BYTES):
            if self._offset >= len(self._data):
                raise self.fail("truncated varint")
            byte = self._data[self._offset]
            self._offset += 1
            value |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                if byte == 0 and index > 0:
                    raise self.fail("overlong varint")
                if value > MAX_U64:
                    raise self.fail("varint above 2^64-1")
                return value
        raise self.fail("varint longer than 10 bytes")

    def svarint(self) -> int:
        zigzag = self.uvarint()
        return zigzag >> 1 if zigzag & 1 == 0 else -((zigzag + 1) >> 1)

    def fixed(self, size: int) -> bytes:
        if self.remaining < size:
            raise self.fail(f"truncated: {size} bytes wanted, {self.remaining} left")
        chunk = self._data[self._offset : self._offset + size]
        self._offset += size
        return chunk

    def count(self, min_item_size: int) -> int:
        """A varint count of items, each at least ``min_item_size`` bytes, that can fit."""
        count = self.uvarint()
        if count * min_item_size > self.remaining:
            raise self.fail(f"{count} items cannot fit in {self.remaining} bytes")
        return count

    def finish(self) -> None:
        if self.remaining:
            raise self.fail(f"{self.remaining} trailing bytes")
