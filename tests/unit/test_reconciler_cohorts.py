"""Cohort rounds (epochal.reconciler.rounds, cohort_rounds) against the in-memory model of the
replicas of test_reconciler_rounds: while a replica is cut off the others still deliver among
themselves ("partial"); once it has been cut off for the cohort setting they fold their ids into a
cohort whose id depends on who they are, and the low bound stays; when it returns it receives the
cohort's data before a full reconciliation advances the low bound, which ends the cohort."""

from __future__ import annotations

from epochal.mtrack.cohorts import cohort_id
from epochal.reconciler.rounds import RangePace, RoundResult

from .test_reconciler_rounds import BACKLOG, RANGE, WINDOW, Model, cluster, rounds

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
    assert pace.missing_since == {}
