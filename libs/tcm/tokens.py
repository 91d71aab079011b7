"""Tokens and token ranges: Cassandra's Murmur3 partitioner over signed 64-bit tokens. Pure.

Theory of operation
-------------------
A partition key's token is the first 64 bits of MurmurHash3_x64_128 (seed 0) of the key's bytes
in Cassandra's serialization (``epochal.tcm.keys.partition_token`` builds them: use it for a
key), read as a signed integer, exactly as Cassandra's ``Murmur3Partitioner`` computes it —
including Cassandra's quirk of sign-extending the tail bytes (Java bytes are signed) and its
mapping of ``MIN_TOKEN`` (which no key may have: it is the ring's origin) to ``MAX_TOKEN``.

A range is half-open ``(left, right]``. A set of *split points* cuts the ring into ranges: with
points p0 < p1 < … < pn the ranges are (p0, p1], …, (pn-1, pn] and the wrapping range (pn, p0].
A range wraps when ``left >= right``; ``(p, p]`` is the whole ring. Wrap-around is handled here
and nowhere else: everything else asks ``contains``, ``intersects``, ``covers`` or
``index_owning``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MIN_TOKEN = -(1 << 63)
MAX_TOKEN = (1 << 63) - 1
_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    return k ^ (k >> 33)


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK


def _mix_k2(k2: int) -> int:
    return (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK


def _signed_byte_shifted(byte: int, shift: int) -> int:
    # Java's ((long) b) << shift for a signed byte b: negative bytes carry ones upwards.
    value = byte - 256 if byte > 127 else byte
    return (value << shift) & _MASK


def murmur3_h1(key: bytes) -> int:
    """The first 64 bits of Cassandra's MurmurHash3_x64_128(key, seed 0), unsigned."""
    length = len(key)
    h1 = h2 = 0
    body = length - (length & 15)
    for offset in range(0, body, 16):
        k1 = int.from_bytes(key[offset : offset + 8], "little")
        k2 = int.from_bytes(key[offset + 8 : offset + 16], "little")
        h1 ^= _mix_k1(k1)
        h1 = (_rotl(h1, 27) + h2) & _MASK
        h1 = (h1 * 5 + 0x52DCE729) & _MASK
        h2 ^= _mix_k2(k2)
        h2 = (_rotl(h2, 31) + h1) & _MASK
        h2 = (h2 * 5 + 0x38495AB5) & _MASK
    tail = key[body:]
    k1 = k2 = 0
    for index in range(len(tail) - 1, 7, -1):
        k2 ^= _signed_byte_shifted(tail[index], 8 * (index - 8))
    if len(tail) > 8:
        h2 ^= _mix_k2(k2)
    for index in range(min(len(tail), 8) - 1, -1, -1):
        k1 ^= _signed_byte_shifted(tail[index], 8 * index)
    if tail:
        h1 ^= _mix_k1(k1)
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    return (h1 + h2) & _MASK


def token_of(key: bytes) -> int:
    """The Murmur3Partitioner token of bytes (for a partition key: its Cassandra serialization,
    see ``epochal.tcm.keys.partition_token``)."""
    h1 = murmur3_h1(key)
    token = h1 - (1 << 64) if h1 >= 1 << 63 else h1
    return MAX_TOKEN if token == MIN_TOKEN else token


def check_token(token: int) -> None:
    if not MIN_TOKEN < token <= MAX_TOKEN:
        raise ValueError(f"token {token} is outside ({MIN_TOKEN}, {MAX_TOKEN}]")


@dataclass(frozen=True, slots=True, order=True)
class TokenRange:
    """``(left, right]``; wraps past MAX_TOKEN when ``left >= right``; ``(t, t]`` is the ring."""

    left: int
    right: int

    @property
    def wraps(self) -> bool:
        return self.left >= self.right

    def contains(self, token: int) -> bool:
        if self.left < self.right:
            return self.left < token <= self.right
        return token > self.left or token <= self.right

    def intersects(self, other: TokenRange) -> bool:
        return any(
            a_left < b_right and b_left < a_right
            for a_left, a_right in self.pieces()
            for b_left, b_right in other.pieces()
        )

    def pieces(self) -> tuple[tuple[int, int], ...]:
        """Non-wrapping (left, right] pieces over the integers, MIN_TOKEN as the origin (no key has
        MIN_TOKEN, so (MIN_TOKEN, right] holds every key token up to right)."""
        if self.left < self.right:
            return ((self.left, self.right),)
        pieces = [(self.left, MAX_TOKEN)] if self.left < MAX_TOKEN else []
        if self.right > MIN_TOKEN:
            pieces.append((MIN_TOKEN, self.right))
        return tuple(pieces)

    def __str__(self) -> str:
        return f"({self.left}, {self.right}]"


def covers(outer: TokenRange, inner: TokenRange) -> bool:
    """Whether every token of ``inner`` is in ``outer``."""
    return union_covers((outer,), inner)


def union_covers(outers: Iterable[TokenRange], inner: TokenRange) -> bool:
    """Whether every token of ``inner`` is in one of ``outers``."""
    outer_pieces = sorted(piece for outer in outers for piece in outer.pieces())
    for left, right in inner.pieces():
        reached = left  # (left, reached] is covered; pieces sorted by left extend it greedily
        for o_left, o_right in outer_pieces:
            if o_left <= reached < o_right:
                reached = o_right
        if reached < right:
            return False
    return True


def index_owning(points: Sequence[int], token: int) -> int:
    """Index of the split point that ends the range containing ``token`` (the first point at or
    after it, wrapping to 0)."""
    index = bisect.bisect_left(points, token)
    return 0 if index == len(points) else index
