"""Quorum intersection across the steps of a sequence: the rule PREPARE checks. Pure.

Theory of operation
-------------------
A coordinator writes to the write group of its epoch and reads from the read group (DESIGN.md
"Consistency levels over transitions": QUORUM is a majority of the whole group, pending replicas
included; LOCAL_QUORUM a majority of the group's members in one datacenter; EACH_QUORUM one in
every datacenter). The progress barrier separates coordinators whose epochs are more than one
step apart; nothing separates two coordinators on adjacent steps, and a coordinator's own read
and write groups are alive together. So for every range, each *view* (its read and write group at
one step) must have its read group meet its own write group and the write groups of the views
just before and after it. A majority of R and a majority of W always share a node exactly when
they cannot fit side by side in R ∪ W:

    maj(|R|) + maj(|W|) > |R ∪ W|,   maj(n) = n // 2 + 1

counted over whole groups (QUORUM) and over each datacenter's members (LOCAL_QUORUM,
EACH_QUORUM); a side with no member in a datacenter has no quorum there to miss.

A sequence's views are PREPARE (R, R), START (R, U), MID (R', U), FINISH (R', R') with
U = R ∪ R', so the rule is maj(R) + maj(U) > |U| and maj(R') + maj(U) > |U|. When a step
changes one replica per datacenter (|U| = |R| + 1) it always holds. Rack-aware placement can make
one operation change two replicas of a range in one datacenter: a replacement X registered in
another rack than the dead node A takes A's place in the walk, so the replica that was the first
of X's rack (B) drops out and the next node of A's rack (D), now unrepresented, comes in. With
RF 3 that is R = {A, B, C}, U = {A, B, C, D, X}: 2 + 3 = 5 is not more than 5, and the read
quorum {A, B} misses the write quorum {C, D, X}; two changed replicas break the rule whenever
the group has an odd number n of nodes (maj(n) + maj(n + 2) = n + 2). ``first_miss`` checks
the views themselves, not a count of changed replicas, so no operation kind needs a case of its
own; ``epochal.tcm.topology`` computes the views with the step table.

This rule is also what lets the barrier count a majority of the union of two adjacent steps'
groups (``epochal.tcm.barrier``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from epochal.tcm.placement import Group
from epochal.tcm.replication import Location

View = tuple[Group, Group]  # (read group, write group) of one range at one step


@dataclass(frozen=True, slots=True)
class Miss:
    """A read group and a write group, alive at once, with majorities that need not meet."""

    datacenter: str  # "" for the whole group (QUORUM)
    read: Group
    write: Group

    @property
    def level(self) -> str:
        if not self.datacenter:
            return "QUORUM"
        return f"LOCAL_QUORUM (and EACH_QUORUM) in {self.datacenter}"

    def describe(self) -> str:
        read, write = len(self.read), len(self.write)
        union = len(self.read | self.write)
        return (
            f"at {self.level} a read of {sorted(self.read)} and a write to {sorted(self.write)} "
            f"need not meet (majorities {majority(read)} + {majority(write)} are not more than "
            f"the {union} nodes of both)"
        )


def majority(size: int) -> int:
    return size // 2 + 1


def first_miss(views: Sequence[View], locations: Mapping[str, Location]) -> Miss | None:
    """The first pair of ``views`` (one range's views, in step order) that breaks the rule:
    each view's read group against its own write group and the adjacent views' write groups."""
    pairs: list[tuple[Group, Group]] = []
    for k, (read, write) in enumerate(views):
        pairs.append((read, write))
        if k > 0:
            previous_read, previous_write = views[k - 1]
            pairs += [(previous_read, write), (read, previous_write)]
    for read, write in dict.fromkeys(pairs):  # once each, in order
        miss = _pair_miss(read, write, locations)
        if miss is not None:
            return miss
    return None


def _pair_miss(read: Group, write: Group, locations: Mapping[str, Location]) -> Miss | None:
    if not _meet(len(read), len(write), len(read | write)):
        return Miss("", read, write)
    for datacenter in sorted({locations[n][0] for n in read | write}):
        local_read = frozenset(n for n in read if locations[n][0] == datacenter)
        local_write = frozenset(n for n in write if locations[n][0] == datacenter)
        if not _meet(len(local_read), len(local_write), len(local_read | local_write)):
            return Miss(datacenter, local_read, local_write)
    return None


def _meet(read: int, write: int, union: int) -> bool:
    """Whether every majority of ``read`` nodes meets every majority of ``write`` nodes, the two
    groups having ``union`` nodes together (an empty side has no quorum to miss)."""
    return read == 0 or write == 0 or majority(read) + majority(write) > union
