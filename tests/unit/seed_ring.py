"""Seed 000's ring, built through the real transformations: a one-member CMS, keyspace ``ks`` at
RF 2 (or the keyspaces asked for), each node named (A, B, ...) and joined at one token, one epoch
a transformation, every metadata kept. Shared by the tests of the seed's tables, topology,
barriers, movements, replica groups, routing, the coordinator's plan and quorum intersection."""

from __future__ import annotations

from collections.abc import Mapping

from epochal.tcm import (
    AdvanceSequence,
    ClusterMetadata,
    CMSMember,
    CreateKeyspace,
    InitializeCMS,
    PrepareJoin,
    Register,
    ReplicationParams,
    Step,
    apply_transformation,
)

RF2 = ReplicationParams.simple(2)
SHOWN = ("(0, 100]", "(100, 150]", "(150, 200]")
SEED_TOKENS = {"A": 100, "B": 200, "C": 300, "D": 0}
JOIN_STEPS = (Step.START, Step.MID, Step.FINISH)


class Cluster:
    """Names the seed's nodes; applies transformations one epoch each and keeps every metadata
    in ``history``. A node's address is ``address`` with its name in it; its data centre is
    ``datacenters[name]`` (dc1 when not named)."""

    def __init__(
        self,
        keyspaces: Mapping[str, ReplicationParams] | None = None,
        *,
        datacenters: Mapping[str, str] | None = None,
        address: str = "{name}:7000",
    ) -> None:
        self.history = [ClusterMetadata.empty()]
        self.names: dict[str, str] = {}  # node id -> name
        self.ids: dict[str, str] = {}  # name -> node id
        self.datacenters = dict(datacenters or {})
        self.address = address
        self.apply(InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),)))
        for name, replication in (keyspaces or {"ks": RF2}).items():
            self.apply(CreateKeyspace(name=name, replication=replication))

    @property
    def md(self) -> ClusterMetadata:
        return self.history[-1]

    def apply(self, *transformations: object) -> ClusterMetadata:
        for transformation in transformations:
            self.history.append(apply_transformation(self.md, transformation))  # type: ignore[arg-type]
        return self.md

    def register(self, name: str) -> str:
        self.apply(
            Register(
                address=self.address.format(name=name),
                datacenter=self.datacenters.get(name, "dc1"),
                rack="r1",
                version="1.0.0",
            )
        )
        node_id = f"node-{self.md.next_node_number - 1}"
        self.names[node_id] = name
        self.ids[name] = node_id
        return node_id

    def join(self, name: str, token: int, steps: tuple[Step, ...] = JOIN_STEPS) -> str:
        """Register ``name`` and join it at ``token``: PrepareJoin, then ``steps`` of the join
        (every step unless fewer are asked for)."""
        node_id = self.register(name)
        self.apply(PrepareJoin(node_id=node_id, tokens=(token,)))
        self.advance(node_id, *steps)
        return node_id

    def advance(self, node_id: str, *steps: Step) -> ClusterMetadata:
        return self.apply(*(AdvanceSequence(node_id=node_id, step=step) for step in steps))

    def of(self, *names: str) -> frozenset[str]:
        """The node ids of the named nodes."""
        return frozenset(self.ids[name] for name in names)

    def table(self) -> dict[str, tuple[str, str]]:
        """range -> (read group, write group), node names sorted, for the ranges the seed shows."""
        placement = self.md.placements[RF2]
        shown = {}
        for token_range, read, write in placement.ranges():
            key = str(token_range)
            if key in SHOWN:
                shown[key] = (self._names(read), self._names(write))
        return shown

    def _names(self, group: frozenset[str]) -> str:
        return "{" + ",".join(sorted(self.names[n] for n in group)) + "}"


def ring(tokens: Mapping[str, int], cluster: Cluster | None = None) -> Cluster:
    """The named nodes joined in order, each at its token (into ``cluster`` when given)."""
    cluster = cluster or Cluster()
    for name, token in tokens.items():
        cluster.join(name, token)
    return cluster


def ring_of_four() -> Cluster:
    """The seed's A=100, B=200, C=300, and D=0 closing the ring."""
    return ring(SEED_TOKENS)
