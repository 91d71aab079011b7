"""Token-aware routing (epochal.routing): a write goes to its token's write group and a read to
its read group, as the client's metadata places them — mid-join those differ — in turn; with no
placement, to any known replica; a pinned request to its coordinator only."""

from __future__ import annotations

import pytest

from epochal.errors import Unavailable
from epochal.routing import Route, Router
from epochal.tcm import ClusterMetadata, Step

from .seed_ring import SEED_TOKENS, Cluster
from .seed_ring import ring as seed_ring

FALLBACK = ["seed:9000"]


def ring(tokens: dict[str, int] | None = None) -> ClusterMetadata:
    """Nodes addressed by their names, each joined at one token; keyspace ks at RF 2."""
    return seed_ring(SEED_TOKENS if tokens is None else tokens, Cluster(address="{name}")).md


def joining_x_at_150() -> ClusterMetadata:
    """The seed's bootstrap of X at 150 after its START: X is in the write group of (100, 150]
    but not yet in its read group."""
    cluster = seed_ring(SEED_TOKENS, Cluster(address="{name}"))
    cluster.join("X", 150, steps=(Step.START,))
    return cluster.md


def test_a_write_goes_to_the_write_group_and_a_read_to_the_read_group() -> None:
    metadata = joining_x_at_150()
    router = Router()
    writes = router.candidates(metadata, "ks", 120, write=True, fallback=FALLBACK)
    reads = router.candidates(metadata, "ks", 120, write=False, fallback=FALLBACK)
    assert sorted(writes) == ["B", "C", "X"]
    assert sorted(reads) == ["B", "C"]


def test_requests_take_turns_over_the_group() -> None:
    metadata = ring()
    router = Router()
    firsts = [
        router.candidates(metadata, "ks", 250, write=False, fallback=FALLBACK) for _ in range(4)
    ]
    assert firsts == [["C", "D"], ["D", "C"], ["C", "D"], ["D", "C"]]  # (200, 300]: C, then D


def test_the_token_picks_the_range() -> None:
    metadata = ring()
    router = Router()
    owners = {
        token: sorted(router.candidates(metadata, "ks", token, write=True, fallback=FALLBACK))
        for token in (-5, 0, 1, 100, 101, 300, 301)
    }
    assert owners == {
        -5: ["A", "D"],  # (300, 0] wraps around
        0: ["A", "D"],
        1: ["A", "B"],
        100: ["A", "B"],
        101: ["B", "C"],
        300: ["C", "D"],  # (200, 300]: a range holds its upper token
        301: ["A", "D"],
    }


def test_a_group_follows_the_metadata_it_is_asked_with() -> None:
    router = Router()
    before = ring()
    assert sorted(router.candidates(before, "ks", 120, write=True, fallback=FALLBACK)) == [
        "B",
        "C",
    ]
    after = joining_x_at_150()
    assert sorted(router.candidates(after, "ks", 120, write=True, fallback=FALLBACK)) == [
        "B",
        "C",
        "X",
    ]


def test_with_no_placement_any_known_replica_will_do() -> None:
    router = Router()
    no_tokens = ring({})
    fallback = ["r1:9000", "r2:9000"]
    assert sorted(router.candidates(no_tokens, "ks", 7, write=True, fallback=fallback)) == sorted(
        fallback
    )
    unknown = ring()
    assert sorted(router.candidates(unknown, "nope", 7, write=False, fallback=fallback)) == sorted(
        fallback
    )


def test_a_pinned_request_goes_to_its_coordinator_only() -> None:
    metadata = ring()
    router = Router()
    for _ in range(3):
        assert router.candidates(
            metadata, "ks", 120, write=True, fallback=FALLBACK, pinned="Z"
        ) == ["Z"]


# ---------------------------------------------------------------------- datacenters, suspects


def two_datacenters() -> ClusterMetadata:
    """A and C in dc1, B and D in dc2; ks at RF 2 (SimpleStrategy): (100, 200] is on B, C."""
    cluster = Cluster(
        address="{name}", datacenters={"A": "dc1", "C": "dc1", "B": "dc2", "D": "dc2"}
    )
    return seed_ring(SEED_TOKENS, cluster).md


def test_a_local_datacenter_keeps_coordinators_in_it() -> None:
    metadata = two_datacenters()
    router = Router()
    local = Route(local_dc="dc1")
    for _ in range(4):
        assert router.candidates(
            metadata, "ks", 150, write=True, fallback=FALLBACK, route=local
        ) == ["C"]
    # (0, 100] is on A (dc1) and B (dc2): no other; (300, 0] on D and A.
    assert router.candidates(metadata, "ks", 50, write=False, fallback=FALLBACK, route=local) == [
        "A"
    ]


def test_a_token_with_no_local_replica_is_coordinated_by_any_local_node() -> None:
    # A, B in dc1 and C, D in dc2: (0, 100] is on A and B only.
    cluster = Cluster(
        address="{name}", datacenters={"A": "dc1", "B": "dc1", "C": "dc2", "D": "dc2"}
    )
    metadata = seed_ring(SEED_TOKENS, cluster).md
    router = Router()
    assert router.replicas(metadata, "ks", 50, write=True, datacenter="dc2") == []
    dc2 = Route(local_dc="dc2")
    seen = {
        tuple(router.candidates(metadata, "ks", 50, write=True, fallback=FALLBACK, route=dc2))
        for _ in range(2)
    }
    assert seen == {("C", "D"), ("D", "C")}
    with pytest.raises(Unavailable, match="no replica in datacenter dc3"):
        router.candidates(
            metadata, "ks", 50, write=True, fallback=FALLBACK, route=Route(local_dc="dc3")
        )


def test_another_datacenter_is_used_only_when_allowed_and_after_the_local_one() -> None:
    metadata = two_datacenters()
    router = Router()
    remote_too = Route(local_dc="dc1", allow_remote_dc=True)
    assert router.candidates(
        metadata, "ks", 150, write=True, fallback=FALLBACK, route=remote_too
    ) == ["C", "B"]
    nowhere = Route(local_dc="dc3", allow_remote_dc=True)  # no node there: the others
    assert sorted(
        router.candidates(metadata, "ks", 150, write=True, fallback=FALLBACK, route=nowhere)
    ) == ["B", "C"]


def test_without_token_awareness_any_joined_replica_coordinates() -> None:
    metadata = two_datacenters()
    router = Router()
    blind = Route(token_aware=False, local_dc="dc2")
    seen = {
        tuple(router.candidates(metadata, "ks", 150, write=True, fallback=FALLBACK, route=blind))
        for _ in range(2)
    }
    assert seen == {("B", "D"), ("D", "B")}


def test_suspects_go_last() -> None:
    metadata = ring()
    router = Router()
    for _ in range(3):
        order = router.candidates(
            metadata, "ks", 250, write=False, fallback=FALLBACK, suspected={"C"}
        )
        assert order == ["D", "C"]
