"""``ClusterMetadata.replica_group``: a token's write (or read) group is the group of the one
range of the keyspace's placement that contains it — checked against ``Placement.ranges()``
searched naively, at every step of a join (where read and write groups differ), for tokens at,
beside and between the split points, and for any token."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochal.tcm import MAX_TOKEN, MIN_TOKEN, ClusterMetadata, ReplicationParams
from epochal.tcm.tokens import TokenRange

from .seed_ring import JOIN_STEPS, Cluster, ring

RF1 = ReplicationParams.simple(1)
RF2 = ReplicationParams.simple(2)
KEYSPACES = {"one": RF1, "two": RF2}


def steps_of_a_join() -> list[ClusterMetadata]:
    """A ring of nodes at 0, 100, 200 and 300, then a fifth node joining at 150: the state
    after each of PREPARE, START, MID and FINISH."""
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0}, Cluster(KEYSPACES))
    cluster.join("X", 150)
    return cluster.history[-1 - len(JOIN_STEPS) :]


STATES = steps_of_a_join()


def naive_group(
    metadata: ClusterMetadata, keyspace: str, token: int, *, write: bool
) -> frozenset[str]:
    placement = metadata.placements[KEYSPACES[keyspace]]
    [group] = [
        writes if write else reads
        for token_range, reads, writes in placement.ranges()
        if token_range.contains(token)
    ]
    return group


def interesting_tokens(metadata: ClusterMetadata) -> set[int]:
    tokens = {MIN_TOKEN + 1, MAX_TOKEN, -1, 1}
    for placement in metadata.placements.values():
        for point in placement.points:
            tokens |= {point - 1, point, point + 1}
    return tokens


def test_the_join_makes_read_and_write_groups_differ_so_both_are_exercised() -> None:
    start = STATES[1].placements[RF2]
    assert any(r != w for r, w in zip(start.reads, start.writes, strict=True))


def test_the_group_is_the_one_of_the_range_containing_the_token_at_every_step() -> None:
    for metadata in STATES:
        for keyspace in KEYSPACES:
            for token in interesting_tokens(metadata):
                for write in (True, False):
                    assert metadata.replica_group(keyspace, token, write=write) == naive_group(
                        metadata, keyspace, token, write=write
                    ), (metadata.epoch, keyspace, token, write)


@given(st.integers(MIN_TOKEN + 1, MAX_TOKEN), st.sampled_from(STATES), st.booleans())
def test_any_token_at_any_step(token: int, metadata: ClusterMetadata, write: bool) -> None:
    for keyspace in KEYSPACES:
        expected = naive_group(metadata, keyspace, token, write=write)
        assert metadata.replica_group(keyspace, token, write=write) == expected


def test_the_range_owned_by_150_during_the_join() -> None:
    """(100, 150] at START: read {B,C} (node-2, node-3), write {B,C,X} (X is node-5)."""
    start = STATES[1]
    assert start.replica_group("two", 120, write=False) == {"node-2", "node-3"}
    assert start.replica_group("two", 120, write=True) == {"node-2", "node-3", "node-5"}


def test_no_group_for_an_unknown_keyspace_or_a_ring_without_tokens() -> None:
    assert STATES[0].replica_group("missing", 0, write=True) == frozenset()
    empty_ring = Cluster({"two": RF2}).md
    assert empty_ring.replica_group("two", 0, write=False) == frozenset()


def test_the_token_range_is_the_placement_range_holding_the_token_at_every_step() -> None:
    for metadata in STATES:
        for keyspace in KEYSPACES:
            placement = metadata.placements[KEYSPACES[keyspace]]
            for token in interesting_tokens(metadata):
                [holding] = [r for r, _, _ in placement.ranges() if r.contains(token)]
                assert metadata.token_range(keyspace, token) == holding
    assert STATES[0].token_range("missing", 0) is None
    assert Cluster({"two": RF2}).md.token_range("two", 0) is None
    one = ring({"A": 100}, Cluster({"two": RF2})).md
    assert one.token_range("two", -5) == one.token_range("two", 500) == TokenRange(100, 100)
