"""The progress barrier, pure part: has a step's epoch been acknowledged widely enough?

Theory of operation
-------------------
Before a sequence commits step k+1, the nodes that replicate an affected range — the union of its
groups before and after step k, read and write — must have acknowledged step k's epoch (seed 000,
"Consistency Guarantees"). How many of them is the barrier's level:

    level          met when, for every affected range
    ALL            every node of the union acknowledged
    EACH_QUORUM    a majority of the union's nodes in each datacenter
    QUORUM         a majority of the union
    LOCAL_QUORUM   a majority of the union's nodes in the local datacenter (the driving node's);
                   met at once for a range with no replica there
    ONE            one node of the union
    NODE_LOCAL     the driving node itself

The driver (the topology-operations issue puts it on the network) starts at the top of
``FALLBACK_CHAIN`` and, each time the level times out, falls back to the next one, never below the
configured minimum (default EACH_QUORUM, what LOCAL_QUORUM clients need). QUORUM still lets any
two QUORUM quorums of adjacent epochs overlap; below it the quorum-intersection guarantee is gone,
so an outcome there is reported as ``waived``, never as passed.

Why a majority of the union is enough: in every step one of the two views' write groups is the
whole union U (a step that changes groups has START's or MID's view on one side, and those write
to the old and the new owners both), and every read group R of the two views is a read group PREPARE
checked against that write group: ``quorum_intersection`` (``epochal.tcm.intersection``) refuses
a plan unless maj(R) + maj(U) > |U|, over whole groups and within each datacenter. Two
majorities of U always meet. So a majority of U — or, for EACH_QUORUM, of U's members in each
datacenter — meets every majority of every group of both views. (A step may change more than one
node per datacenter — a replace into another rack changes two, allowed where the groups have an
even number of nodes; the argument needs the rule, not the count.) A coordinator still on an
older epoch therefore meets a node that has seen the newer one, learns the epoch from its reply,
and re-checks its plan. The union leaves out the node a remove or replace declares dead
(``step_unions``), so for those steps the argument also takes that node never to answer again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from epochal.tcm.placement import Group, Placement
from epochal.tcm.replication import Location
from epochal.tcm.schema import ReplicationParams
from epochal.tcm.tokens import TokenRange


class BarrierLevel(enum.Enum):
    ALL = "ALL"
    EACH_QUORUM = "EACH_QUORUM"
    QUORUM = "QUORUM"
    LOCAL_QUORUM = "LOCAL_QUORUM"
    ONE = "ONE"
    NODE_LOCAL = "NODE_LOCAL"


# Strongest first; a barrier starts at the head and falls back one level per timeout.
FALLBACK_CHAIN: tuple[BarrierLevel, ...] = (
    BarrierLevel.EACH_QUORUM,
    BarrierLevel.QUORUM,
    BarrierLevel.LOCAL_QUORUM,
    BarrierLevel.ONE,
    BarrierLevel.NODE_LOCAL,
)
DEFAULT_MINIMUM = BarrierLevel.EACH_QUORUM
# The weakest level that still keeps every QUORUM read and write quorum of adjacent epochs
# intersecting; an outcome below it is "waived".
WEAKEST_SAFE = BarrierLevel.QUORUM
_STRENGTH = {level: rank for rank, level in enumerate(BarrierLevel)}  # 0 = strongest


def at_least(level: BarrierLevel, floor: BarrierLevel) -> bool:
    """Whether ``level`` is as strong as ``floor`` or stronger."""
    return _STRENGTH[level] <= _STRENGTH[floor]


def chain_down_to(minimum: BarrierLevel) -> tuple[BarrierLevel, ...]:
    """The levels a barrier tries, strongest first, ending at ``minimum``."""
    if minimum not in FALLBACK_CHAIN:
        raise ValueError(
            f"barrier minimum {minimum.value} is not one of "
            f"{', '.join(level.value for level in FALLBACK_CHAIN)}"
        )
    return FALLBACK_CHAIN[: FALLBACK_CHAIN.index(minimum) + 1]


def _majority(members: Iterable[str], acked: frozenset[str]) -> bool:
    members = tuple(members)
    return sum(1 for n in members if n in acked) > len(members) // 2


def _range_met(
    level: BarrierLevel,
    union: Group,
    locations: Mapping[str, Location],
    acked: frozenset[str],
    local_node: str,
) -> bool:
    if level is BarrierLevel.ALL:
        return union <= acked
    if level is BarrierLevel.QUORUM:
        return _majority(union, acked)
    if level is BarrierLevel.ONE:
        return bool(union & acked)
    if level is BarrierLevel.NODE_LOCAL:
        return local_node in acked
    by_dc: dict[str, list[str]] = {}
    for node in union:
        by_dc.setdefault(locations[node][0], []).append(node)
    if level is BarrierLevel.EACH_QUORUM:
        return all(_majority(nodes, acked) for nodes in by_dc.values())
    assert level is BarrierLevel.LOCAL_QUORUM, level
    local = by_dc.get(locations[local_node][0])
    return local is None or _majority(local, acked)  # no replica here: nothing to wait for


@dataclass(frozen=True, slots=True, kw_only=True)
class BarrierOutcome:
    level: BarrierLevel
    epoch: int

    @property
    def waived(self) -> bool:
        return not at_least(self.level, WEAKEST_SAFE)

    @property
    def verdict(self) -> str:
        return "waived" if self.waived else "passed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressBarrier:
    """The nodes that must acknowledge ``epoch``: one replica union per affected range.

    ``local_node`` drives the sequence: its datacenter is LOCAL_QUORUM's, and NODE_LOCAL waits for
    it alone. ``minimum`` is the weakest level ``fall_back`` goes to."""

    epoch: int
    unions: tuple[Group, ...]
    locations: Mapping[str, Location]
    local_node: str
    minimum: BarrierLevel = DEFAULT_MINIMUM

    def __post_init__(self) -> None:
        chain_down_to(self.minimum)  # raises on a minimum outside the chain
        if self.local_node not in self.locations:
            raise ValueError(f"the driving node {self.local_node} is not in the directory")
        for union in self.unions:
            unknown = union - self.locations.keys()
            assert not unknown, f"replicas {sorted(unknown)} are not in the directory"

    @property
    def nodes(self) -> Group:
        """Every node the barrier asks."""
        return frozenset().union(*self.unions) | {self.local_node}

    def met(self, level: BarrierLevel, acked: Iterable[str]) -> bool:
        acked = frozenset(acked)
        return all(
            _range_met(level, union, self.locations, acked, self.local_node)
            for union in self.unions
        )

    def outcome(self, acked: Iterable[str]) -> BarrierOutcome | None:
        """The strongest level of the chain (down to the minimum) that ``acked`` meets, or None.

        A driver that waited a level's full timeout uses this to fall back at once to what the
        acknowledgements already satisfy; one that is still within the timeout of its current
        level checks ``met`` for that level."""
        acked = frozenset(acked)
        for level in chain_down_to(self.minimum):
            if self.met(level, acked):
                return BarrierOutcome(level=level, epoch=self.epoch)
        return None

    def fall_back(self, level: BarrierLevel) -> BarrierLevel | None:
        """The level after ``level`` times out, or None when ``level`` is the minimum."""
        chain = chain_down_to(self.minimum)
        position = chain.index(level)
        return chain[position + 1] if position + 1 < len(chain) else None


def step_unions(
    before: Mapping[ReplicationParams, Placement],
    after: Mapping[ReplicationParams, Placement],
    locked: Sequence[TokenRange],
    dead: frozenset[str] = frozenset(),
) -> tuple[Group, ...]:
    """For each piece of the ring inside the sequence's locked ranges, the union of its read and
    write groups before and after the step, less ``dead`` (the node a remove or replace declares
    down: it will never answer). Pieces are cut at the split points of both states, so a range
    the step split or merged is taken piece by piece. A PREPARE changes no group but still has
    its locked ranges: its barrier makes their replicas see every epoch before it."""
    unions: set[Group] = set()
    for params in before.keys() & after.keys():
        old, new = before[params], after[params]
        if not old.points or not new.points:
            continue  # a ring with no owner yet: no replica to wait for
        points = sorted(set(old.points) | set(new.points))
        for k, point in enumerate(points):
            piece = TokenRange(points[k - 1], point)
            if not any(piece.intersects(lock) for lock in locked):
                continue
            i, j = old.index_of(point), new.index_of(point)
            union = old.reads[i] | old.writes[i] | new.reads[j] | new.writes[j]
            if union - dead:
                unions.add(union - dead)
    return tuple(sorted(unions, key=sorted))


def barrier_for_step(
    before: Mapping[ReplicationParams, Placement],
    after: Mapping[ReplicationParams, Placement],
    locked: Sequence[TokenRange],
    *,
    epoch: int,
    locations: Mapping[str, Location],
    local_node: str,
    minimum: BarrierLevel = DEFAULT_MINIMUM,
    dead: frozenset[str] = frozenset(),
) -> ProgressBarrier:
    """The barrier gating the step after the one that took ``before`` to ``after`` at ``epoch``;
    ``locked`` is the sequence's locked ranges, ``dead`` the nodes it declares down."""
    return ProgressBarrier(
        epoch=epoch,
        unions=step_unions(before, after, locked, dead),
        locations=locations,
        local_node=local_node,
        minimum=minimum,
    )
