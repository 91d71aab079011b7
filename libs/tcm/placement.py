"""Placements: for each token range, the read replica group and the write replica group. Pure.

Theory of operation
-------------------
A ``Placement`` (one per distinct ``ReplicationParams``: keyspaces with equal params share it)
cuts the ring at sorted split points; range i is ``(points[i-1], points[i]]``, range 0 wrapping
(see ``epochal.tcm.tokens``). Outside a topology sequence the split points are the owned tokens
and read group = write group = the natural replicas. A sequence changes a placement only through
``RangeDelta``s computed when it is prepared:

- PREPARE splits ranges at the sequence's new tokens (no ownership change);
- START adds the new owners to the write groups;
- MID adds the new owners to, and removes the old owners from, the read groups;
- FINISH removes the old owners from the write groups and merges ranges at split points that
  are no longer needed.

Undoing a step applies its inverse, so a cancelled sequence retraces the same states backwards.
Every group is a frozenset; the write group always contains the read group.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from epochal.tcm.replication import Location, TokenMap, natural_groups
from epochal.tcm.schema import ReplicationParams
from epochal.tcm.tokens import TokenRange, index_owning

Group = frozenset[str]


@dataclass(frozen=True, slots=True)
class RangeDelta:
    """How one range's groups change: ``added`` join, ``removed`` leave (write: START adds,
    FINISH removes; read: MID does both)."""

    point: int  # the range's right end
    added: Group
    removed: Group


@dataclass(frozen=True, slots=True)
class Placement:
    points: tuple[int, ...]
    reads: tuple[Group, ...]
    writes: tuple[Group, ...]

    def __post_init__(self) -> None:
        assert len(self.points) == len(self.reads) == len(self.writes)

    @classmethod
    def natural(
        cls,
        params: ReplicationParams,
        token_map: TokenMap,
        locations: Mapping[str, Location],
        points: Sequence[int] | None = None,
    ) -> Placement:
        points = tuple(token_map.ring_tokens if points is None else points)
        groups = tuple(frozenset(g) for g in natural_groups(params, token_map, locations, points))
        return cls(points, groups, groups)

    def ranges(self) -> list[tuple[TokenRange, Group, Group]]:
        return [
            (TokenRange(self.points[i - 1], self.points[i]), self.reads[i], self.writes[i])
            for i in range(len(self.points))
        ]

    def index_of(self, token: int) -> int:
        return index_owning(self.points, token)

    def split(self, tokens: Iterable[int]) -> Placement:
        """Add split points; each new range keeps the groups of the range it was cut from."""
        points, reads, writes = list(self.points), list(self.reads), list(self.writes)
        for token in sorted(set(tokens)):
            index = bisect.bisect_left(points, token)
            if index < len(points) and points[index] == token:
                continue
            owner = 0 if index == len(points) else index
            read = reads[owner] if points else frozenset()
            write = writes[owner] if points else frozenset()
            points.insert(index, token)
            reads.insert(index, read)
            writes.insert(index, write)
        return Placement(tuple(points), tuple(reads), tuple(writes))

    def merge(self, tokens: Iterable[int]) -> Placement:
        """Drop split points, each only where the ranges on both sides have equal groups."""
        points, reads, writes = list(self.points), list(self.reads), list(self.writes)
        for token in sorted(set(tokens)):
            index = bisect.bisect_left(points, token)
            if index == len(points) or points[index] != token or len(points) == 1:
                continue
            after = (index + 1) % len(points)
            if (reads[index], writes[index]) != (reads[after], writes[after]):
                continue
            del points[index], reads[index], writes[index]
        return Placement(tuple(points), tuple(reads), tuple(writes))

    def apply(self, deltas: Sequence[RangeDelta], *, reads: bool, writes: str) -> Placement:
        """Apply deltas: to the read groups (add and remove) when ``reads``; to the write groups
        ``writes`` = "add", "remove" or "" (untouched)."""
        new_reads, new_writes = list(self.reads), list(self.writes)
        for delta in deltas:
            index = bisect.bisect_left(self.points, delta.point)
            assert index < len(self.points) and self.points[index] == delta.point, delta
            if reads:
                new_reads[index] = (new_reads[index] - delta.removed) | delta.added
            if writes == "add":
                new_writes[index] = new_writes[index] | delta.added
            elif writes == "remove":
                new_writes[index] = new_writes[index] - delta.removed
        return Placement(self.points, tuple(new_reads), tuple(new_writes))

    def unapply(self, deltas: Sequence[RangeDelta], *, reads: bool, writes: str) -> Placement:
        """The inverse of ``apply`` with the same arguments."""
        inverse = [RangeDelta(d.point, d.removed, d.added) for d in deltas]
        flipped = {"add": "remove", "remove": "add", "": ""}[writes]
        return self.apply(inverse, reads=reads, writes=flipped)
