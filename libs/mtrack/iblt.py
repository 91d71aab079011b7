"""Invertible Bloom lookup table over packed mutation ids (Goodrich and Mitzenmacher).

Theory of operation. The table has ``cells`` cells in three equal sub-tables; an id lands in one
cell of each (k = 3), at the positions its hash names. A cell holds ``count`` (ids added minus ids
removed), ``key_xor`` (XOR of the 24-byte packed ids, as an int) and ``check_xor`` (XOR of their
32-bit check hashes). Subtracting B's table from A's, cell by cell, cancels the ids both hold and
leaves a table of the symmetric difference: ids of A with +1, ids of B with -1.

``peel`` decodes such a table: a cell is pure when its count is +1 or -1, its check matches the
hash of its key and its key hashes to that very cell; a pure cell names one id, which is then
removed from its three cells, possibly making others pure. Decoding succeeds when every cell ends
empty; otherwise it raises ``Undecodable``. A peeled id uses up one cell for good, so a table of
``cells`` cells never yields more than ``cells`` ids: past that the loop stops (``Undecodable``).
Peeling can in rare cases accept a false pure cell; the caller verifies every decode against the
round-1 digests and never trusts ``peel`` alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from epochal.mtrack._codec import Reader, put_svarint, put_uvarint
from epochal.mtrack._hashing import id_hash
from epochal.mtrack.errors import Undecodable
from epochal.mtrack.ids import PACKED_SIZE, MutationId

HASH_FUNCTIONS = 3
MAX_CELLS = HASH_FUNCTIONS * 2**14
CHECK_SIZE = 4
MIN_CELL_SIZE = 1 + PACKED_SIZE + CHECK_SIZE  # one-byte count
_CHECK = 4  # index of the check in an id_hash
_KEY_LIMIT = 1 << (8 * PACKED_SIZE)
_CHECK_LIMIT = 1 << (8 * CHECK_SIZE)


def _check_cells(cells: int) -> None:
    if cells < HASH_FUNCTIONS or cells > MAX_CELLS or cells % HASH_FUNCTIONS:
        raise ValueError(f"cells must be a multiple of 3 in 3..{MAX_CELLS}, got {cells}")


def _positions(hashed: tuple[int, int, int, int, int], sub_table: int) -> tuple[int, int, int]:
    _, first, second, third, _ = hashed
    return (first % sub_table, sub_table + second % sub_table, 2 * sub_table + third % sub_table)


@dataclass(frozen=True, slots=True, kw_only=True)
class Iblt:
    counts: tuple[int, ...]
    key_xors: tuple[int, ...]
    check_xors: tuple[int, ...]

    def __post_init__(self) -> None:
        _check_cells(len(self.counts))
        if not len(self.counts) == len(self.key_xors) == len(self.check_xors):
            raise ValueError("IBLT columns have different lengths")
        if not all(0 <= key_xor < _KEY_LIMIT for key_xor in self.key_xors):
            raise ValueError("an IBLT key_xor is not a 24-byte value")
        if not all(0 <= check_xor < _CHECK_LIMIT for check_xor in self.check_xors):
            raise ValueError("an IBLT check_xor is not a 4-byte value")

    @property
    def cells(self) -> int:
        return len(self.counts)

    @classmethod
    def of(cls, ids: Iterable[MutationId], cells: int) -> Iblt:
        _check_cells(cells)
        sub_table = cells // HASH_FUNCTIONS
        counts, key_xors, check_xors = [0] * cells, [0] * cells, [0] * cells
        for mutation_id in ids:
            packed = mutation_id.pack()
            hashed = id_hash(packed)
            key, check = int.from_bytes(packed, "big"), hashed[_CHECK]
            for index in _positions(hashed, sub_table):
                counts[index] += 1
                key_xors[index] ^= key
                check_xors[index] ^= check
        return cls(counts=tuple(counts), key_xors=tuple(key_xors), check_xors=tuple(check_xors))

    def subtract(self, other: Iblt) -> Iblt:
        if other.cells != self.cells:
            raise Undecodable(f"tables have different cells ({self.cells} vs {other.cells})")
        return Iblt(
            counts=tuple(a - b for a, b in zip(self.counts, other.counts, strict=True)),
            key_xors=tuple(a ^ b for a, b in zip(self.key_xors, other.key_xors, strict=True)),
            check_xors=tuple(a ^ b for a, b in zip(self.check_xors, other.check_xors, strict=True)),
        )

    def peel(self) -> tuple[list[bytes], list[bytes]]:
        """The packed ids with count +1 and those with count -1; ``Undecodable`` if stuck."""
        counts, key_xors, check_xors = list(self.counts), list(self.key_xors), list(self.check_xors)
        sub_table = self.cells // HASH_FUNCTIONS
        pending = [index for index, count in enumerate(counts) if count in (1, -1)]
        plus: list[bytes] = []
        minus: list[bytes] = []
        while pending:  # bounded: each peel empties a cell for good and pushes at most 3
            index = pending.pop()
            sign = counts[index]
            if sign not in (1, -1):
                continue
            key = key_xors[index]
            packed = key.to_bytes(PACKED_SIZE, "big")
            hashed = id_hash(packed)
            check, positions = hashed[_CHECK], _positions(hashed, sub_table)
            if check_xors[index] != check or index not in positions:
                continue
            if len(plus) + len(minus) == self.cells:
                raise Undecodable(f"more ids than the {self.cells} cells can hold")
            (plus if sign == 1 else minus).append(packed)
            for position in positions:
                counts[position] -= sign
                key_xors[position] ^= key
                check_xors[position] ^= check
                if counts[position] in (1, -1):
                    pending.append(position)
        if any(counts) or any(key_xors) or any(check_xors):
            raise Undecodable(f"peeling stalled with cells left in a table of {self.cells}")
        return plus, minus

    def encode_into(self, out: bytearray) -> None:
        put_uvarint(out, self.cells)
        for count, key_xor, check_xor in zip(
            self.counts, self.key_xors, self.check_xors, strict=True
        ):
            put_svarint(out, count)
            out += key_xor.to_bytes(PACKED_SIZE, "big")
            out += check_xor.to_bytes(CHECK_SIZE, "big")

    @classmethod
    def decode_from(cls, reader: Reader) -> Iblt:
        cells = reader.count(MIN_CELL_SIZE)
        counts, key_xors, check_xors = [], [], []
        for _ in range(cells):
            counts.append(reader.svarint())
            key_xors.append(int.from_bytes(reader.fixed(PACKED_SIZE), "big"))
            check_xors.append(int.from_bytes(reader.fixed(CHECK_SIZE), "big"))
        return cls(counts=tuple(counts), key_xors=tuple(key_xors), check_xors=tuple(check_xors))
