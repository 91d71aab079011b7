"""Consistency levels over replica groups (DESIGN.md "Consistency levels over transitions"). Pure.

A write's level counts over the write group of its epoch, pending replicas included (QUORUM is
a majority of the whole write group); a read's over the read group. LOCAL_QUORUM counts only the
group's members in the coordinator's datacenter.

While a keyspace has fewer replicas than its replication factor names (it was created before
enough nodes joined), the replicas it lacks count as replicas that do not answer, as in
Cassandra: with RF 3 and one node, ONE succeeds and QUORUM (2 of 3) and ALL are unavailable.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping

from epochal.errors import InvalidRequest
from epochal.tcm.schema import ReplicationParams, Strategy


class Consistency(enum.Enum):
    ONE = "ONE"
    QUORUM = "QUORUM"
    LOCAL_QUORUM = "LOCAL_QUORUM"
    ALL = "ALL"

    @classmethod
    def of(cls, level: Consistency | str) -> Consistency:
        """``level`` as a level: the enum itself, or its name in any case (" quorum ");
        InvalidRequest, naming the levels, for anything else."""
        if isinstance(level, cls):
            return level
        if isinstance(level, str):
            found = cls.__members__.get(level.strip().upper())
            if found is not None:
                return found
        names = ", ".join(cls.__members__)
        raise InvalidRequest(
            f"consistency {level!r} is not a level: one of {names} (the enum Consistency or its "
            "name, in any case)"
        )


def counted(
    level: Consistency,
    group: Collection[str],
    datacenters: Mapping[str, str],
    local_datacenter: str,
) -> frozenset[str]:
    """The members of ``group`` whose answers count for ``level``."""
    if level is Consistency.LOCAL_QUORUM:
        return frozenset(n for n in group if datacenters.get(n) == local_datacenter)
    return frozenset(group)


def replication_factor(level: Consistency, params: ReplicationParams, local_datacenter: str) -> int:
    """The replication factor ``level`` counts against: for LOCAL_QUORUM, the local
    datacenter's under NetworkTopologyStrategy and none under SimpleStrategy (which does not
    say how many of a range's replicas a datacenter holds: its members there decide); else the
    keyspace's total."""
    factors = dict(params.factors)
    if level is Consistency.LOCAL_QUORUM:
        if params.strategy is Strategy.NETWORK_TOPOLOGY:
            return factors.get(local_datacenter, 0)
        return 0
    return sum(factors.values())


def required(level: Consistency, counting: Collection[str], factor: int = 0) -> int:
    """How many of the counted members must answer (0 when none can count: unsatisfiable).
    ``factor``: the replication factor the level counts against (``replication_factor``);
    while fewer members than that exist, the missing ones count as members that do not answer,
    so more may be needed than exist (unavailable)."""
    size = len(counting)
    if size == 0:
        return 0
    size = max(size, factor)
    if level is Consistency.ONE:
        return 1
    if level is Consistency.ALL:
        return size
    return size // 2 + 1


def satisfied(
    level: Consistency,
    group: Collection[str],
    answered: Collection[str],
    datacenters: Mapping[str, str],
    local_datacenter: str,
    factor: int = 0,
) -> bool:
    counting = counted(level, group, datacenters, local_datacenter)
    needed = required(level, counting, factor)
    return needed > 0 and len(counting.intersection(answered)) >= needed
