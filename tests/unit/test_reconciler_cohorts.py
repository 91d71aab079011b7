"""Cohort rounds (epochal.reconciler.rounds, cohort_rounds) against the in-memory model of the
replicas of test_reconciler_rounds: while a replica is cut off the others still deliver among
themselves ("partial"); once it has been cut off for the cohort setting they fold their ids into a
cohort whose id depends on who they are, and the low bound stays; when it returns it receives the
cohort's data before a full reconciliation advances the low bound, which ends the cohort."""

from __future__ import annotations

from dataclasses import replace

from epochal.mtrack import MutationId, make_hlc
from epochal.mtrack.cohorts import cohort_id, reach_groups
from epochal.reconciler.pacing import RangePace
from epochal.reconciler.rounds import RoundResult

from .test_reconciler_rounds import BACKLOG, NOW_MS, RANGE, WINDOW, Model, Replica, cluster, rounds

COHORT_AFTER_S = 3.0


def cut_off(model: Model, node: str) -> tuple[RangePace, list[RoundResult]]:
    """Rounds with ``node`` unreachable, long enough to fold the whole backlog."""
    model.replicas[node].reachable = False
    pace, results = RangePace(advance_s=0.0), []
    rounds(
        model, 2 * BACKLOG // WINDOW + 8, cohort_after_s=COHORT_AFTER_S, pace=pace, results=results
    )
    return pace, results


def test_the_others_deliver_then_fold_into_a_cohort_and_the_low_bound_stays() -> None:
    model, every = cluster()
    a, b, c = (model.replicas[n] for n in "abc")
    _, results = cut_off(model, "a")
    outcomes = [r.outcome for r in results]
    assert outcomes[: int(COHORT_AFTER_S)] == ["partial"] * int(COHORT_AFTER_S)
    assert "cohort" in outcomes and "advanced" not in outcomes
    assert all(r.unreachable == ("a",) for r in results)
    # b and c hold the same ids' data (c received what it lacked from b), then folded them
    assert b.applied == c.applied == every
    expected = cohort_id("ks", RANGE, ("b", "c"), 0)
    assert set(b.cohorts) == set(c.cohorts) == {expected}
    assert not b.ids and not c.ids, "every id b and c held is folded: their logs are empty"
    assert all(r.bounds.lowest(RANGE) == 0 for r in model.replicas.values()), "no low bound"
    assert not a.cohorts and a.applied == every  # a, cut off, took part in nothing


def test_another_partition_shape_is_another_cohort() -> None:
    model, _ = cluster()
    cut_off(model, "c")
    ids = {cohort_id("ks", RANGE, ("a", "b"), 0)}
    assert set(model.replicas["a"].cohorts) == set(model.replicas["b"].cohorts) == ids
    assert ids != {cohort_id("ks", RANGE, ("b", "c"), 0)}


def test_the_returning_replica_receives_the_cohort_then_the_low_bound_advances() -> None:
    model, every = cluster()
    pace, _ = cut_off(model, "a")
    # a missed nothing of the backlog here; make it miss what b and c got while it was away
    a, b, c = (model.replicas[n] for n in "abc")
    away = {i for i in every if i.sequence % 5 == 0}
    a.applied -= away
    for mutation_id in away:
        a.ids.pop(mutation_id, None)
    a.reachable = True
    results: list[RoundResult] = []
    rounds(model, BACKLOG // WINDOW + 8, pace=pace, results=results, start=1_000.0)
    outcomes = [r.outcome for r in results]
    assert "advanced" in outcomes
    delivered = [r for r in results if r.cohort_cells]
    assert delivered and delivered[0].cohort_cells >= len(away)
    assert a.applied >= every, "a holds every write's data: the cohort's came as cells"
    assert all(r.bounds.lowest(RANGE) > 0 for r in model.replicas.values())
    assert not a.cohorts and not b.cohorts and not c.cohorts, "the low bound passed the cohort"
    assert not pace.split_since


def test_a_side_that_changed_waits_its_own_time_before_it_folds() -> None:
    """a was cut off long enough that b and c folded; it returns and, for one round, b reports c
    unreachable (b's calls to c failed lately: c restarted, or b was stopped and its calls in
    flight expired at SIGCONT). a and b are a new side: they do not fold without c — which had
    no fault — before they have been apart from it for the cohort setting themselves."""
    model, _ = cluster()
    pace, _ = cut_off(model, "a")
    model.replicas["a"].reachable = True
    model.replicas["b"].cut = {"c"}
    first: list[RoundResult] = []
    rounds(model, 1, cohort_after_s=COHORT_AFTER_S, pace=pace, results=first, start=1_000.0)
    assert first[0].unreachable == ("c",) and first[0].outcome == "partial", first[0].detail
    model.replicas["b"].cut = set()
    after: list[RoundResult] = []
    rounds(model, 3, cohort_after_s=COHORT_AFTER_S, pace=pace, results=after, start=1_001.0)
    without_c = cohort_id("ks", RANGE, ("a", "b"), 0)
    assert all(without_c not in r.cohorts for r in model.replicas.values())
    assert "advanced" in [r.outcome for r in after]


def test_reach_groups_are_the_sides_of_a_partition() -> None:
    cut = {"a": ["c", "d"], "b": ["c"], "c": [], "d": []}  # b-d reach, a-d do not
    assert reach_groups("abcd", cut) == [("a", "b"), ("c", "d")]  # each reaches all its own
    assert reach_groups("abcd", {"a": ["c", "d"], "b": ["c", "d"]}) == [("a", "b"), ("c", "d")]
    assert reach_groups("abc", {}) == [("a", "b", "c")]


def test_two_sides_of_a_partition_fold_apart_and_exchange_their_cohorts_at_the_heal() -> None:
    """a, b | c, d (two datacenters cut apart), each side written alone: each folds its own
    cohort while the low bound stays; healed, each side receives the other's cohort as data,
    then the bound advances and both cohorts end."""
    replicas = {name: Replica(NOW_MS) for name in "abcd"}
    sides = {"ab": set(), "cd": set()}
    for n in range(400):
        side = "ab" if n % 2 else "cd"
        mutation_id = MutationId(
            node=1 + n % 2, log=1, sequence=n + 1, hlc=make_hlc(NOW_MS - 60_000 + n * 100)
        )
        sides[side].add(mutation_id)
        for name in side:
            replicas[name].ids[mutation_id] = 10 + n
            replicas[name].applied.add(mutation_id)
    for name in "ab":
        replicas[name].cut = {"c", "d"}
    for name in "cd":
        replicas[name].cut = {"a", "b"}
    model = Model(replicas)
    pace, results = RangePace(advance_s=0.0), []
    rounds(model, 40, cohort_after_s=COHORT_AFTER_S, pace=pace, results=results)
    ab, cd = cohort_id("ks", RANGE, "ab", 0), cohort_id("ks", RANGE, "cd", 0)
    assert set(replicas["a"].cohorts) == set(replicas["b"].cohorts) == {ab}
    assert set(replicas["c"].cohorts) == set(replicas["d"].cohorts) == {cd}
    assert all(not r.ids and r.bounds.lowest(RANGE) == 0 for r in replicas.values())
    assert {r.unreachable for r in results} == {("a", "b"), ("c", "d")}, "the sides took turns"
    for replica in replicas.values():
        replica.cut = set()
    healed: list[RoundResult] = []
    rounds(model, 10, pace=pace, results=healed, start=1_000.0)
    every = sides["ab"] | sides["cd"]
    assert all(r.applied == every for r in replicas.values())
    # each side got the other's, as data: exactly what its folds tagged
    assert sum(r.cohort_cells for r in healed) == 4 * 200
    assert sum(r.delivered for r in healed) == 0, "nothing went id by id"
    assert all(r.bounds.lowest(RANGE) > 0 and not r.cohorts for r in replicas.values())


def test_a_cohort_no_member_folded_as_far_is_not_advanced_past() -> None:
    """The returning replica lacks a cohort whose members' own folds did not reach its high (a
    member's record came by delivery): no one can send it, so no round advances the bound."""
    model, _ = cluster()
    pace, _ = cut_off(model, "a")
    for name in "bc":
        for held, cohort in model.replicas[name].cohorts.items():
            model.replicas[name].cohorts[held] = replace(cohort, folded=0)
    model.replicas["a"].reachable = True
    results: list[RoundResult] = []
    rounds(model, 6, pace=pace, results=results, start=1_000.0)
    assert "advanced" not in [r.outcome for r in results]
    assert any("lack a member to send them" in r.detail for r in results)
    assert all(r.bounds.lowest(RANGE) == 0 for r in model.replicas.values())
