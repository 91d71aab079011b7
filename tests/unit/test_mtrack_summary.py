"""Claims of the two-round summaries, each checked against a naive set difference."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from epochal.mtrack import (
    MAX_CELLS,
    Difference,
    HybridClock,
    LogDigests,
    LowBoundMismatch,
    MalformedSummary,
    MutationId,
    SequenceBlock,
    Sketch,
    Undecodable,
    cells_for,
    difference,
    differing_logs,
    reconcile,
)

START_MS = 1_700_000_000_000
TOKENS = 2**64
SEALED_LOG, LOWER_LOG, UPPER_LOG = 1, 2, 3


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """Mutations of a range split once: ``log 1`` is sealed at ``split_index``, then each
    coordinator writes ``log 2`` below ``boundary`` and ``log 3`` above it."""

    tokens: dict[MutationId, int]
    boundary: int

    def halves(self, ids: set[MutationId]) -> tuple[set[MutationId], set[MutationId]]:
        lower = {i for i in ids if self.tokens[i] < self.boundary}
        return lower, ids - lower


def make_history(
    rng: random.Random, *, nodes: int, mutations: int, split_index: int, boundary: int
) -> History:
    clocks = {node: HybridClock(max_skew_ms=500, reserve_ms=1_000) for node in range(1, nodes + 1)}
    sequences: dict[tuple[int, int], SequenceBlock] = {}
    now_ms = START_MS
    tokens: dict[MutationId, int] = {}
    for index in range(mutations):
        now_ms += rng.choice((0, 0, 1))  # several writes a millisecond
        node, token = rng.randint(1, nodes), rng.randrange(TOKENS)
        log = SEALED_LOG if index < split_index else LOWER_LOG if token < boundary else UPPER_LOG
        block = sequences.setdefault((node, log), SequenceBlock(block_size=100))
        sequence, _ = block.allocate()
        hlc = clocks[node].tick(now_ms).hlc
        tokens[MutationId(node=node, log=log, sequence=sequence, hlc=hlc)] = token
    return History(tokens=tokens, boundary=boundary)


def naive(a: set[MutationId], b: set[MutationId]) -> Difference:
    return Difference(only_a=frozenset(a - b), only_b=frozenset(b - a))


def build(ids: set[MutationId], cells: int) -> tuple[LogDigests, Sketch]:
    return LogDigests.of(ids), Sketch.of(ids, cells)


def _bucket(size: int) -> str:
    return (
        "0"
        if size == 0
        else "1"
        if size == 1
        else "2-9"
        if size < 10
        else "10-199"
        if size < 200
        else "200"
    )


difference_sizes = st.one_of(st.sampled_from([0, 1, 10, 200]), st.integers(0, 30))


@st.composite
def replica_pairs(draw):
    """Two replicas of a split range: holes, ids only on A, ids only on B, a low bound."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    mutations = draw(st.one_of(st.integers(0, 40), st.integers(300, 1_500)))
    history = make_history(
        rng,
        nodes=draw(st.integers(1, 4)),
        mutations=mutations,
        split_index=draw(st.integers(0, mutations)),
        boundary=rng.randrange(TOKENS),
    )
    ids = sorted(history.tokens)
    rng.shuffle(ids)
    only_a = draw(difference_sizes)
    only_b = 0 if draw(st.booleans()) else draw(difference_sizes)  # one-sided or two-sided
    holes = draw(st.integers(0, 3))  # reached no replica
    common = set(ids[only_a + only_b + holes :])
    a = common | set(ids[:only_a])
    b = common | set(ids[only_a : only_a + only_b])
    low_bound = rng.choice([0, 0, *[i.hlc for i in ids[:5]]])
    event(f"only on A: {_bucket(len(a - b))}, only on B: {_bucket(len(b - a))}")
    return history, a, b, low_bound


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replica_pairs())
def test_reconcile_finds_exactly_the_naive_difference_per_sub_range(pair):
    history, a, b, low_bound = pair
    for half_a, half_b in zip(history.halves(a), history.halves(b), strict=True):
        found, _, rounds = reconcile(half_a, half_b, low_bound=low_bound)
        above = {i for i in half_a | half_b if i.hlc >= low_bound}
        assert found == naive(half_a & above, half_b & above)
        assert rounds == 1 or found != Difference()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replica_pairs(), st.integers(1, 120))
def test_a_successful_difference_is_always_the_naive_one(pair, thirds):
    """With cells chosen at random (often far too few), decoding either fails or is exact."""
    _, a, b, _ = pair
    cells = 3 * thirds
    digests_a, sketch_a = build(a, cells)
    digests_b, sketch_b = build(b, cells)
    try:
        found = difference(digests_a, sketch_a, digests_b, sketch_b)
    except Undecodable:
        event("undecodable")
        return
    event("decoded")
    assert found == naive(a, b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replica_pairs(), st.data())
def test_a_corrupted_sketch_never_yields_a_wrong_answer(pair, data):
    _, a, b, _ = pair
    digests_a, digests_b = LogDigests.of(a), LogDigests.of(b)
    estimates = differing_logs(digests_a, digests_b)
    assume(estimates)
    cells = cells_for(sum(estimates.values()))
    encoded = bytearray(Sketch.of([i for i in a if i.log_key in estimates], cells).encode())
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    sketch_b = Sketch.of([i for i in b if i.log_key in estimates], cells)
    try:
        found = difference(digests_a, Sketch.decode(bytes(encoded)), digests_b, sketch_b)
    except (MalformedSummary, Undecodable) as error:
        event(type(error).__name__)
        return
    event("decoded despite the damage")
    assert found == naive(a, b)


def test_headline_100k_mutations_3_coordinators_split_range_10_missing():
    """Two replicas, 100,000 mutations from node-1..3, the range split half-way through the run
    (each coordinator's log sealed at 50,000, then one new log per half), 10 ids missing on B:
    per half-range, both rounds find exactly the missing ids in at most 4 KiB in all."""
    rng = random.Random(20240501)
    history = make_history(
        rng, nodes=3, mutations=100_000, split_index=50_000, boundary=TOKENS // 2
    )
    a = set(history.tokens)
    missing = set(rng.sample(sorted(a), 10))
    b = a - missing
    total_bytes = 0
    found_only_a: set[MutationId] = set()
    for half_a, half_b in zip(history.halves(a), history.halves(b), strict=True):
        assert {i.log for i in half_a} in ({SEALED_LOG, LOWER_LOG}, {SEALED_LOG, UPPER_LOG})
        found, bytes_exchanged, rounds = reconcile(half_a, half_b)
        assert not found.only_b
        found_only_a |= found.only_a
        total_bytes += bytes_exchanged
        print(f"half-range: {len(half_a)} ids, {bytes_exchanged} bytes, {rounds} rounds")
    print(f"headline: 10 of 100,000 missing, {total_bytes} bytes exchanged in all")
    assert found_only_a == a - b
    assert total_bytes <= 4096


def test_equal_sets_differ_in_no_log():
    ids = set(
        make_history(random.Random(1), nodes=2, mutations=50, split_index=20, boundary=0).tokens
    )
    assert differing_logs(LogDigests.of(ids), LogDigests.of(set(ids))) == {}
    found, _, rounds = reconcile(ids, set(ids))
    assert (found, rounds) == (Difference(), 1)


def test_estimates_are_the_count_difference_or_two_when_counts_match():
    x, y, z = (MutationId(node=1, log=log, sequence=1, hlc=0) for log in (1, 2, 3))
    x2 = MutationId(node=1, log=1, sequence=2, hlc=0)
    a = LogDigests.of([x, x2, y])
    b = LogDigests.of([y, z, MutationId(node=1, log=1, sequence=3, hlc=0)])
    assert differing_logs(a, b) == {(1, 1): 1, (1, 3): 1}
    assert differing_logs(LogDigests.of([x]), LogDigests.of([x2])) == {(1, 1): 2}


def test_different_low_bounds_ask_again_with_the_larger():
    with pytest.raises(LowBoundMismatch) as raised:
        differing_logs(LogDigests.of([], low_bound=5), LogDigests.of([], low_bound=9))
    assert raised.value.low_bound == 9


def test_ids_below_the_low_bound_are_refused():
    with pytest.raises(ValueError, match="below the low bound"):
        LogDigests.of([MutationId(node=1, log=1, sequence=1, hlc=4)], low_bound=5)


def test_cells_for_rule_and_cap():
    assert [cells_for(d) for d in (1, 2, 5, 10, 100)] == [12, 15, 21, 30, 210]
    assert cells_for(10**9) == MAX_CELLS
    with pytest.raises(ValueError):
        cells_for(0)


def test_small_sides_are_sent_explicitly_and_escalation_ends_explicit():
    ids = [MutationId(node=1, log=1, sequence=s, hlc=s) for s in range(1, 101)]
    assert Sketch.of(ids[:12], 12).is_explicit
    assert not Sketch.of(ids, 12).is_explicit
    assert Sketch.of(ids, 2 * MAX_CELLS).is_explicit


def test_forced_escalation_from_three_cells_still_ends_exact():
    history = make_history(random.Random(7), nodes=3, mutations=3_000, split_index=0, boundary=0)
    a = set(history.tokens)
    b = set(sorted(a)[40:])
    found, _, rounds = reconcile(a, b, initial_cells=3)
    assert found == naive(a, b)
    assert rounds > 2


def test_a_log_entry_costs_about_13_bytes():
    ids = [MutationId(node=3, log=7, sequence=s, hlc=s) for s in range(1, 50_001)]
    assert LogDigests.of(ids).encoded_size() - LogDigests.of([]).encoded_size() == 13


@st.composite
def encodings(draw):
    ids = set(
        draw(
            st.lists(
                st.builds(
                    MutationId,
                    node=st.integers(1, 3),
                    log=st.integers(1, 3),
                    sequence=st.integers(1, 2**63 - 1),
                    hlc=st.integers(0, 2**63 - 1),
                ),
                max_size=20,
                unique_by=lambda i: i.key,
            )
        )
    )
    cells = 3 * draw(st.integers(1, 8))
    return draw(
        st.sampled_from(
            [
                LogDigests.of(ids),
                LogDigests.of([i for i in ids if i.hlc >= 2**62], low_bound=2**62),
                Sketch.of(ids, cells),
            ]
        )
    )


@given(encodings())
def test_encodings_round_trip(summary):
    assert type(summary).decode(summary.encode()) == summary


def _decodes_canonically_or_is_malformed(data: bytes) -> None:
    for decoder in (LogDigests.decode, Sketch.decode):
        try:
            decoded = decoder(data)
        except MalformedSummary:
            continue
        assert decoded.encode() == data


def test_a_low_bound_past_the_largest_hlc_is_malformed():
    assert LogDigests.decode(LogDigests.of([], low_bound=2**63 - 1).encode()).low_bound == 2**63 - 1
    too_late = bytes([0x80] * 9 + [0x01, 0x00])  # the uvarint of 2^63, then no logs
    with pytest.raises(MalformedSummary, match="low_bound"):
        LogDigests.decode(too_late)


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_decoders_refuse_random_bytes_with_malformed_summary_only(data):
    _decodes_canonically_or_is_malformed(data)
    _decodes_canonically_or_is_malformed(b"\x01" + data)  # an IBLT tag, then garbage


@settings(max_examples=500)
@given(encodings(), st.data())
def test_decoders_refuse_damaged_encodings_with_malformed_summary_only(summary, data):
    encoded = summary.encode()
    damaged = bytearray(encoded[: data.draw(st.integers(0, len(encoded)))])
    if damaged:
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    _decodes_canonically_or_is_malformed(bytes(damaged))


def test_an_explicit_side_decodes_against_a_table_that_sketched_an_agreed_log_too():
    """A comparer sketching for several replicas at once asks each for the union of their
    differing logs, so a pair's sketches may cover a log the two agree on: its ids cancel."""
    common = [MutationId(node=1, log=1, sequence=s, hlc=s) for s in range(1, 6)]
    extra = [MutationId(node=2, log=1, sequence=s, hlc=s) for s in (1, 2)]
    a, b = common + extra, common
    digests_a, digests_b = LogDigests.of(a), LogDigests.of(b)
    assert differing_logs(digests_a, digests_b) == {(2, 1): 2}
    sketch_a, sketch_b = Sketch.of(a, 6), Sketch.of(b, 6)  # both logs sketched
    assert not sketch_a.is_explicit and sketch_b.is_explicit
    found = difference(digests_a, sketch_a, digests_b, sketch_b)
    assert found.only_a == frozenset(extra) and not found.only_b
