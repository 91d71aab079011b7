"""ClusterMetadata: the immutable state after some epoch of the log.

Epoch N is the state after the Nth applied transformation; ``empty()`` is epoch 0. Nothing here
changes in place: transformations build a new object with ``dataclasses.replace``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochal.tcm.directory import NodeInfo
from epochal.tcm.placement import Placement
from epochal.tcm.replication import Location, TokenMap
from epochal.tcm.schema import Keyspace, ReplicationParams, frozen_map
from epochal.tcm.sequences import InProgressSequence
from epochal.tcm.tokens import TokenRange

if TYPE_CHECKING:  # leases imports this module: its transformation changes ClusterMetadata
    from epochal.tcm.leases import LeaseGrant

Epoch = int
EMPTY_EPOCH: Epoch = 0


class CMSRole(enum.Enum):
    """A CMS instance's part in the metadata log's Paxos (DESIGN.md "Membership").

    LEARNER: a registered candidate; follows the log, counts in no quorum.
    JOINING: being added, first step done (the write set): the log is sent to it and it catches
             up; it still counts in no quorum.
    VOTER:   second step done (the read set as well): a voter in both Paxos phases."""

    VOTER = "voter"
    JOINING = "joining"
    LEARNER = "learner"


@dataclass(frozen=True, slots=True)
class CMSMember:
    member_id: str
    address: str
    role: CMSRole = CMSRole.VOTER


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterMetadata:
    epoch: Epoch
    keyspaces: Mapping[str, Keyspace] = field(default_factory=frozen_map)
    nodes: Mapping[str, NodeInfo] = field(default_factory=frozen_map)
    cms_members: tuple[CMSMember, ...] = ()
    next_node_number: int = 1
    tokens: TokenMap = field(default_factory=TokenMap)
    placements: Mapping[ReplicationParams, Placement] = field(default_factory=frozen_map)
    sequences: Mapping[str, InProgressSequence] = field(default_factory=frozen_map)  # by node id
    reconcile_leases: tuple[LeaseGrant, ...] = ()  # by keyspace, range, epoch (epochal.tcm.leases)
    # reconciler id -> the host:port it advertises, sorted by id (epochal.tcm.reconcilers)
    reconcilers: Mapping[str, str] = field(default_factory=frozen_map)

    @classmethod
    def empty(cls) -> ClusterMetadata:
        return cls(epoch=EMPTY_EPOCH)

    @property
    def initialized(self) -> bool:
        return bool(self.cms_members)

    def cms_member(self, member_id: str) -> CMSMember | None:
        return next((m for m in self.cms_members if m.member_id == member_id), None)

    def cms_with_role(self, *roles: CMSRole) -> frozenset[str]:
        return frozenset(m.member_id for m in self.cms_members if m.role in roles)

    @property
    def cms_voters(self) -> frozenset[str]:
        return self.cms_with_role(CMSRole.VOTER)

    def keyspace(self, name: str) -> Keyspace | None:
        return self.keyspaces.get(name)

    def lease_of(self, keyspace: str, token_range: TokenRange) -> LeaseGrant | None:
        """The reconciler lease ``token_range`` of ``keyspace`` is under: the grant with the
        highest epoch (its token) among the keyspace's grants whose range intersects it; None
        when no grant does (token 0)."""
        return max(
            (
                g
                for g in self.reconcile_leases
                if g.keyspace == keyspace and g.range.intersects(token_range)
            ),
            key=lambda g: g.epoch,
            default=None,
        )

    def locations(self) -> dict[str, Location]:
        return {n.node_id: (n.datacenter, n.rack) for n in self.nodes.values()}

    def replica_group(self, keyspace: str, token: int, *, write: bool) -> frozenset[str]:
        """The write (or read) group of the range owning ``token`` in ``keyspace``'s placement
        at this epoch; empty for an unknown keyspace or a ring without tokens. A write's
        consistency level counts over the write group, a read's over the read group."""
        placement = self._placement(keyspace)
        if placement is None:
            return frozenset()
        index = placement.index_of(token)
        return placement.writes[index] if write else placement.reads[index]

    def token_range(self, keyspace: str, token: int) -> TokenRange | None:
        """The range of ``keyspace``'s placement that holds ``token`` at this epoch (the whole
        ring when the ring has one token); None for an unknown keyspace or a ring without
        tokens."""
        placement = self._placement(keyspace)
        if placement is None:
            return None
        index = placement.index_of(token)
        return TokenRange(placement.points[index - 1], placement.points[index])

    def _placement(self, keyspace: str) -> Placement | None:
        """``keyspace``'s placement at this epoch; None for an unknown keyspace or a ring
        without tokens."""
        found = self.keyspaces.get(keyspace)
        placement = None if found is None else self.placements.get(found.replication)
        return placement if placement is not None and placement.points else None
