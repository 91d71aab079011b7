"""The token map and natural replicas: SimpleStrategy and rack-aware NetworkTopologyStrategy. Pure.

Theory of operation
-------------------
``TokenMap`` holds the tokens each node owns for reads (a joining node's tokens enter it at the
MID step of its sequence, a leaving node's leave it there). The *natural* replicas of the range
ending at token ``t`` are found by walking the ring clockwise from the first owned token at or
after ``t``:

- SimpleStrategy(RF): the first RF distinct nodes.
- NetworkTopologyStrategy({dc: RF}): per datacenter, over that datacenter's tokens only, the
  first node met in each rack not yet used; once every rack of the datacenter has a replica (or
  RF racks do), the nodes skipped for repeating a rack, in the order met, then any further
  distinct node — Cassandra's rule, so replicas spread over racks first.

A datacenter or ring with fewer nodes than RF gives fewer replicas. Everything is a function of
(token map, locations, replication params): every member computes the same groups.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from epochal.tcm.schema import ReplicationParams, Strategy
from epochal.tcm.tokens import check_token

Location = tuple[str, str]  # (datacenter, rack)


@dataclass(frozen=True, slots=True)
class TokenMap:
    """node id -> the tokens it owns; the sorted ring is built once, when the map is."""

    owners: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    ring_tokens: tuple[int, ...] = field(init=False, compare=False, repr=False)
    ring_nodes: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        pairs = sorted((t, n) for n, tokens in self.owners.items() for t in tokens)
        for (token, node), (next_token, other) in itertools.pairwise(pairs):
            if token == next_token:
                raise ValueError(f"token {token} is owned by both {node} and {other}")
        object.__setattr__(self, "owners", {n: tuple(sorted(t)) for n, t in self.owners.items()})
        object.__setattr__(self, "ring_tokens", tuple(t for t, _ in pairs))
        object.__setattr__(self, "ring_nodes", tuple(n for _, n in pairs))

    def __hash__(self) -> int:
        return hash(self.ring_tokens)

    def owner_of_token(self, token: int) -> str | None:
        index = bisect.bisect_left(self.ring_tokens, token)
        if index < len(self.ring_tokens) and self.ring_tokens[index] == token:
            return self.ring_nodes[index]
        return None

    def with_tokens(self, node_id: str, tokens: Iterable[int]) -> TokenMap:
        tokens = tuple(tokens)
        for token in tokens:
            check_token(token)
        owners = {n: t for n, t in self.owners.items() if n != node_id}
        if tokens:
            owners[node_id] = tokens
        return TokenMap(owners)

    def renamed(self, old: str, new: str) -> TokenMap:
        owners = {(new if n == old else n): t for n, t in self.owners.items()}
        return TokenMap(owners)


def natural_groups(
    params: ReplicationParams,
    token_map: TokenMap,
    locations: Mapping[str, Location],
    points: Sequence[int],
) -> list[tuple[str, ...]]:
    """The natural replicas of every range ending at one of ``points``, in walk order."""
    if params.strategy is Strategy.SIMPLE:
        walker = _SimpleWalk(token_map, params.factors[0][1])
        return [walker.replicas(point) for point in points]
    walkers = [
        _DatacenterWalk(token_map, locations, datacenter, factor)
        for datacenter, factor in params.factors
    ]
    return [tuple(n for w in walkers for n in w.replicas(point)) for point in points]


class _SimpleWalk:
    def __init__(self, token_map: TokenMap, factor: int) -> None:
        self.tokens = token_map.ring_tokens
        self.nodes = token_map.ring_nodes
        self.factor = min(factor, len(set(self.nodes)))

    def replicas(self, point: int) -> tuple[str, ...]:
        count = len(self.tokens)
        if not count:
            return ()
        start = bisect.bisect_left(self.tokens, point)
        chosen: list[str] = []
        for step in range(count):
            node = self.nodes[(start + step) % count]
            if node not in chosen:
                chosen.append(node)
                if len(chosen) == self.factor:
                    break
        return tuple(chosen)


class _DatacenterWalk:
    def __init__(
        self,
        token_map: TokenMap,
        locations: Mapping[str, Location],
        datacenter: str,
        factor: int,
    ) -> None:
        pairs = [
            (t, n)
            for t, n in zip(token_map.ring_tokens, token_map.ring_nodes, strict=True)
            if locations[n][0] == datacenter
        ]
        self.tokens = [t for t, _ in pairs]
        self.nodes = [n for _, n in pairs]
        self.racks = {n: locations[n][1] for n in self.nodes}
        distinct = set(self.nodes)
        self.factor = min(factor, len(distinct))
        self.rack_count = len({self.racks[n] for n in distinct})

    def replicas(self, point: int) -> tuple[str, ...]:
        count = len(self.tokens)
        if not count:
            return ()
        start = bisect.bisect_left(self.tokens, point)
        chosen: list[str] = []
        skipped: list[str] = []
        racks_used: set[str] = set()
        for step in range(count):
            node = self.nodes[(start + step) % count]
            if node in chosen or node in skipped:
                continue
            rack = self.racks[node]
            if len(racks_used) == self.rack_count:
                chosen.append(node)  # every rack used: any distinct node
            elif rack not in racks_used:
                chosen.append(node)
                racks_used.add(rack)
                if len(racks_used) == self.rack_count:
                    chosen.extend(skipped[: self.factor - len(chosen)])
                    skipped.clear()
            else:
                skipped.append(node)
            if len(chosen) >= self.factor:
                break
        return tuple(chosen[: self.factor])
