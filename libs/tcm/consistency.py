"""Consistency levels over replica groups (DESIGN.md "Consistency levels over transitions"). Pure.

A write's level counts over the write group of its epoch, pending replicas included (QUORUM is
a majority of the whole write group); a read's over the read group. LOCAL_QUORUM counts only the
group's members in the coordinator's datacenter.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping


class Consistency(enum.Enum):
    ONE = "ONE"
    QUORUM = "QUORUM"
    LOCAL_QUORUM = "LOCAL_QUORUM"
    ALL = "ALL"


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


def required(level: Consistency, counting: Collection[str]) -> int:
    """How many of the counted members must answer (0 when none can count: unsatisfiable)."""
    size = len(counting)
    if size == 0:
        return 0
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
) -> bool:
    counting = counted(level, group, datacenters, local_datacenter)
    needed = required(level, counting)
    return needed > 0 and len(counting.intersection(answered)) >= needed
