"""Mutation-id summaries whose size grows with the difference between replicas.

Theory of operation. Two replicas A and B each hold a set of ids (of one partition or one token
range, at or above a low bound that the summary names; whoever builds a summary leaves out the
ids below it). A comparer (a read coordinator, the reconciler) learns the ids only one side holds
in two rounds:

1. ``LogDigests``, the summary: per log ``(node, log)``, the number of ids and the sum mod 2^64 of
   their 64-bit hashes; about 13 bytes a log, whatever the number of ids. ``differing_logs``
   names the logs whose ``(count, digest)`` differ, each with an estimate of how many ids differ
   (``|count_a - count_b|``, or 2 when counts match but digests do not: then each side holds at
   least one id the other lacks). No differing log means equal sets, up to 2^-64 collisions.
   Different low bounds raise ``LowBoundMismatch``: ask both again with the larger one.
2. ``Sketch``: each side describes its ids in the differing logs only, as an IBLT of ``cells``
   cells or, when it holds no more ids than ``cells``, explicitly (sorted ids; smaller then).
   Both sides sketch the same logs (a comparer may add logs they agree on). ``difference``
   subtracts the two (an explicit side is turned into an IBLT of the same cells) and peels,
   then verifies the result against round 1 before returning it: per differing log the count
   and digest differences must equal those of the decoded ids, and every decoded id must lie
   in a differing log, at or above the low bound, on one side only. A decode that does not
   verify raises ``Undecodable``; a wrong answer is never returned.

On ``Undecodable`` the comparer asks both sides again with twice the cells. A side whose id count
is at most the cells, or any side once the cells pass ``MAX_CELLS``, sends its ids explicitly,
and explicit against explicit always decodes: the protocol ends within ``MAX_SKETCH_ROUNDS``.

Sizing (``cells_for``): ``3 * ceil((2 * d + 9) / 3)`` cells for an estimated difference ``d``.
A 3-hash IBLT peels with high probability once its cells exceed about 1.23 times the ids in it
(the 2-core threshold of random 3-uniform hypergraphs); 2x leaves room because ``d`` is only a
lower bound. Below a few hundred ids, failures come mostly from two ids that share all three
cells (probability about ``C(d, 2) / (cells / 3)^3``), which the ``+ 9`` keeps small. Simulated
failure rates: 0 at d=1, 0.7% at d=2, 2.8% at d=5, 4.8% at d=10 (the worst), 1.9% at d=100,
under 1% from d=200. A failure costs one more round with twice the cells; a bigger constant
would cost bytes on every comparison (with ``+ 6`` the two-range benchmark of the tests sends
360 bytes less but needs an extra round in about one run in ten).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from itertools import pairwise

from epochal.mtrack._codec import MAX_U64, Reader, decoding, put_uvarint
from epochal.mtrack._hashing import digest_element
from epochal.mtrack.errors import LowBoundMismatch, Undecodable
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.iblt import HASH_FUNCTIONS, MAX_CELLS, Iblt
from epochal.mtrack.ids import MAX_U32, PACKED_SIZE, MutationId

LogKey = tuple[int, int]
DIGEST_SIZE = 8
MAX_SKETCH_ROUNDS = MAX_CELLS.bit_length()  # from 3 cells, doubling passes MAX_CELLS by then
_EXPLICIT, _TABLE = 0, 1


# Cells past MAX_CELLS ask each side for its ids explicitly (``Sketch.of``): the last resort,
# which always decodes.
EXPLICIT_CELLS = MAX_CELLS + HASH_FUNCTIONS


def more_cells(cells: int) -> int:
    """The cells to ask for after an undecodable round: twice as many, then explicit ids."""
    return min(cells * 2, EXPLICIT_CELLS)


def cells_for(estimated_difference: int) -> int:
    """IBLT cells for an estimated difference (see the module docstring for the rule)."""
    if estimated_difference < 1:
        raise ValueError(f"estimated_difference must be >= 1, got {estimated_difference}")
    wanted = 2 * estimated_difference + 9
    return min(HASH_FUNCTIONS * -(-wanted // HASH_FUNCTIONS), MAX_CELLS)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDigest:
    node: int
    log: int
    count: int
    digest: int

    def __post_init__(self) -> None:
        if not (1 <= self.node <= MAX_U32 and 1 <= self.log <= MAX_U32):
            raise ValueError(f"log node-{self.node}/L{self.log} out of range")
        if not (1 <= self.count <= MAX_U64 and 0 <= self.digest <= MAX_U64):
            raise ValueError(f"log node-{self.node}/L{self.log}: bad count or digest")

    @property
    def log_key(self) -> LogKey:
        return (self.node, self.log)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDigests:
    """Round 1: per-log count and digest of the ids at or above ``low_bound``."""

    low_bound: int
    logs: tuple[LogDigest, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.low_bound <= MAX_HLC:
            raise ValueError(f"low_bound must be in 0..2^63-1, got {self.low_bound}")
        if any(a.log_key >= b.log_key for a, b in pairwise(self.logs)):
            raise ValueError("log digests must be sorted by (node, log) without repeats")

    @classmethod
    def of(cls, ids: Iterable[MutationId], *, low_bound: int = 0) -> LogDigests:
        """Digests of distinct ids, none of them below ``low_bound``."""
        counts: dict[LogKey, int] = {}
        sums: dict[LogKey, int] = {}
        for mutation_id in ids:
            if mutation_id.hlc < low_bound:
                raise ValueError(f"{mutation_id} is below the low bound {low_bound}")
            log_key = (mutation_id.node, mutation_id.log)
            counts[log_key] = counts.get(log_key, 0) + 1
            sums[log_key] = sums.get(log_key, 0) + digest_element(mutation_id.pack())
        logs = tuple(
            LogDigest(node=node, log=log, count=counts[node, log], digest=sums[node, log] % 2**64)
            for node, log in sorted(counts)
        )
        return cls(low_bound=low_bound, logs=logs)

    def by_log(self) -> dict[LogKey, LogDigest]:
        return {entry.log_key: entry for entry in self.logs}

    def encode(self) -> bytes:
        out = bytearray()
        put_uvarint(out, self.low_bound)
        put_uvarint(out, len(self.logs))
        for entry in self.logs:
            put_uvarint(out, entry.node)
            put_uvarint(out, entry.log)
            put_uvarint(out, entry.count)
            out += entry.digest.to_bytes(DIGEST_SIZE, "big")
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> LogDigests:
        reader = Reader(data, "log digests")
        with decoding("log digests"):
            low_bound = reader.uvarint()
            logs = tuple(
                LogDigest(
                    node=reader.uvarint(),
                    log=reader.uvarint(),
                    count=reader.uvarint(),
                    digest=int.from_bytes(reader.fixed(DIGEST_SIZE), "big"),
                )
                for _ in range(reader.count(3 + DIGEST_SIZE))
            )
            reader.finish()
            return cls(low_bound=low_bound, logs=logs)

    def encoded_size(self) -> int:
        return len(self.encode())


def differing_logs(a: LogDigests, b: LogDigests) -> dict[LogKey, int]:
    """The logs whose ids differ, each with a lower bound on how many ids differ."""
    if a.low_bound != b.low_bound:
        raise LowBoundMismatch(low_bound_a=a.low_bound, low_bound_b=b.low_bound)
    by_log_a, by_log_b = a.by_log(), b.by_log()
    estimates: dict[LogKey, int] = {}
    for log_key in by_log_a.keys() | by_log_b.keys():
        count_a, digest_a = _count_and_digest(by_log_a, log_key)
        count_b, digest_b = _count_and_digest(by_log_b, log_key)
        if (count_a, digest_a) != (count_b, digest_b):
            estimates[log_key] = abs(count_a - count_b) if count_a != count_b else 2
    return estimates


def _count_and_digest(by_log: dict[LogKey, LogDigest], log_key: LogKey) -> tuple[int, int]:
    entry = by_log.get(log_key)
    return (0, 0) if entry is None else (entry.count, entry.digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sketch:
    """Round 2: one side's ids in the differing logs, explicit (``ids``) or as an IBLT."""

    ids: tuple[MutationId, ...] | None = None
    table: Iblt | None = None

    def __post_init__(self) -> None:
        if (self.ids is None) == (self.table is None):
            raise ValueError("a sketch holds either explicit ids or an IBLT")
        if self.ids is not None and any(a.key >= b.key for a, b in pairwise(self.ids)):
            raise ValueError("explicit ids must be sorted without repeated identities")

    @classmethod
    def of(cls, ids: Collection[MutationId], cells: int) -> Sketch:
        """Explicit when ``len(ids) <= cells`` or ``cells > MAX_CELLS``, else an IBLT."""
        if cells < HASH_FUNCTIONS or cells % HASH_FUNCTIONS:
            raise ValueError(f"cells must be a positive multiple of 3, got {cells}")
        if len(ids) <= cells or cells > MAX_CELLS:
            return cls(ids=tuple(sorted(ids)))
        return cls(table=Iblt.of(ids, cells))

    @property
    def is_explicit(self) -> bool:
        return self.ids is not None

    def encode(self) -> bytes:
        out = bytearray()
        if self.ids is not None:
            out.append(_EXPLICIT)
            put_uvarint(out, len(self.ids))
            for mutation_id in self.ids:
                out += mutation_id.pack()
        else:
            assert self.table is not None
            out.append(_TABLE)
            self.table.encode_into(out)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Sketch:
        reader = Reader(data, "sketch")
        with decoding("sketch"):
            tag = reader.fixed(1)[0]
            if tag == _EXPLICIT:
                count = reader.count(PACKED_SIZE)
                sketch = cls(
                    ids=tuple(MutationId.unpack(reader.fixed(PACKED_SIZE)) for _ in range(count))
                )
            elif tag == _TABLE:
                sketch = cls(table=Iblt.decode_from(reader))
            else:
                raise reader.fail(f"unknown sketch kind {tag}")
            reader.finish()
            return sketch

    def encoded_size(self) -> int:
        return len(self.encode())


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    only_a: frozenset[MutationId] = frozenset()
    only_b: frozenset[MutationId] = frozenset()


def difference(
    digests_a: LogDigests, sketch_a: Sketch, digests_b: LogDigests, sketch_b: Sketch
) -> Difference:
    """The ids only A holds and only B holds, verified against round 1, or ``Undecodable``."""
    estimates = differing_logs(digests_a, digests_b)
    if not estimates:
        return Difference()
    only_a, only_b = _decode(sketch_a, sketch_b, estimates.keys())
    return _verified(digests_a, digests_b, estimates.keys(), only_a, only_b)


def _decode(
    sketch_a: Sketch, sketch_b: Sketch, logs: Collection[LogKey]
) -> tuple[list[MutationId], list[MutationId]]:
    if sketch_a.ids is not None and sketch_b.ids is not None:
        ids_a = {i for i in sketch_a.ids if i.log_key in logs}
        ids_b = {i for i in sketch_b.ids if i.log_key in logs}
        return list(ids_a - ids_b), list(ids_b - ids_a)
    given = sketch_a.table if sketch_a.table is not None else sketch_b.table
    assert given is not None
    table = _table_of(sketch_a, given.cells).subtract(_table_of(sketch_b, given.cells))
    plus, minus = table.peel()
    return _unpacked(plus), _unpacked(minus)


def _table_of(sketch: Sketch, cells: int) -> Iblt:
    """An explicit side as an IBLT of all its ids: both sides sketched the same logs, which
    may include logs they agree on (a comparer that sketches for several replicas at once
    asks each for the union of their differing logs); those ids cancel in the subtraction."""
    if sketch.table is not None:
        return sketch.table
    assert sketch.ids is not None
    return Iblt.of(sketch.ids, cells)


def _unpacked(packed_ids: list[bytes]) -> list[MutationId]:
    try:
        return [MutationId.unpack(packed) for packed in packed_ids]
    except ValueError as error:
        raise Undecodable(f"peeled an invalid id ({error})") from error


def _verified(
    digests_a: LogDigests,
    digests_b: LogDigests,
    logs: Collection[LogKey],
    only_a: list[MutationId],
    only_b: list[MutationId],
) -> Difference:
    """Check a decode against round 1 (module docstring, step 2)."""
    found_a, found_b = frozenset(only_a), frozenset(only_b)
    if len(found_a) != len(only_a) or len(found_b) != len(only_b) or found_a & found_b:
        raise Undecodable("an id was decoded twice")
    balance = _unexplained(digests_a, digests_b, logs)
    for sign, decoded in ((1, found_a), (-1, found_b)):
        for mutation_id in decoded:
            entry = balance.get(mutation_id.log_key)
            if entry is None or mutation_id.hlc < digests_a.low_bound:
                raise Undecodable(f"decoded {mutation_id}, which no differing log can hold")
            entry[0] -= sign
            entry[1] -= sign * digest_element(mutation_id.pack())
    for (node, log), (count, digest) in balance.items():
        if count != 0 or digest % 2**64 != 0:
            raise Undecodable(f"decoded ids do not match the digests of node-{node}/L{log}")
    return Difference(only_a=found_a, only_b=found_b)


def _unexplained(
    digests_a: LogDigests, digests_b: LogDigests, logs: Collection[LogKey]
) -> dict[LogKey, list[int]]:
    """``[count_a - count_b, digest_a - digest_b]`` per log: what the decoded ids must explain."""
    by_log_a, by_log_b = digests_a.by_log(), digests_b.by_log()
    unexplained = {}
    for log_key in logs:
        count_a, digest_a = _count_and_digest(by_log_a, log_key)
        count_b, digest_b = _count_and_digest(by_log_b, log_key)
        unexplained[log_key] = [count_a - count_b, digest_a - digest_b]
    return unexplained


def reconcile(
    ids_a: Iterable[MutationId],
    ids_b: Iterable[MutationId],
    *,
    low_bound: int = 0,
    initial_cells: int | None = None,
) -> tuple[Difference, int, int]:
    """Run both rounds between two in-memory sets, through the encodings.

    Returns the difference, the bytes both sides sent and the number of rounds (round 1 plus
    each sketch round). For tests and benchmarks; the replica service drives the steps itself.
    """
    held_a = {i for i in ids_a if i.hlc >= low_bound}
    held_b = {i for i in ids_b if i.hlc >= low_bound}
    wire_a = LogDigests.of(held_a, low_bound=low_bound).encode()
    wire_b = LogDigests.of(held_b, low_bound=low_bound).encode()
    bytes_exchanged = len(wire_a) + len(wire_b)
    digests_a, digests_b = LogDigests.decode(wire_a), LogDigests.decode(wire_b)
    estimates = differing_logs(digests_a, digests_b)
    if not estimates:
        return Difference(), bytes_exchanged, 1
    in_logs_a = [i for i in held_a if i.log_key in estimates]
    in_logs_b = [i for i in held_b if i.log_key in estimates]
    cells = initial_cells or cells_for(sum(estimates.values()))
    for sketch_round in range(1, MAX_SKETCH_ROUNDS + 1):
        sketch_a = Sketch.of(in_logs_a, cells).encode()
        sketch_b = Sketch.of(in_logs_b, cells).encode()
        bytes_exchanged += len(sketch_a) + len(sketch_b)
        try:
            found = difference(
                digests_a, Sketch.decode(sketch_a), digests_b, Sketch.decode(sketch_b)
            )
        except Undecodable:
            cells *= 2
            continue
        return found, bytes_exchanged, 1 + sketch_round
    raise AssertionError(f"explicit sketches did not decode after {MAX_SKETCH_ROUNDS} rounds")
