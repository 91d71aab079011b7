"""Seed 000's bootstrap and decommission tables (A=100, B=200, C=300, RF=2; X joins at 150, then
leaves), step by step. A fourth node D at token 0 closes the ring so that the range (0, 100]
exists exactly as the seed draws it; the seed's tables show "a subset of" the ring."""

from __future__ import annotations

from epochal.tcm import (
    AdvanceSequence,
    PrepareJoin,
    PrepareLeave,
    Step,
)

from .seed_ring import RF2, ring_of_four


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
