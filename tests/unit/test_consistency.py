"""Consistency levels against their naive definitions, exhaustively over small groups.

Every group of 1..7 replicas spread over two datacenters, every subset of it answering (plus a
node outside the group, whose answer never counts), every level, from either datacenter:
``satisfied`` must equal the definition written the long way below.
"""

from __future__ import annotations

import itertools

import pytest

from epochal.tcm.consistency import (
    Consistency,
    counted,
    replication_factor,
    required,
    satisfied,
)
from epochal.tcm.schema import ReplicationParams

DATACENTERS = ("dc1", "dc2")
OUTSIDER = "outsider"


def naive_satisfied(
    level: Consistency,
    group: list[str],
    answered: set[str],
    datacenters: dict[str, str],
    local: str,
) -> bool:
    if level is Consistency.LOCAL_QUORUM:
        voters = [n for n in group if datacenters[n] == local]
    else:
        voters = list(group)
    yes = sum(1 for n in voters if n in answered)
    if not voters:
        return False  # nobody can count: unsatisfiable, whatever answered
    if level is Consistency.ONE:
        return yes >= 1
    if level is Consistency.ALL:
        return yes == len(voters)
    return 2 * yes > len(voters)  # a strict majority


def _cases(size: int):
    group = [f"n{i}" for i in range(size)]
    for placement in itertools.product(DATACENTERS, repeat=size):
        datacenters = dict(zip(group, placement, strict=True)) | {OUTSIDER: "dc1"}
        for mask in range(1 << size):
            answered = {n for i, n in enumerate(group) if mask >> i & 1} | {OUTSIDER}
            yield group, answered, datacenters


@pytest.mark.parametrize("size", range(1, 8))
def test_satisfied_equals_the_naive_definition_for_every_group_answer_and_level(size):
    checked = 0
    for group, answered, datacenters in _cases(size):
        for level in Consistency:
            for local in DATACENTERS:
                expected = naive_satisfied(level, group, answered, datacenters, local)
                got = satisfied(level, group, answered, datacenters, local)
                assert got == expected, (level, group, sorted(answered), datacenters, local)
                checked += 1
    assert checked == 8 * 4**size


@pytest.mark.parametrize(
    ("level", "needed"),
    [
        (Consistency.ONE, [1, 1, 1, 1, 1, 1, 1]),
        (Consistency.QUORUM, [1, 2, 2, 3, 3, 4, 4]),
        (Consistency.LOCAL_QUORUM, [1, 2, 2, 3, 3, 4, 4]),
        (Consistency.ALL, [1, 2, 3, 4, 5, 6, 7]),
    ],
)
def test_required_answers_by_level_and_counted_size(level, needed):
    assert [required(level, [f"n{i}" for i in range(size)]) for size in range(1, 8)] == needed


def test_local_quorum_counts_only_the_local_datacenter_and_quorum_counts_everyone():
    group = ["a1", "a2", "b1", "b2", "b3"]
    datacenters = {"a1": "dc1", "a2": "dc1", "b1": "dc2", "b2": "dc2", "b3": "dc2"}
    assert counted(Consistency.LOCAL_QUORUM, group, datacenters, "dc1") == {"a1", "a2"}
    assert counted(Consistency.QUORUM, group, datacenters, "dc1") == set(group)
    # Both local replicas answer: a local quorum, but 2 of 5 is not a quorum.
    assert satisfied(Consistency.LOCAL_QUORUM, group, {"a1", "a2"}, datacenters, "dc1")
    assert not satisfied(Consistency.QUORUM, group, {"a1", "a2"}, datacenters, "dc1")
    # All three remote replicas answer: a quorum, but no local quorum.
    assert satisfied(Consistency.QUORUM, group, {"b1", "b2", "b3"}, datacenters, "dc1")
    assert not satisfied(Consistency.LOCAL_QUORUM, group, {"b1", "b2", "b3"}, datacenters, "dc1")


def test_no_group_member_in_the_local_datacenter_makes_local_quorum_unsatisfiable():
    group = ["b1", "b2", "b3"]
    datacenters = dict.fromkeys(group, "dc2")
    counting = counted(Consistency.LOCAL_QUORUM, group, datacenters, "dc1")
    assert counting == frozenset()
    assert required(Consistency.LOCAL_QUORUM, counting) == 0
    assert not satisfied(Consistency.LOCAL_QUORUM, group, set(group), datacenters, "dc1")
    # A member whose datacenter is unknown is not local either.
    assert not satisfied(Consistency.LOCAL_QUORUM, ["x"], {"x"}, {}, "dc1")


@pytest.mark.parametrize("level", list(Consistency))
def test_an_empty_group_is_unsatisfiable_at_every_level(level):
    assert required(level, []) == 0
    assert not satisfied(level, [], {"anyone"}, {"anyone": "dc1"}, "dc1")


@pytest.mark.parametrize(
    ("level", "factor", "needed"),
    [
        # A keyspace with RF 3 on one node (created before more joined), as in Cassandra.
        (Consistency.ONE, 3, [1, 1, 1]),
        (Consistency.QUORUM, 3, [2, 2, 2]),
        (Consistency.ALL, 3, [3, 3, 3]),
        # RF 5 with 1..3 replicas: a majority of 5 whatever exists.
        (Consistency.QUORUM, 5, [3, 3, 3]),
        # Factor 0 (none given) or below the group's size: the group decides.
        (Consistency.QUORUM, 0, [1, 2, 2]),
        (Consistency.QUORUM, 1, [1, 2, 2]),
    ],
)
def test_replicas_missing_below_the_replication_factor_count_as_not_answering(
    level, factor, needed
):
    assert [required(level, [f"n{i}" for i in range(size)], factor) for size in (1, 2, 3)] == (
        needed
    )
    # One node answering for RF 3: only ONE is met.
    assert satisfied(level, ["n0"], {"n0"}, {"n0": "dc1"}, "dc1", factor) == (needed[0] <= 1)


def test_the_factor_a_level_counts_against():
    simple = ReplicationParams.simple(3)
    network = ReplicationParams.network_topology({"dc1": 3, "dc2": 2})
    assert replication_factor(Consistency.QUORUM, simple, "dc1") == 3
    assert replication_factor(Consistency.LOCAL_QUORUM, simple, "dc1") == 0  # no floor
    assert replication_factor(Consistency.QUORUM, network, "dc1") == 5
    assert replication_factor(Consistency.LOCAL_QUORUM, network, "dc2") == 2
    assert replication_factor(Consistency.LOCAL_QUORUM, network, "dc3") == 0
