"""The nodes of seed 000's tables, joined through the real transformations: keyspace ``ks`` at
RF 2 on a one-member CMS, each node named (A, B, ...) and joined at one token, one epoch a
transformation. Shared by the tests of the seed's tables, topology, barriers, movements and
mutation ids."""

from __future__ import annotations

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


class Cluster:
    """Names the seed's nodes; applies transformations one epoch each."""

    def __init__(self) -> None:
        self.md = apply_transformation(
            ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),))
        )
        self.names: dict[str, str] = {}
        self.apply(CreateKeyspace(name="ks", replication=RF2))

    def apply(self, transformation: object) -> None:
        self.md = apply_transformation(self.md, transformation)  # type: ignore[arg-type]

    def register(self, name: str) -> str:
        self.apply(Register(address=f"{name}:7000", datacenter="dc1", rack="r1", version="1.0.0"))
        node_id = f"node-{self.md.next_node_number - 1}"
        self.names[node_id] = name
        return node_id

    def join(self, name: str, token: int) -> str:
        node_id = self.register(name)
        self.apply(PrepareJoin(node_id=node_id, tokens=(token,)))
        for step in (Step.START, Step.MID, Step.FINISH):
            self.apply(AdvanceSequence(node_id=node_id, step=step))
        return node_id

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


def ring(tokens: dict[str, int]) -> Cluster:
    """The named nodes joined in order, each at its token."""
    cluster = Cluster()
    for name, token in tokens.items():
        cluster.join(name, token)
    return cluster


def ring_of_four() -> Cluster:
    """The seed's A=100, B=200, C=300, and D=0 closing the ring."""
    return ring({"A": 100, "B": 200, "C": 300, "D": 0})
