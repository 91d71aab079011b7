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
    # datacenter -> (its tokens, their owners), built on first use. A node's datacenter never
    # changes (no transformation moves a registered node), so it does not depend on which
    # directory asked.
    _datacenter_rings: dict[str, tuple[list[int], list[str]]] = field(
        init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        pairs = sorted((t, n) for n, tokens in self.owners.items() for t in tokens)
        for (token, node), (next_token, other) in itertools.pairwise(pairs):
            if token == next_token:
                raise ValueError(f"token {token} is owned by both {node} and {other}")
        object.__setattr__(self, "owners", {n: tuple(sorted(t)) for n, t in self.owners.items()})
        object.__setattr__(self, "ring_tokens", tuple(t for t, _ in pairs))
        object.__setattr__(self, "ring_nodes", tuple(n for _, n in pairs))
        object.__setattr__(self, "_datacenter_rings", {})

    def datacenter_ring(
        self, datacenter: str, locations: Mapping[str, Location]
    ) -> tuple[list[int], list[str]]:
        """The tokens of ``datacenter``'s nodes, in ring order, and their owners."""
        ring = self._datacenter_rings.get(datacenter)
        if ring is None:
            pairs = [
                (t, n)
                for t, n in zip(self.ring_tokens, self.ring_nodes, strict=True)
                if locations[n][0] == datacenter
            ]
            ring = self._datacenter_rings[datacenter] = (
                [t for t, _ in pairs],
                [n for _, n in pairs],
            )
        return ring

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
    walkers = _walkers(params, token_map, locations)
    return [_group(walkers, point) for point in points]


def natural_changes(
    params: ReplicationParams,
    before: TokenMap,
    after: TokenMap,
    locations: Mapping[str, Location],
    points: Sequence[int],
) -> dict[int, tuple[tuple[str, ...], tuple[str, ...]]]:
    """index in ``points`` -> (natural replicas under ``before``, under ``after``), for exactly
    the points where the two differ; ``natural_groups`` of both, compared, without walking the
    whole ring.

    Why only some points are walked: a walk from point q examines the ring from q to the last
    token it needs, e(q). If no token whose owner differs between the maps (a *changed* token)
    lies in [q, e(q)] under ``before``, the walk under ``after`` meets the same owners in the
    same order and stops at the same place, so q's replicas are equal. Starting earlier never
    makes a walk end later (it has seen a superset of nodes by every position), so walking back
    from a changed token stops at the first point whose walk ends before it. This holds while
    each walk's goal (replicas per datacenter, racks per datacenter) is the same in both maps;
    when it is not, every point is compared."""
    walkers_before = _walkers(params, before, locations)
    walkers_after = _walkers(params, after, locations)
    if [w.goal for w in walkers_before] != [w.goal for w in walkers_after]:
        candidates: set[int] = set(range(len(points)))
    else:
        candidates = set()
        for walker, changed in zip(
            walkers_before, _changed_tokens(before, after, walkers_after), strict=True
        ):
            for token in changed:
                candidates |= _points_reaching(walker, points, token)
    changes = {}
    for index in sorted(candidates):
        old, new = _group(walkers_before, points[index]), _group(walkers_after, points[index])
        if set(old) != set(new):
            changes[index] = (old, new)
    return changes


def _changed_tokens(
    before: TokenMap, after: TokenMap, walkers_after: Sequence[_Walk]
) -> list[set[int]]:
    """For each walker, the tokens of its ring whose owner differs between the maps: every
    token of a node whose tokens differ (compared node by node, not token by token)."""
    owner_before: dict[int, str] = {}
    owner_after: dict[int, str] = {}
    for node in before.owners.keys() | after.owners.keys():
        old, new = before.owners.get(node, ()), after.owners.get(node, ())
        if old != new:
            owner_before.update((t, node) for t in old)
            owner_after.update((t, node) for t in new)
    changed = {
        t
        for t in owner_before.keys() | owner_after.keys()
        if owner_before.get(t) != owner_after.get(t)
    }
    result = []
    for walker in walkers_after:
        members = walker.members
        result.append(
            changed
            if members is None
            else {
                t
                for t in changed
                if owner_before.get(t) in members or owner_after.get(t) in members
            }
        )
    return result


_RING = 1 << 64


def _points_reaching(walker: _Walk, points: Sequence[int], token: int) -> set[int]:
    """Indices of the points whose walk (under ``walker``'s map) reaches ``token``."""
    if not points:
        return set()
    found: set[int] = set()
    index = bisect.bisect_left(points, token)  # the first point at or after the token
    if index == len(points):
        index = 0
    # The point at or after the token: its range contains the token, so it is affected.
    found.add(index)
    for step in range(1, len(points)):
        candidate = (index - step) % len(points)
        point = points[candidate]
        last = walker.last_examined(point)
        if last is None or (token - point) % _RING > (last - point) % _RING:
            break
        found.add(candidate)
    return found


def _walkers(
    params: ReplicationParams, token_map: TokenMap, locations: Mapping[str, Location]
) -> list[_Walk]:
    if params.strategy is Strategy.SIMPLE:
        return [_SimpleWalk(token_map, params.factors[0][1])]
    return [
        _DatacenterWalk(token_map, locations, datacenter, factor)
        for datacenter, factor in params.factors
    ]


def _group(walkers: Sequence[_Walk], point: int) -> tuple[str, ...]:
    return tuple(n for w in walkers for n in w.walk(point)[0])


class _Walk:
    """A walk over one ring (the whole ring, or one datacenter's tokens)."""

    tokens: Sequence[int]
    members: frozenset[str] | None  # the nodes whose tokens this ring has; None: all

    @property
    def goal(self) -> tuple[int, ...]:
        """What the walk must collect; two maps with equal goals walk alike over equal tokens."""
        raise NotImplementedError

    def walk(self, point: int) -> tuple[tuple[str, ...], int]:
        """(the replicas for the range ending at ``point``, how many tokens were examined)."""
        raise NotImplementedError

    def last_examined(self, point: int) -> int | None:
        """The last token the walk from ``point`` examines (None on an empty ring)."""
        count = len(self.tokens)
        if not count:
            return None
        _, examined = self.walk(point)
        start = bisect.bisect_left(self.tokens, point)
        return self.tokens[(start + examined - 1) % count]


class _SimpleWalk(_Walk):
    def __init__(self, token_map: TokenMap, factor: int) -> None:
        self.tokens = token_map.ring_tokens
        self.nodes = token_map.ring_nodes
        self.members = None
        self.factor = min(factor, len(set(self.nodes)))

    @property
    def goal(self) -> tuple[int, ...]:
        return (self.factor,)

    def walk(self, point: int) -> tuple[tuple[str, ...], int]:
        count = len(self.tokens)
        if not count:
            return (), 0
        start = bisect.bisect_left(self.tokens, point)
        chosen: list[str] = []
        examined = 0
        for step in range(count):
            examined = step + 1
            node = self.nodes[(start + step) % count]
            if node not in chosen:
                chosen.append(node)
                if len(chosen) == self.factor:
                    break
        return tuple(chosen), examined


class _DatacenterWalk(_Walk):
    def __init__(
        self,
        token_map: TokenMap,
        locations: Mapping[str, Location],
        datacenter: str,
        factor: int,
    ) -> None:
        self.tokens, self.nodes = token_map.datacenter_ring(datacenter, locations)
        distinct = set(self.nodes)
        self.racks = {n: locations[n][1] for n in distinct}
        self.members = frozenset(n for n, (dc, _) in locations.items() if dc == datacenter)
        self.factor = min(factor, len(distinct))
        self.rack_count = len({self.racks[n] for n in distinct})

    @property
    def goal(self) -> tuple[int, ...]:
        return (self.factor, self.rack_count)

    def walk(self, point: int) -> tuple[tuple[str, ...], int]:
        count = len(self.tokens)
        if not count:
            return (), 0
        start = bisect.bisect_left(self.tokens, point)
        chosen: list[str] = []
        skipped: list[str] = []
        racks_used: set[str] = set()
        examined = 0
        for step in range(count):
            examined = step + 1
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
        return tuple(chosen[: self.factor]), examined
