"""What a coordinated request must reach, decided from metadata alone. Pure: no I/O, no clock, no
randomness (the caller shuffles; see ``preference``).

Theory of operation
-------------------
A request is planned at the coordinator's epoch, once it has caught up to the client's:

1. **The group**: the token's write group for a write, its read group for a read
   (``ClusterMetadata.replica_group``); pending replicas are in the write group.
2. **The level over it** (``epochal.tcm.consistency``, DESIGN.md "Consistency levels over
   transitions"): the members whose answers count — the whole group, or for LOCAL_QUORUM its
   members in this node's datacenter — and how many of them must answer (ONE: 1, QUORUM and
   LOCAL_QUORUM: a majority of those counted, ALL: all). A plan no answers could satisfy (no
   group, nobody counted) is refused before anything is sent (``Unavailable``).
3. **Who is asked**: a write goes to the whole group. A read asks the counted members in
   ``preference`` order — this node, then its datacenter, then the rest — data from the first,
   a summary (or digest) from the next ``needed - 1``, the others kept as spares.
4. **The re-check** (DESIGN.md principle 4): every reply carries its replica's epoch. Before
   success the coordinator asks ``recheck``: NOT_SATISFIED while the answers do not meet the
   level in the group of the newest metadata it has checked against (its *view*); CATCH_UP when
   they do but some reply (or this node) revealed a newer epoch — the caller learns that epoch,
   takes it as its view and asks again, once; SATISFIED otherwise. So success is never answered
   on a plan known to be stale; a request whose answers fall short under the newer view fails.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from epochal.errors import Unavailable
from epochal.tcm import ClusterMetadata
from epochal.tcm.consistency import (
    Consistency,
    counted,
    replication_factor,
    required,
    satisfied,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """One request's plan, made at ``epoch``."""

    level: Consistency
    keyspace: str
    token: int
    write: bool
    epoch: int
    group: frozenset[str]  # the token's write (or read) group at ``epoch``
    counting: frozenset[str]  # its members whose answers count for ``level``
    needed: int  # how many of ``counting`` must answer (at least 1)
    factor: int = 0  # the replication factor the level counts against

    def __post_init__(self) -> None:
        assert self.counting <= self.group, (self.counting, self.group)
        assert 1 <= self.needed <= len(self.counting), (self.needed, self.counting)

    def group_at(self, view: ClusterMetadata) -> frozenset[str]:
        """The token's group as ``view`` (the plan's metadata, or a newer one) has it."""
        return view.replica_group(self.keyspace, self.token, write=self.write)


class Recheck(enum.Enum):
    NOT_SATISFIED = "not_satisfied"  # the answers do not meet the level in the view's group
    CATCH_UP = "catch_up"  # they do, but a newer epoch was seen: learn it, then ask again
    SATISFIED = "satisfied"  # they meet it at the newest epoch seen: success may be answered


@dataclass(frozen=True, slots=True)
class Behind:
    """What changed between the plan's metadata and a newer one, for this request."""

    placements: bool  # the token's group
    schema: bool  # the keyspace's definition


class Planner:
    """Plans for the requests this node coordinates, in its datacenter. Remembers the
    datacenter of every node per directory (the directory changes rarely; requests do not)."""

    def __init__(self, node_id: str, datacenter: str) -> None:
        self.node_id = node_id
        self.datacenter = datacenter
        self._datacenters: tuple[object, Mapping[str, str]] = (None, {})

    def datacenters(self, metadata: ClusterMetadata) -> Mapping[str, str]:
        """Node id -> datacenter at ``metadata``."""
        if self._datacenters[0] is not metadata.nodes:
            by_node = {n.node_id: n.datacenter for n in metadata.nodes.values()}
            self._datacenters = (metadata.nodes, by_node)
        return self._datacenters[1]

    def plan(
        self,
        metadata: ClusterMetadata,
        level: Consistency,
        keyspace: str,
        token: int,
        *,
        write: bool,
    ) -> Plan:
        """The plan at ``metadata``'s epoch; raises Unavailable when no answers could meet it."""
        group = metadata.replica_group(keyspace, token, write=write)
        if not group:
            raise Unavailable(
                f"no replica owns token {token} of {keyspace} at epoch {metadata.epoch} "
                "(has the ring been formed?)"
            )
        counting = counted(level, group, self.datacenters(metadata), self.datacenter)
        keyspace_params = metadata.keyspaces[keyspace].replication
        factor = replication_factor(level, keyspace_params, self.datacenter)
        needed = required(level, counting, factor)
        if needed == 0:
            where = f" in {self.datacenter}" if level is Consistency.LOCAL_QUORUM else ""
            raise Unavailable(f"no replica{where} can answer at {level.value}")
        if needed > len(counting):
            raise Unavailable(
                f"{level.value} needs {needed} replicas of {keyspace} (replication factor "
                f"{factor}) but only {len(counting)} own token {token} at epoch "
                f"{metadata.epoch}: the cluster has fewer nodes than the replication factor "
                "(as in Cassandra, a lower level works until more nodes join)"
            )
        return Plan(
            level=level,
            keyspace=keyspace,
            token=token,
            write=write,
            epoch=metadata.epoch,
            group=group,
            counting=counting,
            needed=needed,
            factor=factor,
        )

    def satisfied(self, view: ClusterMetadata, plan: Plan, answered: Collection[str]) -> bool:
        """Whether ``answered`` meet the plan's level in its group at ``view``."""
        group = plan.group_at(view)
        datacenters = self.datacenters(view)
        return satisfied(plan.level, group, answered, datacenters, self.datacenter, plan.factor)

    def needed(self, view: ClusterMetadata, plan: Plan) -> int:
        """How many answers the plan's level needs in its group at ``view`` (``plan.needed``
        at the plan's own metadata)."""
        group = plan.group_at(view)
        counting = counted(plan.level, group, self.datacenters(view), self.datacenter)
        return required(plan.level, counting, plan.factor)

    def recheck(
        self, plan: Plan, view: ClusterMetadata, newest_epoch: int, answered: Collection[str]
    ) -> Recheck:
        """May the request answer success? (See the module docstring, 4.)"""
        if not self.satisfied(view, plan, answered):
            return Recheck.NOT_SATISFIED
        if newest_epoch > view.epoch:
            return Recheck.CATCH_UP
        return Recheck.SATISFIED

    def preference(self, metadata: ClusterMetadata, nodes: Sequence[str]) -> list[str]:
        """``nodes`` in the order a read asks them: this node, then the others of its
        datacenter, then the rest. Within a tier the given order is kept: the caller shuffles
        first, so that summary requests spread over the replicas."""
        datacenters = self.datacenters(metadata)

        def tier(node: str) -> int:
            if node == self.node_id:
                return 0
            return 1 if datacenters.get(node) == self.datacenter else 2

        return sorted(nodes, key=tier)


def behind(old: ClusterMetadata, new: ClusterMetadata, plan: Plan) -> Behind:
    """What the plan (made at ``old``) missed that ``new`` knows."""
    return Behind(
        placements=plan.group_at(old) != plan.group_at(new),
        schema=old.keyspaces.get(plan.keyspace) != new.keyspaces.get(plan.keyspace),
    )
