"""The model half of the reconciliation benchmark: the bytes two replicas send to repair one
token range, computed with no servers. Not a benchmark itself (``bench/reconcile.py`` imports it;
the leading underscore keeps ``make bench`` from running it).

Replica A holds ``n`` mutations of the range; replica B holds the same minus ``d`` of them, drawn
at random in each trial. Two families of figures, each the median of ``trials`` trials:

- ``summary_bytes``: what A and B send each other, through the encodings, to learn their
  difference with Epochal's two-round summaries (``epochal.mtrack.reconcile``). Every trial
  checks that the difference found is exactly the ``d`` ids drawn (``check_difference``): a
  benchmark that computed a wrong answer would fail, not report a small figure.
- ``merkle_repair_bytes``: a model of classic (Cassandra) repair of the same divergence (see its
  docstring): both replicas send a Merkle tree of the range, then every partition in a leaf
  whose hashes differ is streamed.

The summary figure is the cost of learning the difference; shipping the ``d`` missing mutations
afterwards costs ``d * mutation_bytes`` more, whatever found them. The Merkle figure includes its
streaming, because over-streaming whole partitions is where that scheme spends its bytes.

The ids (``replica_ids``): the range's writes are coordinated by 3 nodes (1..3), a node drawn at
random per write, each with one log (log 1: a coordinator keeps one log per range it coordinates
for, and this is one range). Sequences are consecutive per log from 1. Each node's HLC is a real
``HybridClock`` ticked by a simulated wall clock that moves 1 ms every ``WRITES_PER_MS`` writes on
average, so writes share milliseconds and the logical part counts them. Building 1,000,000 ids
takes about 3 s, so they are built once per ``(n, seed)`` and each trial only draws the missing.

Medians are ``median_low``: a byte count that some trial actually sent.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from itertools import chain, pairwise
from statistics import median_low

from epochal.mtrack import Difference, HybridClock, MutationId, reconcile

__all__ = [
    "DIFFERENCES",
    "MIN_FULL_TRIALS",
    "SEED",
    "SIZES",
    "Workload",
    "check_difference",
    "merkle_repair_bytes",
    "model_figures",
    "replica_ids",
    "summary_bytes",
]

SIZES = (10_000, 100_000, 1_000_000)  # n: mutations of the range on replica A
DIFFERENCES = (0, 10, 1000)  # d: of them, missing on replica B
MIN_FULL_TRIALS = 20  # the minimum for a full (not --quick) run
SEED = 20_240_501

NODES = (1, 2, 3)
LOG = 1
START_MS = 1_700_000_000_000
WRITES_PER_MS = 3

# Cassandra 4's MerkleTree.serialize (Murmur3Partitioner), in bytes.
HASH_BYTES = 32  # MerkleTree.HASH_SIZE: two Murmur3-128 digests
TOKEN_BYTES = 4 + 8  # Token.serializer: an int length, then the long token
TREE_HEADER_BYTES = 1 + 8 + 8 + (2 + 43) + 2 * TOKEN_BYTES  # depth, maxsize, size, partitioner
INNER_NODE_BYTES = 1 + TOKEN_BYTES  # tag, midpoint token (inner hashes are not sent)
LEAF_BYTES = 1 + 1 + HASH_BYTES  # tag, hash length, hash
EMPTY_LEAF_BYTES = 1 + 1  # tag, hash length 0: a leaf no partition hashed to
MAX_MERKLE_DEPTH = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """The data behind the Merkle model (the summaries depend on the ids alone).

    ``partition_bytes`` is ``None`` by default: each partition is then as big as the mutations
    written to it, ``mutations in it * mutation_bytes``, from the ``n`` mutations each trial
    spreads over ``partitions_per_range`` partitions. The replicas then hold exactly the data the
    ids describe, so both schemes repair the same divergence; with the defaults a partition
    holds 0.1 (n = 10,000) to 10 (n = 1,000,000) mutations on average. A number instead makes
    every partition that big: partitions that also hold older data, below the summaries' low
    bound.
    """

    mutation_bytes: int = 100
    partitions_per_range: int = 100_000
    partition_bytes: int | None = None
    merkle_depth: int = 15

    def __post_init__(self) -> None:
        if self.mutation_bytes < 1 or self.partitions_per_range < 1:
            raise ValueError("mutation_bytes and partitions_per_range must be >= 1")
        if self.partition_bytes is not None and self.partition_bytes < 1:
            raise ValueError(f"partition_bytes must be >= 1, got {self.partition_bytes}")
        if not 1 <= self.merkle_depth <= MAX_MERKLE_DEPTH:
            raise ValueError(f"merkle_depth must be in 1..{MAX_MERKLE_DEPTH}")

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)

    def size_of(self, mutations: int) -> int:
        """The bytes of a partition that ``mutations`` of the range were written to."""
        if self.partition_bytes is not None:
            return self.partition_bytes
        return mutations * self.mutation_bytes


# ---------------------------------------------------------------- summaries


@lru_cache(maxsize=1)  # one n at a time: model_figures goes through the sizes in order
def replica_ids(n: int, seed: int) -> tuple[MutationId, ...]:
    """The ``n`` ids replica A holds, in the order they were written (module docstring)."""
    rng = random.Random(f"ids/{seed}/{n}")
    clocks = {node: HybridClock(max_skew_ms=500, reserve_ms=1_000) for node in NODES}
    last_sequence = dict.fromkeys(NODES, 0)
    now_ms = START_MS
    ids = []
    for _ in range(n):
        if rng.randrange(WRITES_PER_MS) == 0:
            now_ms += 1
        node = rng.choice(NODES)
        last_sequence[node] += 1
        hlc = clocks[node].tick(now_ms).hlc
        ids.append(MutationId(node=node, log=LOG, sequence=last_sequence[node], hlc=hlc))
    return tuple(ids)


def check_difference(found: Difference, missing: Iterable[MutationId]) -> None:
    """Raise ``AssertionError`` unless ``found`` is exactly: ``missing`` only on A, none only
    on B. An explicit raise, not ``assert``: it must hold under ``python -O`` too."""
    expected = frozenset(missing)
    if found.only_a != expected or found.only_b:
        raise AssertionError(
            f"wrong difference: {len(found.only_a)} ids only on A "
            f"({len(found.only_a - expected)} of them not missing, "
            f"{len(expected - found.only_a)} missing ids not found), "
            f"{len(found.only_b)} only on B, expected {len(expected)} only on A"
        )


def summary_bytes(n: int, d: int, *, trials: int, seed: int) -> int:
    """Median over ``trials`` of the bytes A and B send to learn that B lacks ``d`` of A's
    ``n`` ids, each trial checked with ``check_difference``."""
    _check_sizes(n, d, trials)
    ids = replica_ids(n, seed)
    rng = random.Random(f"summary/{seed}/{n}/{d}")
    sent = []
    # With nothing to draw, every trial is the same computation on the same ids: run it once.
    for trial in range(trials if d else 1):
        gone = sorted(rng.sample(range(n), d))
        found, bytes_exchanged, _ = reconcile(ids, _without(ids, gone))
        try:
            check_difference(found, (ids[index] for index in gone))
        except AssertionError as error:
            error.add_note(
                f"replay: summary_bytes({n}, {d}, trials={trials}, seed={seed}), trial {trial}"
            )
            raise
        sent.append(bytes_exchanged)
    return median_low(sent)


def _without(ids: Sequence[MutationId], gone: Sequence[int]) -> Iterator[MutationId]:
    """``ids`` without the (sorted) indexes ``gone``, by slices: no hashing of 1M ids."""
    bounds = pairwise((-1, *gone, len(ids)))
    return chain.from_iterable(ids[start + 1 : stop] for start, stop in bounds)


# ---------------------------------------------------------------- Merkle repair


def merkle_repair_bytes(n: int, d: int, *, trials: int, seed: int, workload: Workload) -> int:
    """Median over ``trials`` of the bytes a classic (Cassandra) repair sends for B lacking
    ``d`` of A's ``n`` mutations.

    Per trial, each mutation goes to a partition drawn uniformly from
    ``workload.partitions_per_range``, and each partition to one of the ``2**merkle_depth``
    leaves drawn uniformly (its Murmur3 token is uniform over the range). Both replicas send
    their whole tree, as Cassandra 4's ``MerkleTree.serialize`` writes it: an 86-byte header,
    13 bytes per inner node (tag, length-prefixed 8-byte token; inner hashes are XORs of the
    children and not sent), 34 bytes per leaf (tag, length, a 32-byte hash: two Murmur3-128
    digests, SHA-256 sized) and 2 bytes per leaf no partition hashes to. A leaf holding a
    partition with a missing mutation differs (a collision of 32-byte hashes is ignored), and
    every partition in it is streamed once, from A, at its size on A (``Workload.size_of``).
    Cassandra streams a differing range both ways and frames the data it streams: the
    streaming part is a lower bound of what it sends.
    """
    _check_sizes(n, d, trials)
    rng = random.Random(f"merkle/{seed}/{n}/{d}")
    return median_low(_merkle_trial_bytes(n, d, workload, rng) for _ in range(trials))


def _merkle_trial_bytes(n: int, d: int, workload: Workload, rng: random.Random) -> int:
    partition_of = rng.choices(range(workload.partitions_per_range), k=n)
    held_a = Counter(partition_of)  # mutations per partition; B lacks some and maybe partitions
    held_b = held_a - Counter(partition_of[index] for index in rng.sample(range(n), d))
    leaves = 2**workload.merkle_depth
    leaf_of = {partition: rng.randrange(leaves) for partition in held_a}
    differing = {
        leaf_of[partition] for partition in held_a if held_a[partition] != held_b[partition]
    }
    streamed = sum(
        workload.size_of(mutations)
        for partition, mutations in held_a.items()
        if leaf_of[partition] in differing
    )
    trees = sum(
        _tree_bytes(len({leaf_of[partition] for partition in held}), workload.merkle_depth)
        for held in (held_a, held_b)
    )
    return trees + streamed


def _tree_bytes(filled_leaves: int, depth: int) -> int:
    """A serialized tree split to ``depth`` with ``filled_leaves`` leaves holding data."""
    leaves = 2**depth
    assert 0 <= filled_leaves <= leaves
    return (
        TREE_HEADER_BYTES
        + (leaves - 1) * INNER_NODE_BYTES
        + filled_leaves * LEAF_BYTES
        + (leaves - filled_leaves) * EMPTY_LEAF_BYTES
    )


# ---------------------------------------------------------------- figures


def model_figures(*, quick: bool, trials: int) -> dict[str, int]:
    """``summary_bytes_n{N}_d{D}`` and ``merkle_repair_bytes_n{N}_d{D}`` for every N in
    ``SIZES`` and D in ``DIFFERENCES``, each a median of ``trials`` trials. A full run needs
    at least ``MIN_FULL_TRIALS``; a quick one (``--quick``) any number, every key still.

    Nearly all the time goes to ``reconcile`` at n = 1,000,000 (about 4 s at d = 0, run once,
    and 8-9 s per trial at d = 10 and 1000, on a shared 2-cpu machine): 20 trials took 552 s,
    1 trial 27 s and 5 trials 136 s."""
    if trials < (1 if quick else MIN_FULL_TRIALS):
        raise ValueError(f"a {'quick' if quick else 'full'} run needs more than {trials} trials")
    workload = Workload()
    figures = {}
    for n in SIZES:
        for d in DIFFERENCES:
            figures[f"summary_bytes_n{n}_d{d}"] = summary_bytes(n, d, trials=trials, seed=SEED)
            figures[f"merkle_repair_bytes_n{n}_d{d}"] = merkle_repair_bytes(
                n, d, trials=trials, seed=SEED, workload=workload
            )
    return figures


def _check_sizes(n: int, d: int, trials: int) -> None:
    if n < 1 or not 0 <= d <= n or trials < 1:
        raise ValueError(f"need n >= 1, 0 <= d <= n and trials >= 1, got {n=} {d=} {trials=}")
