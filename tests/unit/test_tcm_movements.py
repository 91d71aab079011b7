"""The movement map of a sequence, and the placements a step's (or undo's) barrier compares."""

from __future__ import annotations

from epochal.tcm import AdvanceSequence, CancelSequence, PrepareJoin, PrepareReplace, Step
from epochal.tcm.movements import movements
from epochal.tcm.topology import placements_before_last_change

from .seed_ring import RF2, Cluster, ring


def named(cluster: Cluster, node_ids: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(cluster.names[n] for n in node_ids)


def test_a_join_receives_each_range_it_gains_from_the_node_giving_it_up() -> None:
    # RF 2 on A=100, B=200, C=300, D=0; E joins at 150 and receives only the ranges whose
    # replicas change, each from the node that leaves its group.
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    e = cluster.register("E")
    cluster.apply(PrepareJoin(node_id=e, tokens=(150,)))
    cluster.apply(AdvanceSequence(node_id=e, step=Step.START))
    moves = movements(cluster.md, cluster.md.sequences[e])
    got = {str(m.range): (cluster.names[m.receiver], named(cluster, m.sources)) for m in moves}
    # (100, 150]: {B, C} -> {E, B}: C gives it up. (0, 100]: {A, B} -> {A, E}: B gives it up.
    assert got == {"(100, 150]": ("E", ("C",)), "(0, 100]": ("E", ("B",))}
    for move in moves:
        assert move.params == RF2
        # Strict by default; the other current read replicas are the allowed fallback.
        placement = cluster.md.placements[RF2]
        readers = placement.reads[placement.index_of(move.range.right)]
        assert set(move.sources) | set(move.fallback) == readers
        assert not set(move.sources) & set(move.fallback)


def test_a_replacement_streams_from_the_live_replicas_never_the_dead_one() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    dead = next(n for n, name in cluster.names.items() if name == "B")
    r = cluster.register("R")
    cluster.apply(PrepareReplace(node_id=r, replaced=dead))
    cluster.apply(AdvanceSequence(node_id=r, step=Step.START))
    moves = movements(cluster.md, cluster.md.sequences[r])
    assert moves
    for move in moves:
        assert cluster.names[move.receiver] == "R"
        assert dead not in move.sources and dead not in move.fallback
        assert move.sources  # the surviving replica of each range
        assert not move.fallback


def test_the_barrier_before_compares_each_step_with_the_one_before_it() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    e = cluster.register("E")
    cluster.apply(PrepareJoin(node_id=e, tokens=(150,)))
    # PREPARE changes no group: its barrier compares the split placements with themselves.
    prepared = cluster.md.placements
    assert placements_before_last_change(prepared, cluster.md.sequences[e]) == prepared
    before = prepared
    for step in (Step.START, Step.MID):
        cluster.apply(AdvanceSequence(node_id=e, step=step))
        after = cluster.md.placements
        assert after != before
        assert placements_before_last_change(after, cluster.md.sequences[e]) == before
        before = after


def test_the_barrier_before_an_undo_is_the_placement_the_undo_left() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    e = cluster.register("E")
    cluster.apply(PrepareJoin(node_id=e, tokens=(150,)))
    cluster.apply(AdvanceSequence(node_id=e, step=Step.START))
    started = cluster.md.placements
    cluster.apply(AdvanceSequence(node_id=e, step=Step.MID))
    at_mid = cluster.md.placements
    cluster.apply(CancelSequence(node_id=e))  # undoes MID
    sequence = cluster.md.sequences[e]
    assert sequence.cancelling and sequence.done is Step.START
    assert cluster.md.placements == started
    # The undo's barrier compares what it left with what it undid.
    assert placements_before_last_change(cluster.md.placements, sequence) == at_mid
