"""Seed 000's bootstrap and decommission tables (A=100, B=200, C=300, RF=2; X joins at 150, then
leaves), step by step. A fourth node D at token 0 closes the ring so that the range (0, 100]
exists exactly as the seed draws it; the seed's tables show "a subset of" the ring."""

from __future__ import annotations

from epochal.tcm import (
    AdvanceSequence,
    ClusterMetadata,
    CMSMember,
    CreateKeyspace,
    InitializeCMS,
    PrepareJoin,
    PrepareLeave,
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


def ring_of_four() -> Cluster:
    cluster = Cluster()
    for name, token in (("A", 100), ("B", 200), ("C", 300), ("D", 0)):
        cluster.join(name, token)
    return cluster


def test_bootstrap_of_x_at_150_follows_the_seed_table_step_by_step() -> None:
    cluster = ring_of_four()
    placement = cluster.md.placements[RF2]
    assert [str(r) for r, _, _ in placement.ranges()] == [
        "(300, 0]",
        "(0, 100]",
        "(100, 200]",
        "(200, 300]",
    ]
    x = cluster.register("X")

    # Step 1 (PREPARE): split the ranges containing 150; no ownership change.
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    assert cluster.table() == {
        # range          read      write
        "(0, 100]": ("{A,B}", "{A,B}"),
        "(100, 150]": ("{B,C}", "{B,C}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    # Step 2 (START): X joins the write groups of the ranges it acquires.
    cluster.apply(AdvanceSequence(node_id=x, step=Step.START))
    assert cluster.table() == {
        "(0, 100]": ("{A,B}", "{A,B,X}"),
        "(100, 150]": ("{B,C}", "{B,C,X}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    # Step 3 (MID): X joins the read groups; the nodes giving the ranges up leave them.
    cluster.apply(AdvanceSequence(node_id=x, step=Step.MID))
    assert cluster.table() == {
        "(0, 100]": ("{A,X}", "{A,B,X}"),
        "(100, 150]": ("{B,X}", "{B,C,X}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    # Step 4 (FINISH): the superseded write replicas go.
    cluster.apply(AdvanceSequence(node_id=x, step=Step.FINISH))
    assert cluster.table() == {
        "(0, 100]": ("{A,X}", "{A,X}"),
        "(100, 150]": ("{B,X}", "{B,X}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    assert not cluster.md.sequences


def test_decommission_of_x_follows_the_seed_table_step_by_step() -> None:
    cluster = ring_of_four()
    x = cluster.join("X", 150)
    cluster.apply(PrepareLeave(node_id=x))
    assert cluster.table() == {
        "(0, 100]": ("{A,X}", "{A,X}"),
        "(100, 150]": ("{B,X}", "{B,X}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    # Step 1 (START): the nodes taking over X's ranges join the write groups.
    cluster.apply(AdvanceSequence(node_id=x, step=Step.START))
    assert cluster.table() == {
        "(0, 100]": ("{A,X}", "{A,B,X}"),
        "(100, 150]": ("{B,X}", "{B,C,X}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    # Step 2 (MID): they join the read groups, X leaves them.
    cluster.apply(AdvanceSequence(node_id=x, step=Step.MID))
    assert cluster.table() == {
        "(0, 100]": ("{A,B}", "{A,B,X}"),
        "(100, 150]": ("{B,C}", "{B,C,X}"),
        "(150, 200]": ("{B,C}", "{B,C}"),
    }
    # Steps 3 and 4 (FINISH): X leaves the write groups, then (100, 150] and (150, 200], now
    # identical, merge back into (100, 200].
    cluster.apply(AdvanceSequence(node_id=x, step=Step.FINISH))
    placement = cluster.md.placements[RF2]
    table = {
        str(r): (cluster._names(read), cluster._names(write))
        for r, read, write in placement.ranges()
    }
    assert table["(0, 100]"] == ("{A,B}", "{A,B}")
    assert table["(100, 200]"] == ("{B,C}", "{B,C}")
    assert "(100, 150]" not in table and "(150, 200]" not in table
