"""Range locks, cancel step by step, replace and move, and the wire round trip of topology."""

from __future__ import annotations

import pytest

from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    CreateKeyspace,
    NodeState,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    RangeLocked,
    Rejected,
    ReplicationParams,
    Step,
)
from epochal.wire.metadata import decode_metadata, encode_metadata

from .seed_ring import RF2, ring

STEPS = (Step.START, Step.MID, Step.FINISH)


def test_an_overlapping_operation_is_rejected_naming_the_holder() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 400})
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    holder_epoch = cluster.md.epoch
    y = cluster.register("Y")
    rejection = PrepareJoin(node_id=y, tokens=(160,)).validate(cluster.md)
    assert isinstance(rejection, RangeLocked)
    assert rejection.holder_node_id == x and rejection.holder_epoch == holder_epoch
    assert f"locked by the join of {x} prepared at epoch {holder_epoch}" in rejection.message


def test_non_overlapping_operations_run_concurrently_and_cancel_releases() -> None:
    # Eight nodes, single tokens, RF 2: joins on opposite sides of the ring do not touch.
    cluster = ring({f"N{i}": i * 1000 for i in range(8)})
    x, y = cluster.register("X"), cluster.register("Y")
    cluster.apply(PrepareJoin(node_id=x, tokens=(1500,)))
    cluster.apply(PrepareJoin(node_id=y, tokens=(5500,)))
    for step in STEPS:
        cluster.apply(AdvanceSequence(node_id=x, step=step))
        cluster.apply(AdvanceSequence(node_id=y, step=step))
    assert cluster.md.nodes[x].state is NodeState.JOINED
    assert cluster.md.nodes[y].state is NodeState.JOINED
    # A leave locks X's neighbourhood until it is cancelled.
    cluster.apply(PrepareLeave(node_id=x))
    z = cluster.register("Z")
    assert isinstance(PrepareJoin(node_id=z, tokens=(1600,)).validate(cluster.md), RangeLocked)
    cluster.apply(CancelSequence(node_id=x))
    assert PrepareJoin(node_id=z, tokens=(1600,)).validate(cluster.md) is None
    assert cluster.md.nodes[x].state is NodeState.JOINED


def test_cancel_undoes_one_step_per_epoch_back_to_the_start() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    before = cluster.md
    x = cluster.register("X")
    registered = cluster.md
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    after_prepare = cluster.md
    cluster.apply(AdvanceSequence(node_id=x, step=Step.START))
    after_start = cluster.md
    cluster.apply(AdvanceSequence(node_id=x, step=Step.MID))

    cluster.apply(CancelSequence(node_id=x))  # undo MID
    assert cluster.md.placements == after_start.placements
    assert cluster.md.tokens == after_start.tokens
    assert (
        AdvanceSequence(node_id=x, step=Step.MID).validate(cluster.md).rule == "sequence_cancelling"
    )
    cluster.apply(CancelSequence(node_id=x))  # undo START
    assert cluster.md.placements == after_prepare.placements
    cluster.apply(CancelSequence(node_id=x))  # undo PREPARE: merged back, lock released
    assert cluster.md.placements == registered.placements == before.placements
    assert not cluster.md.sequences
    assert cluster.md.nodes[x].state is NodeState.LEFT  # seed 003: a failed bootstrap leaves


def test_a_cancel_of_a_step_that_is_no_longer_the_last_is_refused() -> None:
    """A cancel decided on a stale view (the driver took START meanwhile) must not undo START
    under an entry id that names PREPARE: it is refused, and the canceller looks again."""
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    seen = cluster.md
    cluster.apply(AdvanceSequence(node_id=x, step=Step.START))
    stale = CancelSequence(node_id=x, last_step=seen.sequences[x].done)
    rejection = stale.validate(cluster.md)
    assert rejection is not None and rejection.rule == "stale_cancel"
    assert "last step is start, not prepare" in rejection.message
    cluster.apply(CancelSequence(node_id=x, last_step=Step.START))
    cluster.apply(CancelSequence(node_id=x, last_step=Step.PREPARE))
    assert not cluster.md.sequences


def test_replace_hands_the_dead_nodes_ranges_to_the_replacement() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    dead = next(n for n, name in cluster.names.items() if name == "B")
    r = cluster.register("R")
    cluster.apply(PrepareReplace(node_id=r, replaced=dead))
    for step in STEPS:
        cluster.apply(AdvanceSequence(node_id=r, step=step))
    placement = cluster.md.placements[RF2]
    assert all(dead not in w for w in placement.writes)
    assert cluster.md.tokens.owners[r] == (200,)
    assert cluster.md.nodes[dead].state is NodeState.LEFT
    assert cluster.table()["(0, 100]"] == ("{A,R}", "{A,R}")


def test_move_changes_tokens_and_merges_the_old_split_point() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    b = next(n for n, name in cluster.names.items() if name == "B")
    cluster.apply(PrepareMove(node_id=b, tokens=(250,)))
    assert 250 in cluster.md.placements[RF2].points
    for step in STEPS:
        cluster.apply(AdvanceSequence(node_id=b, step=step))
    assert cluster.md.placements[RF2].points == (0, 100, 250, 300)
    assert cluster.md.nodes[b].state is NodeState.JOINED


def test_too_few_nodes_for_the_replication_factor_refuses_a_decommission() -> None:
    cluster = ring({"A": 100, "B": 200})
    a = next(iter(cluster.names))
    rejection = PrepareLeave(node_id=a).validate(cluster.md)
    assert rejection.rule == "too_few_nodes" and "replication factor 2" in rejection.message


def test_new_replication_params_wait_for_running_sequences() -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300})
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    create = CreateKeyspace(name="other", replication=ReplicationParams.simple(3))
    assert create.validate(cluster.md).rule == "sequence_in_progress"
    assert CreateKeyspace(name="same", replication=RF2).validate(cluster.md) is None


@pytest.mark.parametrize("steps", [0, 1, 2])
def test_metadata_with_topology_round_trips_through_the_wire(steps: int) -> None:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150, 250)))
    for step in STEPS[:steps]:
        cluster.apply(AdvanceSequence(node_id=x, step=step))
    decoded = decode_metadata(encode_metadata(cluster.md))
    assert decoded == cluster.md
    assert encode_metadata(decoded) == encode_metadata(cluster.md)


def test_a_move_to_tokens_listed_twice_is_refused_where_the_commit_arrives() -> None:
    """One of the node's own tokens twice passes the rule applied to chosen entries (kept as it
    was) and would break the token map: the CMS refuses it at its edge (check_input)."""
    cluster = ring({"A": 100, "B": 200, "C": 300})
    a = next(n for n, name in cluster.names.items() if name == "A")
    with pytest.raises(Rejected, match="distinct"):
        PrepareMove(node_id=a, tokens=(100, 100, 5)).check_input()
    PrepareMove(node_id=a, tokens=(100, 5)).check_input()
    assert PrepareMove(node_id=a, tokens=(100, 5)).validate(cluster.md) is None
