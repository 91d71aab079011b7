"""Token allocation for a joining node that keeps ownership balanced. Pure.

Each of the node's ``num_tokens`` tokens halves the largest range of its datacenter's ring (the
ring NetworkTopologyStrategy walks; with one datacenter, the whole ring). A datacenter with no
tokens yet gets evenly spaced tokens, offset by the datacenter name's hash so that the first
nodes of different datacenters do not collide. Deterministic: every member computes the same tokens.

Tokens that operations in flight will own (``planned``: a join prepared but not finished) count
as owned: joins that start at once — a new cluster's nodes, started together — split the ring
among themselves in the order the log holds their PREPAREs instead of all taking the first
node's tokens (which the second would find taken).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from epochal.tcm.replication import Location, TokenMap
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, token_of

RING_SIZE = 1 << 64
DEFAULT_NUM_TOKENS = 16
MAX_NUM_TOKENS = 256


def _wrap(value: int) -> int:
    """Map an integer back onto (MIN_TOKEN, MAX_TOKEN]."""
    value = (value - MIN_TOKEN) % RING_SIZE + MIN_TOKEN
    return MAX_TOKEN if value == MIN_TOKEN else value


def allocate_tokens(
    token_map: TokenMap,
    locations: Mapping[str, Location],
    datacenter: str,
    num_tokens: int,
    planned: Mapping[int, str] | None = None,
) -> tuple[int, ...]:
    """``num_tokens`` tokens in ``datacenter``; ``planned``: token -> node of the tokens that
    operations in flight will own."""
    if not 1 <= num_tokens <= MAX_NUM_TOKENS:
        raise ValueError(f"num_tokens must be 1..{MAX_NUM_TOKENS}, got {num_tokens}")
    owners = dict(zip(token_map.ring_tokens, token_map.ring_nodes, strict=True))
    owners.update(planned or {})
    taken = set(owners)
    ring = sorted(t for t, n in owners.items() if locations[n][0] == datacenter)
    if not ring:
        offset = token_of(datacenter.encode())
        spaced = (_wrap(offset + i * (RING_SIZE // num_tokens)) for i in range(num_tokens))
        return tuple(sorted(_free(t, taken) for t in spaced))
    # Max-heap of (size, left) gaps; a gap (left, left + size] wraps through MAX_TOKEN.
    gaps = [
        (-((ring[i] - ring[i - 1]) % RING_SIZE or RING_SIZE), ring[i - 1]) for i in range(len(ring))
    ]
    heapq.heapify(gaps)
    chosen: list[int] = []
    for _ in range(num_tokens):
        negative_size, left = heapq.heappop(gaps)
        size = -negative_size
        half = size // 2
        if half == 0:
            raise ValueError(f"datacenter {datacenter!r} has no room for another token")
        token = _free(_wrap(left + half), taken)
        chosen.append(token)
        taken.add(token)
        heapq.heappush(gaps, (-half, left))
        heapq.heappush(gaps, (-(size - half), token))
    return tuple(sorted(chosen))


def _free(token: int, taken: set[int]) -> int:
    """The token, or the next one up not taken (another datacenter may own it)."""
    while token in taken:
        token = _wrap(token + 1)
    return token
