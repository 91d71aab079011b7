"""Claims of mutation ids and of per-log sequence allocation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.mtrack import MutationId, SequenceBlock, make_hlc

U32 = st.integers(1, 2**32 - 1)
I64 = st.integers(1, 2**63 - 1)  # sequences and HLCs are stored as signed 64-bit integers
mutation_ids = st.builds(MutationId, node=U32, log=U32, sequence=I64, hlc=st.integers(0, 2**63 - 1))


@given(mutation_ids)
def test_pack_round_trips_in_24_bytes(mutation_id):
    packed = mutation_id.pack()
    assert len(packed) == 24
    assert MutationId.unpack(packed) == mutation_id


@given(mutation_ids, mutation_ids)
def test_packed_identity_bytes_sort_like_the_identity(a, b):
    assert (a.pack()[:16] < b.pack()[:16]) == (a.key < b.key)
    assert (a < b) == (a.key < b.key) or a.key == b.key


def test_identity_keys_and_text():
    mutation_id = MutationId(node=3, log=7, sequence=42, hlc=make_hlc(1_700_000_000_000, 2))
    assert mutation_id.key == (3, 7, 42)
    assert mutation_id.log_key == (3, 7)
    assert str(mutation_id) == "node-3/L7#42@2023-11-14T22:13:20.000Z+2"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("node", 0),
        ("node", 2**32),
        ("log", 0),
        ("log", 2**32),
        ("sequence", 0),
        ("sequence", 2**63),
        ("hlc", -1),
        ("hlc", 2**63),
    ],
)
def test_out_of_range_fields_are_refused_by_name(field, value):
    fields = {"node": 1, "log": 1, "sequence": 1, "hlc": 0} | {field: value}
    with pytest.raises(ValueError, match=f"mutation id {field} must be in"):
        MutationId(**fields)


def test_unpack_refuses_the_wrong_length():
    with pytest.raises(ValueError, match="24 bytes"):
        MutationId.unpack(b"\x00" * 23)


def test_a_fresh_log_hands_out_dense_sequences_from_one():
    block = SequenceBlock(block_size=4)
    allocations = [block.allocate() for _ in range(9)]
    assert [sequence for sequence, _ in allocations] == list(range(1, 10))
    assert [ceiling for _, ceiling in allocations] == [5, None, None, None, 9, None, None, None, 13]


@settings(max_examples=200, deadline=None)
@given(
    block_size=st.integers(1, 50),
    runs=st.lists(st.integers(0, 200), min_size=1, max_size=5),
)
def test_sequences_are_below_the_durable_ceiling_and_never_reused_across_restarts(block_size, runs):
    disk_ceiling = 0
    used: list[int] = []
    for allocations in runs:  # each run ends in a crash; the next starts from the disk
        block = SequenceBlock(block_size=block_size, ceiling=disk_ceiling)
        for _ in range(allocations):
            sequence, persist_ceiling = block.allocate()
            if persist_ceiling is not None:
                disk_ceiling = persist_ceiling  # durable before the sequence is used
            assert sequence < disk_ceiling
            assert sequence > max(used, default=0)
            used.append(sequence)
    assert used[: runs[0]] == list(range(1, runs[0] + 1))  # dense within one run


def test_block_size_is_checked():
    with pytest.raises(ValueError, match="block_size"):
        SequenceBlock(block_size=0)
