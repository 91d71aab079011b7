"""ClusterMetadata: the immutable state after some epoch of the log.

Epoch N is the state after the Nth applied transformation; ``empty()`` is epoch 0. Nothing here
changes in place: transformations build a new object with ``dataclasses.replace``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from epochal.tcm.directory import NodeInfo
from epochal.tcm.placement import Placement
from epochal.tcm.replication import Location, TokenMap
from epochal.tcm.schema import Keyspace, ReplicationParams, frozen_map
from epochal.tcm.sequences import InProgressSequence

Epoch = int
EMPTY_EPOCH: Epoch = 0


@dataclass(frozen=True, slots=True)
class CMSMember:
    member_id: str
    address: str


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

    @classmethod
    def empty(cls) -> ClusterMetadata:
        return cls(epoch=EMPTY_EPOCH)

    @property
    def initialized(self) -> bool:
        return bool(self.cms_members)

    def keyspace(self, name: str) -> Keyspace | None:
        return self.keyspaces.get(name)

    def locations(self) -> dict[str, Location]:
        return {n.node_id: (n.datacenter, n.rack) for n in self.nodes.values()}
