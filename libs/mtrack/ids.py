"""Mutation ids and the allocation of sequences in one log.

Theory of operation. A coordinator keeps one log per replicated range it coordinates for (a log
never spans a range boundary: a split or merge seals the log and opens new ones). A mutation id
is ``(node, log, sequence, hlc)``: identity and order come from ``(node, log, sequence)``, the
sequence being dense per log from 1; the HLC only dates the mutation. An id is created once and a
retried write reuses it, so equal identity always carries the same hlc; equality and hashing
compare all four fields, which is the same thing while that holds and keeps the in-memory sets
consistent with the packed bytes that summaries hash.

``SequenceBlock`` hands out the sequences of one log. Every sequence it hands out is below the
ceiling on disk: when an allocation reaches the ceiling it returns a new one, which the shell
makes durable BEFORE it uses the sequence. After a restart the log resumes at the persisted
ceiling, so no sequence is ever reused. The sequences between the last one used and that ceiling
are permanent holes, as is any sequence that reached no replica: reconciliation targets the union
of the ids the replicas hold, never a gap-free prefix.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from epochal.mtrack.hlc import MAX_HLC, format_hlc

MAX_U32 = (1 << 32) - 1
MAX_U64 = (1 << 64) - 1
# Sequences are stored as signed 64-bit integers, like HLCs.
MAX_SEQUENCE = (1 << 63) - 1
PACKED_SIZE = 24

_PACKED = struct.Struct(">IIQQ")


@dataclass(frozen=True, order=True, slots=True, kw_only=True)
class MutationId:
    node: int
    log: int
    sequence: int
    hlc: int

    _LIMITS: ClassVar[tuple[tuple[str, int, int], ...]] = (
        ("node", 1, MAX_U32),
        ("log", 1, MAX_U32),
        ("sequence", 1, MAX_SEQUENCE),
        ("hlc", 0, MAX_HLC),
    )

    def __post_init__(self) -> None:
        if not (
            1 <= self.node <= MAX_U32
            and 1 <= self.log <= MAX_U32
            and 1 <= self.sequence <= MAX_SEQUENCE
            and 0 <= self.hlc <= MAX_HLC
        ):
            raise ValueError(self._range_problem())

    def _range_problem(self) -> str:
        for name, low, high in self._LIMITS:
            value = getattr(self, name)
            if not low <= value <= high:
                return f"mutation id {name} must be in {low}..{high}, got {value}"
        raise AssertionError("no field is out of range")

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.node, self.log, self.sequence)

    @property
    def log_key(self) -> tuple[int, int]:
        return (self.node, self.log)

    def pack(self) -> bytes:
        """24 bytes; the first 16 sort like the identity (last-write-wins tie-breaker)."""
        return _PACKED.pack(self.node, self.log, self.sequence, self.hlc)

    @classmethod
    def unpack(cls, packed: bytes) -> MutationId:
        if len(packed) != PACKED_SIZE:
            raise ValueError(f"a packed mutation id is {PACKED_SIZE} bytes, got {len(packed)}")
        node, log, sequence, hlc = _PACKED.unpack(packed)
        return cls(node=node, log=log, sequence=sequence, hlc=hlc)

    def __str__(self) -> str:
        return f"node-{self.node}/L{self.log}#{self.sequence}@{format_hlc(self.hlc)}"


class SequenceBlock:
    """The next sequence of one log, reserved on disk in blocks of ``block_size``."""

    __slots__ = ("_ceiling", "_next_sequence", "block_size")

    def __init__(self, *, block_size: int, ceiling: int = 0) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        if ceiling < 0 or ceiling > MAX_SEQUENCE:
            raise ValueError(f"ceiling must be in 0..2^63-1, got {ceiling}")
        self.block_size = block_size
        self._ceiling = ceiling
        self._next_sequence = max(ceiling, 1)  # every sequence used before a crash is below it

    @property
    def next_sequence(self) -> int:
        return self._next_sequence

    @property
    def ceiling(self) -> int:
        return self._ceiling

    def allocate(self) -> tuple[int, int | None]:
        """``(sequence, persist_ceiling)``: make ``persist_ceiling`` durable before the sequence."""
        sequence = self._next_sequence
        persist_ceiling = None
        if sequence >= self._ceiling:
            persist_ceiling = sequence + self.block_size
            assert persist_ceiling <= MAX_SEQUENCE, f"log sequences exhausted at {sequence}"
            self._ceiling = persist_ceiling
        self._next_sequence = sequence + 1
        return sequence, persist_ceiling
