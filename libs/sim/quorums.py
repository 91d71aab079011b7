"""The quorum-intersection checker (seed 000, Test Plan item 1). Pure.

Theory of operation
-------------------
A history is the metadata after every epoch, the barriers its steps passed, and the nodes that
were down. A ``Gate`` says: "before epoch ``committed`` was committed, the nodes ``acked`` had
acknowledged epoch ``epoch``, for the replicas of the ranges in ``locked``".

Two coordinators can act on a range at epochs x < y at the same time unless a gate over that
range, committed by y, has an acknowledged epoch above x and meets every quorum a coordinator at
x could collect: that coordinator then hears from a node that has seen more than x, learns the
epoch from its reply and re-checks its plan (seed 000, "Read/Write Path Integration"). So the
checker does not trust the barrier's level: it tests the acknowledgements the barrier actually
got against every quorum.

For every piece of the ring (cut at every split point the history ever had), every replication
params, and every pair of epochs two coordinators can hold at once, every read quorum of one epoch
must intersect every write quorum of the other (and of the same epoch), with levels counted as
DESIGN.md "Consistency levels over transitions" says: a write's QUORUM is a majority of its
epoch's write group (pending replicas included), a read's a majority of its epoch's read group;
LOCAL_QUORUM the same within one datacenter (NetworkTopologyStrategy only).

Down nodes: "at once" means both operations are running at a moment when the later epoch exists,
so a node down then answers neither coordinator and no quorum counts it as a member it reached
(the groups keep it, so it still counts towards the majority's size). A write that completed
earlier, on a node that has died since, is a different loss — fewer copies, not disjoint
quorums — and streaming from the surviving replicas is what covers it (the topology-operations
issue), so the checker does not count it. Counting it makes every remove of a dead node a
"violation" whatever the barriers do.

Exhaustive without enumeration: a majority of R and a majority of W, drawn from the nodes ``live``
that can answer, can be disjoint exactly when the quorums, filled first from the nodes only their
own group has, need no more than the nodes both share: ``disjoint_quorums`` decides it and builds
the witness; a unit test checks it against enumerating every pair of quorums.

Adjacent epochs, every node answering: ``check_adjacent_views`` checks what no barrier can help
with — a read group against the write group of its own epoch and of the epochs next to it — and
counts no node out, since a node declared dead may only be partitioned and answer again. It is
the PREPARE rule ``quorum_intersection`` computed a second way, from the history as applied.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from epochal.tcm import ClusterMetadata, ReplicationParams, TokenRange
from epochal.tcm.barrier import BarrierLevel
from epochal.tcm.placement import Group, Placement
from epochal.tcm.schema import Strategy


@dataclass(frozen=True, slots=True, kw_only=True)
class Gate:
    """Before ``committed``, the nodes ``acked`` had acknowledged ``epoch`` (over ``locked``);
    ``level`` is what the barrier reported, kept for the report only."""

    committed: int
    epoch: int
    acked: Group
    level: BarrierLevel
    locked: tuple[TokenRange, ...]


@dataclass(frozen=True, slots=True)
class Outage:
    """``node`` is down from epoch ``since`` until epoch ``until`` (None: for good)."""

    node: str
    since: int
    until: int | None = None

    def down_at(self, epoch: int) -> bool:
        return self.since <= epoch and (self.until is None or epoch < self.until)


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    params: ReplicationParams
    piece: TokenRange
    level: str  # "QUORUM" or "LOCAL_QUORUM dc1"
    read_epoch: int
    write_epoch: int
    read_group: Group
    write_group: Group
    read_quorum: Group
    write_quorum: Group

    def __str__(self) -> str:
        return (
            f"{self.params} {self.piece} at {self.level}: the read quorum"
            f" {sorted(self.read_quorum)} of epoch {self.read_epoch} (read group"
            f" {sorted(self.read_group)}) misses the write quorum {sorted(self.write_quorum)}"
            f" of epoch {self.write_epoch} (write group"
            f" {sorted(self.write_group)})"
        )


def majority(group: Group) -> int:
    return len(group) // 2 + 1


def disjoint_quorums(
    read: Group, write: Group, live: Group | None = None
) -> tuple[Group, Group] | None:
    """A majority of ``read`` and a majority of ``write``, each made of ``live`` nodes (default:
    all), that share no node; None when there is no such pair."""
    if live is None:
        live = read | write
    reachable_read, reachable_write = read & live, write & live
    only_read = sorted(reachable_read - reachable_write)
    only_write = sorted(reachable_write - reachable_read)
    shared = sorted(reachable_read & reachable_write)
    need_read = max(0, majority(read) - len(only_read))
    need_write = max(0, majority(write) - len(only_write))
    if need_read + need_write > len(shared):
        return None
    read_quorum = only_read[: majority(read)] + shared[:need_read]
    write_quorum = only_write[: majority(write)] + shared[need_read : need_read + need_write]
    return frozenset(read_quorum), frozenset(write_quorum)


def quorums_can_miss(read: Group, write: Group, live: Group) -> bool:
    """``disjoint_quorums(read, write, live) is not None``, by counting only."""
    reachable_read, reachable_write = read & live, write & live
    shared = len(reachable_read & reachable_write)
    need_read = max(0, len(read) // 2 + 1 - (len(reachable_read) - shared))
    need_write = max(0, len(write) // 2 + 1 - (len(reachable_write) - shared))
    return need_read + need_write <= shared


def quorum_avoiding(group: Group, avoided: Group, live: Group) -> bool:
    """Whether some majority of ``group``, made of ``live`` nodes, has none of ``avoided``."""
    return len((group & live) - avoided) >= majority(group)


@dataclass(frozen=True, slots=True)
class _Run:
    first_epoch: int  # the epoch this piece's groups took these values
    last_epoch: int
    read: Group
    write: Group


def _pieces(history: Sequence[ClusterMetadata], params: ReplicationParams) -> list[int]:
    points: set[int] = set()
    for md in history:
        placement = md.placements.get(params)
        if placement is not None:
            points.update(placement.points)
    return sorted(points)


def _runs(history: Sequence[ClusterMetadata], params: ReplicationParams, point: int) -> list[_Run]:
    runs: list[_Run] = []
    for md in history:
        placement = md.placements.get(params)
        if placement is None or not placement.points:
            continue
        i = placement.index_of(point)
        read, write = placement.reads[i], placement.writes[i]
        if runs and (runs[-1].read, runs[-1].write) == (read, write):
            runs[-1] = _Run(runs[-1].first_epoch, md.epoch, read, write)
        else:
            runs.append(_Run(md.epoch, md.epoch, read, write))
    return runs


def _separated(
    x: int, y: int, older_group: Group, gates: Sequence[Gate], commits: Sequence[int], live: Group
) -> bool:
    """Whether a coordinator still at epoch ``x`` that collects a quorum of ``older_group`` is
    sure to meet a node that acknowledged an epoch past x by the time epoch ``y`` exists.
    ``gates`` are sorted by commit epoch (``commits``); one acknowledging an epoch past x was
    committed after it, so only those committed in (x, y] can count."""
    first, last = bisect.bisect_right(commits, x), bisect.bisect_right(commits, y)
    return any(
        g.epoch > x and not quorum_avoiding(older_group, g.acked, live) for g in gates[first:last]
    )


def _levels(params: ReplicationParams, local_quorum: bool) -> list[tuple[str, str]]:
    levels = [("QUORUM", "")]
    if local_quorum and params.strategy is Strategy.NETWORK_TOPOLOGY:
        levels += [(f"LOCAL_QUORUM {dc}", dc) for dc, _ in params.factors]
    return levels


def _in(group: Group, datacenter: str, locations: Mapping[str, tuple[str, str]]) -> Group:
    """The members of ``group`` in ``datacenter`` (all of them for "")."""
    if not datacenter:
        return group
    return frozenset(n for n in group if locations[n][0] == datacenter)


def check_history(
    history: Sequence[ClusterMetadata],
    gates: Iterable[Gate],
    outages: Iterable[Outage] = (),
    *,
    local_quorum: bool = True,
    limit: int = 10,
) -> list[Violation]:
    """Every violation (up to ``limit``) over every piece, params and concurrent pair of epochs.

    ``history`` is the metadata after each epoch, oldest first; ``gates`` the barriers passed;
    ``outages`` the nodes that were down. ``local_quorum``: check LOCAL_QUORUM clients too (a
    QUORUM barrier promises only QUORUM clients; EACH_QUORUM promises both)."""
    gates = list(gates)
    outages = list(outages)
    locations: dict[str, tuple[str, str]] = {}
    for md in history:
        locations.update(md.locations())
    every_params = {p for md in history for p in md.placements}
    violations: list[Violation] = []
    misses: dict[tuple[Group, Group, Group], bool] = {}
    for params in sorted(every_params, key=str):
        points = _pieces(history, params)
        for k, point in enumerate(points):
            piece = TokenRange(points[k - 1], point)
            covering = sorted(
                (g for g in gates if any(piece.intersects(r) for r in g.locked)),
                key=lambda g: g.committed,
            )
            runs = _runs(history, params, point)
            for level, datacenter in _levels(params, local_quorum):
                violations += _check_piece(
                    params, piece, runs, covering, level, datacenter, locations, outages, misses
                )
                if len(violations) >= limit:
                    return violations[:limit]
    return violations


def _check_piece(
    params: ReplicationParams,
    piece: TokenRange,
    runs: Sequence[_Run],
    gates: Sequence[Gate],
    level: str,
    datacenter: str,
    locations: Mapping[str, tuple[str, str]],
    outages: Sequence[Outage],
    misses: dict[tuple[Group, Group, Group], bool],
) -> list[Violation]:
    """``misses`` caches ``quorums_can_miss`` across pieces: most pieces repeat groups."""
    commits = [g.committed for g in gates]
    # Taking the latest epoch of the older run and the earliest of the newer one is the pair
    # the fewest gates separate.
    local = [
        _Run(
            r.first_epoch,
            r.last_epoch,
            _in(r.read, datacenter, locations),
            _in(r.write, datacenter, locations),
        )
        for r in runs
    ]
    for j, newer in enumerate(local):
        y = newer.first_epoch
        live = frozenset(locations) - {o.node for o in outages if o.down_at(y)}
        for older in local[: j + 1]:
            x = older.last_epoch if older is not newer else y
            # (read group, write group, read epoch, write epoch, the older coordinator's group:
            # the one a gate may have made catch up through the quorum it collects)
            for read, write, read_epoch, write_epoch, stale in (
                (older.read, newer.write, x, y, older.read),
                (newer.read, older.write, y, x, older.write),
            ):
                key = (read, write, live)
                can_miss = misses.get(key)
                if can_miss is None:
                    can_miss = misses[key] = quorums_can_miss(read, write, live)
                if not can_miss:
                    continue
                if older is not newer and _separated(x, y, stale, gates, commits, live):
                    continue
                witness = disjoint_quorums(read, write, live)
                assert witness is not None
                return [
                    Violation(
                        params=params,
                        piece=piece,
                        level=level,
                        read_epoch=read_epoch,
                        write_epoch=write_epoch,
                        read_group=read,
                        write_group=write,
                        read_quorum=witness[0],
                        write_quorum=witness[1],
                    )
                ]  # one witness per piece and level is enough to act on
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewMiss:
    """Two views of a piece that can be alive at once, and a pair of quorums that misses."""

    params: ReplicationParams
    piece: TokenRange
    scope: str  # "QUORUM", or a datacenter (its LOCAL_QUORUM and its part of EACH_QUORUM)
    read_epoch: int
    write_epoch: int
    read_quorum: Group
    write_quorum: Group

    def __str__(self) -> str:
        return (
            f"{self.params} {self.piece} at {self.scope}: the read quorum"
            f" {sorted(self.read_quorum)} of epoch {self.read_epoch} misses the write quorum"
            f" {sorted(self.write_quorum)} of epoch {self.write_epoch}"
        )


@dataclass(slots=True)
class ViewCheck:
    """What ``check_adjacent_views`` found: how many (piece, pair of views) it checked, and
    the misses (up to its limit)."""

    checks: int = 0
    misses: list[ViewMiss] = field(default_factory=list)


def check_adjacent_views(history: Sequence[ClusterMetadata], *, limit: int = 10) -> ViewCheck:
    """The rule without barriers or outages: for every piece, params and epoch, the read group
    against the write group of the same epoch and of the epochs just before and after (two
    coordinators can hold adjacent epochs whatever the barriers did), some majority of one must
    not be able to miss some majority of the other — over whole groups (QUORUM) and within each
    datacenter (LOCAL_QUORUM, EACH_QUORUM). Every node counts as able to answer: a node that a
    remove or replace declares dead may only be partitioned, and answer again.

    A second computation of the rule PREPARE checks (``epochal.tcm.intersection``): it replays
    the history as applied and looks for a witness pair of quorums (``disjoint_quorums``, tested
    against enumeration) instead of counting. An epoch whose placement for a params is the same
    object as the epoch before adds no pair (its adjacent pairs are that epoch's own)."""
    result = ViewCheck()
    locations: dict[str, tuple[str, str]] = {}
    for md in history:
        locations.update(md.locations())
    witnesses: dict[tuple[Group, Group], tuple[str, Group, Group] | None] = {}
    for older, newer in itertools.pairwise(history):
        for params, after in sorted(newer.placements.items(), key=lambda p: str(p[0])):
            before = older.placements.get(params)
            if before is after or not after.points:
                continue
            pairs = _view_pairs(before, after, older.epoch, newer.epoch)
            for piece, read, write, read_epoch, write_epoch in pairs:
                result.checks += 1
                key = (read, write)
                if key not in witnesses:
                    witnesses[key] = _witness(read, write, locations)
                witness = witnesses[key]
                if witness is None:
                    continue
                scope, read_quorum, write_quorum = witness
                result.misses.append(
                    ViewMiss(
                        params=params,
                        piece=piece,
                        scope=scope,
                        read_epoch=read_epoch,
                        write_epoch=write_epoch,
                        read_quorum=read_quorum,
                        write_quorum=write_quorum,
                    )
                )
                if len(result.misses) >= limit:
                    return result
    return result


def _view_pairs(
    before: Placement | None, after: Placement, older: int, newer: int
) -> list[tuple[TokenRange, Group, Group, int, int]]:
    """(piece, read group, write group, read epoch, write epoch) for every piece of the ring cut
    at both placements' points: the newer epoch's own pair and the two across the epochs."""
    points = sorted(set(after.points) | set(before.points if before is not None else ()))
    pairs = []
    for k, point in enumerate(points):
        piece = TokenRange(points[k - 1], point)
        j = after.index_of(point)
        pairs.append((piece, after.reads[j], after.writes[j], newer, newer))
        if before is not None and before.points:
            i = before.index_of(point)
            pairs.append((piece, before.reads[i], after.writes[j], older, newer))
            pairs.append((piece, after.reads[j], before.writes[i], newer, older))
    return pairs


def _witness(
    read: Group, write: Group, locations: Mapping[str, tuple[str, str]]
) -> tuple[str, Group, Group] | None:
    """The first scope (QUORUM, then each datacenter) with a majority of ``read`` and a majority
    of ``write`` that share no node, and those two quorums; None when there is none. A scope
    where one side has no member has no quorum there to miss."""
    datacenters = sorted({locations[n][0] for n in read | write})
    for scope, datacenter in [("QUORUM", ""), *((dc, dc) for dc in datacenters)]:
        local_read = _in(read, datacenter, locations)
        local_write = _in(write, datacenter, locations)
        if not local_read or not local_write:
            continue
        witness = disjoint_quorums(local_read, local_write)
        if witness is not None:
            return scope, *witness
    return None
