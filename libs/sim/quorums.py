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
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from epochal.tcm import ClusterMetadata, ReplicationParams, TokenRange
from epochal.tcm.barrier import BarrierLevel
from epochal.tcm.placement import Group
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
