"""Token-aware routing (epochal.routing): a write goes to its token's write group and a read to
its read group, as the client's metadata places them — mid-join those differ — in turn; with no
placement, to any known replica; a pinned request to its coordinator only."""

from __future__ import annotations

from epochal.routing import Router
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
