"""The quorum-intersection checker (seed 000, Test Plan item 1): it agrees with enumerating every
pair of quorums, passes the seed's bootstrap behind barriers for every way the barriers can be
met, and bites where the seed says it must: without barriers, and when a cancel undoes two steps
in one epoch. The placement simulator runs it over every history (tests/sim/test_placement_sim)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from epochal.sim.placement import run_placement_seed
from epochal.sim.quorums import Gate, check_history, disjoint_quorums, majority
from epochal.tcm import (
    CancelSequence,
    ClusterMetadata,
    PrepareJoin,
    ReplicationParams,
    Step,
    apply_transformation,
)
from epochal.tcm.barrier import BarrierLevel, barrier_for_step

from ..unit.seed_ring import Cluster, ring

RF3 = ReplicationParams.simple(3)


def test_the_counting_rule_agrees_with_enumerating_every_pair_of_quorums() -> None:
    nodes = ("a", "b", "c", "d", "e")
    subsets = [frozenset(c) for k in range(1, 5) for c in itertools.combinations(nodes, k)]
    for read, write in itertools.product(subsets, repeat=2):
        for live in (read | write, (read | write) - {"a"}, (read | write) - {"a", "c"}):
            brute = any(
                not set(q_read) & set(q_write)
                for q_read in itertools.combinations(sorted(read & live), majority(read))
                for q_write in itertools.combinations(sorted(write & live), majority(write))
            )
            witness = disjoint_quorums(read, write, live)
            assert (witness is not None) == brute, (read, write, live)
            if witness is not None:
                q_read, q_write = witness
                assert not q_read & q_write and q_read <= read & live and q_write <= write & live
                assert (len(q_read), len(q_write)) == (majority(read), majority(write))


class SeedJoin(Cluster):
    """Seed 000's example: A, B, C replicate (100, 150] at RF 3; X joins at 150 and takes it over
    from A (read A,B,C -> B,C,X). Tokens: D=100, B=200, C=300, A=0, so the replicas of 150 are
    B, C, A before and X, B, C after. One metadata per epoch."""

    def __init__(self) -> None:
        super().__init__({"ks": RF3})
        ring({"D": 100, "B": 200, "C": 300, "A": 0}, self)
        self.x = self.register("X")
        self.prepared = len(self.history)

    def since_ring(self) -> list[ClusterMetadata]:
        """The history from the ring of four on (its own joins ran without barriers)."""
        return self.history[self.prepared - 1 :]

    def join_steps(self) -> list[ClusterMetadata]:
        """PREPARE, START, MID, FINISH of X, one metadata each."""
        self.apply(PrepareJoin(node_id=self.x, tokens=(150,)))
        self.advance(self.x, Step.START, Step.MID, Step.FINISH)
        return self.history[-4:]

    def gate(self, before: ClusterMetadata, after: ClusterMetadata, acked: set[str]) -> Gate:
        """The barrier on ``after``'s step, acknowledged by ``acked`` (names or ids)."""
        ids = {n for n, name in self.names.items() if name in acked or n in acked}
        sequence = after.sequences.get(self.x) or before.sequences[self.x]
        return Gate(
            committed=after.epoch + 1,
            epoch=after.epoch,
            acked=frozenset(ids),
            level=BarrierLevel.QUORUM,
            locked=sequence.locked,
        )

    def unions(self, before: ClusterMetadata, after: ClusterMetadata) -> tuple[frozenset, ...]:
        sequence = after.sequences[self.x]
        step = barrier_for_step(
            before.placements,
            after.placements,
            sequence.locked,
            epoch=after.epoch,
            locations=after.locations(),
            local_node=self.x,
        )
        return step.unions


def test_the_seeds_bootstrap_behind_barriers_passes_for_every_quorum_of_acknowledgements() -> None:
    join = SeedJoin()
    steps = join.join_steps()  # PREPARE, START, MID, FINISH
    before = [join.history[join.prepared - 1], *steps[:2]]
    # For the three gated steps (START, MID, FINISH), every set of acknowledgements that meets
    # QUORUM on the previous step's barrier: the checker finds no pair of quorums that misses.
    choices = []
    for old, new in zip(before, steps[:-1], strict=True):
        unions = join.unions(old, new)
        nodes = sorted(frozenset().union(*unions))
        choices.append(
            [
                frozenset(acked)
                for k in range(len(nodes) + 1)
                for acked in itertools.combinations(nodes, k)
                if all(len(union & set(acked)) > len(union) // 2 for union in unions)
            ]
        )
    assert all(len(c) >= 2 for c in choices)
    checked = 0
    for acks in itertools.product(*choices):
        gates = [
            join.gate(old, new, set(acked))
            for old, new, acked in zip(before, steps[:-1], acks, strict=True)
        ]
        assert check_history(join.since_ring(), gates) == [], acks
        checked += 1
    assert checked == len(choices[0]) * len(choices[1]) * len(choices[2])


def test_without_barriers_the_seeds_stale_coordinators_miss_each_other() -> None:
    join = SeedJoin()
    prepare, start, mid, finish = join.join_steps()
    assert check_history(join.since_ring(), gates=[])

    def names(group: frozenset[str]) -> str:
        return "".join(sorted(join.names[n] for n in group))

    def at_150(history: list[ClusterMetadata]):  # type: ignore[no-untyped-def]
        """The violation the checker reports for the range X takes over, (100, 150]."""
        found = check_history(history, gates=[], limit=100)
        return next(v for v in found if str(v.piece) == "(100, 150]")

    # Seed 000, first example: coordinator 1 at epoch 101 (START) reads from A,B,C; coordinator
    # 2 at 103 (FINISH) writes to B,C,X. Their quorums can be disjoint.
    first = at_150([start, finish])
    assert (first.read_epoch, first.write_epoch) == (start.epoch, finish.epoch)
    assert (names(first.read_group), names(first.write_group)) == ("ABC", "BCX")
    # Second example: coordinator 3 at 100 (PREPARE) writes to A,B,C; coordinator 4 at 102
    # (MID) reads from B,C,X.
    second = at_150([prepare, mid])
    assert (second.read_epoch, second.write_epoch) == (mid.epoch, prepare.epoch)
    assert (names(second.read_group), names(second.write_group)) == ("BCX", "ABC")
    assert not second.read_quorum & second.write_quorum


def test_a_barrier_met_only_at_one_is_waived_and_the_checker_shows_why() -> None:
    join = SeedJoin()
    steps = join.join_steps()
    before = [join.history[join.prepared - 1], *steps[:2]]
    # Only X acknowledges each step (ONE): a stale coordinator can still collect A,B.
    gates = [join.gate(old, new, {"X"}) for old, new in zip(before, steps[:-1], strict=True)]
    assert check_history(join.since_ring(), gates)


def test_a_cancel_that_undoes_two_steps_in_one_epoch_is_caught() -> None:
    join = SeedJoin()
    join.apply(PrepareJoin(node_id=join.x, tokens=(150,)))
    join.advance(join.x, Step.START, Step.MID)
    mid = join.md
    # The rule: CancelSequence undoes MID, then START, then PREPARE, one epoch each, each behind
    # a barrier. That history passes.
    proper = SeedJoin()
    proper.history = list(join.history)
    for _ in range(3):
        proper.apply(CancelSequence(node_id=join.x))
    everyone = {"A", "B", "C", "D", "X"}
    gates = [
        proper.gate(old, new, everyone)
        for old, new in itertools.pairwise(proper.history[join.prepared :])
    ]
    assert check_history(proper.since_ring(), gates) == []
    # Undoing MID and START in one epoch: read B,C,X at MID, write A,B,C one epoch later; the
    # barrier on MID cannot help, since the two epochs are adjacent.
    both = apply_transformation(
        apply_transformation(mid, CancelSequence(node_id=join.x)), CancelSequence(node_id=join.x)
    )
    squashed = [*join.history, replace(both, epoch=mid.epoch + 1)]
    gates = [
        join.gate(old, new, everyone) for old, new in itertools.pairwise(squashed[join.prepared :])
    ]
    violations = check_history(squashed[join.prepared - 1 :], gates)
    assert violations
    assert {(v.read_epoch, v.write_epoch) for v in violations} & {
        (mid.epoch, mid.epoch + 1),
        (mid.epoch + 1, mid.epoch),
    }


def test_without_barriers_the_placement_simulator_finds_violations() -> None:
    runs = [run_placement_seed(seed, barriers=False) for seed in range(10)]
    failing = [run for run in runs if not run.ok]
    assert failing and all("quorum intersection" in (run.failure or "") for run in failing)
