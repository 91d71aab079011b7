"""The progress barrier's pure part: which level a set of acknowledgements meets, the fallback
chain down to the configured minimum, "waived" below QUORUM, and which nodes a step waits for."""

from __future__ import annotations

import pytest

from epochal.tcm import AdvanceSequence, PrepareJoin, Step, apply_transformation
from epochal.tcm.barrier import (
    DEFAULT_MINIMUM,
    FALLBACK_CHAIN,
    BarrierLevel,
    ProgressBarrier,
    barrier_for_step,
    chain_down_to,
)

from .seed_ring import ring_of_four

L = BarrierLevel
# Two datacenters: a1..a3 in dc1, b1..b2 in dc2; one affected range replicated by all five.
LOCATIONS = {
    "a1": ("dc1", "r1"),
    "a2": ("dc1", "r1"),
    "a3": ("dc1", "r2"),
    "b1": ("dc2", "r1"),
    "b2": ("dc2", "r1"),
}


def barrier(minimum: BarrierLevel = DEFAULT_MINIMUM, local: str = "a1") -> ProgressBarrier:
    return ProgressBarrier(
        epoch=7,
        unions=(frozenset(LOCATIONS),),
        locations=LOCATIONS,
        local_node=local,
        minimum=minimum,
    )


@pytest.mark.parametrize(
    ("acked", "met"),
    [
        # acked                    ALL  EACH_Q QUORUM LOCAL_Q ONE  NODE_LOCAL (local = a1)
        ({"a1", "a2", "a3", "b1", "b2"}, (1, 1, 1, 1, 1, 1)),
        ({"a1", "a2", "b1", "b2"}, (0, 1, 1, 1, 1, 1)),
        ({"a1", "a2", "b1"}, (0, 0, 1, 1, 1, 1)),  # dc2 has 1 of 2: no majority there
        ({"a1", "a2"}, (0, 0, 0, 1, 1, 1)),  # 2 of 5 overall, 2 of 3 in dc1
        ({"a1", "b1", "b2"}, (0, 0, 1, 0, 1, 1)),  # dc1 has 1 of 3
        ({"a2"}, (0, 0, 0, 0, 1, 0)),  # the driving node a1 has not acknowledged
        (set(), (0, 0, 0, 0, 0, 0)),
    ],
)
def test_each_level_counts_the_acknowledgements_as_its_name_says(
    acked: set[str], met: tuple[int, ...]
) -> None:
    levels = (L.ALL, L.EACH_QUORUM, L.QUORUM, L.LOCAL_QUORUM, L.ONE, L.NODE_LOCAL)
    assert tuple(int(barrier().met(level, acked)) for level in levels) == met


def test_local_quorum_is_the_driving_nodes_datacenter() -> None:
    assert barrier(local="b1").met(L.LOCAL_QUORUM, {"b1", "b2"})
    assert not barrier(local="a1").met(L.LOCAL_QUORUM, {"a1", "b1", "b2"})
    # A range with no replica in the driving node's datacenter has nothing to wait for there.
    dc2_only = ProgressBarrier(
        epoch=3,
        unions=(frozenset({"b1", "b2"}),),
        locations=LOCATIONS,
        local_node="a1",
        minimum=L.LOCAL_QUORUM,
    )
    assert dc2_only.met(L.LOCAL_QUORUM, {"a1"})


def test_every_affected_range_must_meet_the_level() -> None:
    two_ranges = ProgressBarrier(
        epoch=3,
        unions=(frozenset({"a1", "a2", "a3"}), frozenset({"a3", "b1", "b2"})),
        locations=LOCATIONS,
        local_node="a1",
        minimum=L.NODE_LOCAL,
    )
    assert two_ranges.met(L.QUORUM, {"a1", "a2", "b1", "b2"})
    assert not two_ranges.met(L.QUORUM, {"a1", "a2", "a3"})  # the second range has only a3


def test_the_fallback_chain_goes_down_to_the_minimum_and_no_further() -> None:
    assert DEFAULT_MINIMUM is L.EACH_QUORUM
    assert chain_down_to(L.EACH_QUORUM) == (L.EACH_QUORUM,)
    assert chain_down_to(L.NODE_LOCAL) == FALLBACK_CHAIN
    assert FALLBACK_CHAIN == (L.EACH_QUORUM, L.QUORUM, L.LOCAL_QUORUM, L.ONE, L.NODE_LOCAL)
    lenient = barrier(minimum=L.ONE)
    assert lenient.fall_back(L.EACH_QUORUM) is L.QUORUM
    assert lenient.fall_back(L.LOCAL_QUORUM) is L.ONE
    assert lenient.fall_back(L.ONE) is None  # the minimum timed out: the barrier fails
    assert barrier().fall_back(L.EACH_QUORUM) is None
    with pytest.raises(ValueError, match="barrier minimum ALL is not one of"):
        barrier(minimum=L.ALL)


def test_the_outcome_is_the_strongest_level_met_and_below_quorum_it_is_waived() -> None:
    lenient = barrier(minimum=L.NODE_LOCAL)
    passed = lenient.outcome({"a1", "a2", "b1"})
    assert passed is not None and passed.level is L.QUORUM
    assert (passed.verdict, passed.waived) == ("passed", False)
    waived = lenient.outcome({"a1", "a2"})
    assert waived is not None and waived.level is L.LOCAL_QUORUM
    assert (waived.verdict, waived.waived) == ("waived", True)
    # With the default minimum the same acknowledgements are not enough: keep waiting.
    assert barrier().outcome({"a1", "a2", "b1"}) is None
    assert barrier().outcome({"a1", "a2", "b1", "b2"}).level is L.EACH_QUORUM  # type: ignore[union-attr]


def test_a_join_step_waits_for_the_old_and_new_replicas_of_the_ranges_it_locked() -> None:
    cluster = ring_of_four()  # A=100, B=200, C=300, D=0, RF 2
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    before = cluster.md
    after = apply_transformation(before, AdvanceSequence(node_id=x, step=Step.START))
    step = barrier_for_step(
        before.placements,
        after.placements,
        after.sequences[x].locked,
        epoch=after.epoch,
        locations=after.locations(),
        local_node=x,
    )
    named = sorted("".join(sorted(cluster.names[n] for n in union)) for union in step.unions)
    # (0, 100]: {A,B} gains X for writes; (100, 150]: {B,C} gains X. Nothing else is asked.
    assert named == ["ABX", "BCX"]
    assert not step.met(L.EACH_QUORUM, {x})
    a, b = (n for n, name in cluster.names.items() if name in "AB")
    assert step.met(L.EACH_QUORUM, {a, b, x})


def test_a_dead_node_is_not_waited_for() -> None:
    cluster = ring_of_four()
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    after = apply_transformation(cluster.md, AdvanceSequence(node_id=x, step=Step.START))
    a = next(n for n, name in cluster.names.items() if name == "A")
    step = barrier_for_step(
        cluster.md.placements,
        after.placements,
        after.sequences[x].locked,
        epoch=after.epoch,
        locations=after.locations(),
        local_node=x,
        dead=frozenset({a}),
    )
    assert all(a not in union for union in step.unions)
