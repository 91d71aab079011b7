"""Tokens: Cassandra's Murmur3Partitioner values, ranges that wrap, balanced allocation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.tcm import MAX_TOKEN, MIN_TOKEN, TokenMap, TokenRange, token_of
from epochal.tcm.allocation import allocate_tokens
from epochal.tcm.tokens import union_covers

# Key -> token pairs computed by Cassandra's Murmur3Partitioner (published in the DataStax
# drivers' partitioner tests), covering every tail length and negative (sign-extended) bytes.
CASSANDRA_TOKENS = [
    (b"123", -7468325962851647638),
    (b"\x00\xff\x10\xfa\x99" * 10, 5837342703291459765),
    (b"\xfe" * 8, -8927430733708461935),
    (b"\x10" * 8, 1446172840243228796),
    (b"9223372036854775807", 7162290910810015547),
    (bytes(range(1, 17)), -5563837382979743776),
    (bytes(range(2, 18)), -1513403162740402161),
    (b"\x00" * 16, 5457549051747178710),
    (b"\xff" * 16, -2824192546314762522),
    (b"\xfe" * 17, -1672437813826982685),
    (b"\xfe" * 4, 4566408979886474012),
    (b"\x00" * 4, -3485513579396041028),
    (b"\x00\x01\x7f\x7f", 6573459401642635627),
    (b"\xff\x01\x02\x03", -2839127690952877842),
    (b"\xe2\xe7", -8582699461035929883),
    (b"\xe2\xe7\xe2\xe7\xe2\xe7\x01", 2222373981930033306),
]


@pytest.mark.parametrize(("key", "token"), CASSANDRA_TOKENS)
def test_token_matches_cassandra(key: bytes, token: int) -> None:
    assert token_of(key) == token


def test_ranges_are_half_open_and_wrap_once() -> None:
    plain = TokenRange(100, 200)
    assert not plain.contains(100) and plain.contains(101) and plain.contains(200)
    wrapping = TokenRange(300, 100)
    assert wrapping.wraps
    assert wrapping.contains(MAX_TOKEN) and wrapping.contains(MIN_TOKEN + 1)
    assert wrapping.contains(100) and not wrapping.contains(200) and not wrapping.contains(300)
    whole = TokenRange(5, 5)
    assert all(whole.contains(t) for t in (5, 6, 4, MAX_TOKEN, MIN_TOKEN + 1))
    assert wrapping.intersects(TokenRange(50, 60)) and wrapping.intersects(TokenRange(400, 500))
    assert not wrapping.intersects(TokenRange(100, 300))
    assert not plain.intersects(TokenRange(200, 300)) and plain.intersects(TokenRange(199, 300))


SMALL_RANGES = st.builds(TokenRange, st.integers(-6, 6), st.integers(-6, 6))
# Between and beyond the ends of such ranges: every token whose membership may differ.
PROBES = [*range(-7, 8), MIN_TOKEN + 1, MAX_TOKEN]


@given(st.lists(SMALL_RANGES, max_size=4), SMALL_RANGES)
def test_a_union_covers_a_range_exactly_when_it_holds_each_of_its_tokens(outers, inner) -> None:
    naive = all(any(o.contains(t) for o in outers) for t in PROBES if inner.contains(t))
    assert union_covers(outers, inner) == naive


def _ownership(token_map: TokenMap) -> dict[str, int]:
    tokens, nodes = token_map.ring_tokens, token_map.ring_nodes
    owned: dict[str, int] = {}
    for i, token in enumerate(tokens):
        owned[nodes[i]] = owned.get(nodes[i], 0) + (token - tokens[i - 1]) % (1 << 64)
    return owned


def test_allocated_tokens_keep_ownership_balanced() -> None:
    token_map = TokenMap()
    locations = {}
    for n in range(24):
        node = f"node-{n}"
        locations[node] = ("dc1", "r1")
        token_map = token_map.with_tokens(node, allocate_tokens(token_map, locations, "dc1", 16))
    owned = _ownership(token_map)
    assert len(owned) == 24
    # Halving the largest range keeps every range within a factor 2 of every other, so no node
    # owns more than twice another (Cassandra's allocator does better; see the README).
    assert max(owned.values()) / min(owned.values()) <= 2.0, sorted(owned.values())


def test_allocation_is_per_datacenter_and_never_reuses_a_token() -> None:
    token_map = TokenMap()
    locations = {"a": ("dc1", "r1"), "b": ("dc2", "r1")}
    token_map = token_map.with_tokens("a", allocate_tokens(token_map, locations, "dc1", 8))
    b_tokens = allocate_tokens(token_map, locations, "dc2", 8)
    assert not set(b_tokens) & set(token_map.ring_tokens)
    with pytest.raises(ValueError, match="owned by both"):
        TokenMap({"a": (1, 2), "b": (2,)})
