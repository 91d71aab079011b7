"""The Paxos core under the deterministic simulator: invariants, coverage, replay, planted bugs;
every third seed changes the voters while it runs (membership by slot, s + α).

CI runs the seeds 0..N-1 (N = EPOCHAL_SIM_SEEDS, default 1000); a failure names its seed and
``make sim SEED=S`` replays it exactly.
"""

from __future__ import annotations

import os

import pytest

from epochal.paxos import BUG_REPLY_BEFORE_DURABLE, BUG_SKIP_REPROPOSAL, Message, PaxosNode
from epochal.sim.cli import run_many
from epochal.sim.paxos_cluster import run_seed

CI_SEEDS = range(int(os.environ.get("EPOCHAL_SIM_SEEDS", "1000")))


def test_ci_seeds_keep_every_invariant_and_exercise_every_fault() -> None:
    results, coverage = run_many(CI_SEEDS)
    failures = [
        f"seed {r.seed}: {r.failure} (replay: make sim SEED={r.seed})" for r in results if not r.ok
    ]
    print(f"\nsimulator coverage over {len(results)} seeds: {coverage.as_dict()}")
    assert not failures, "\n".join(failures)
    assert sum(r.acknowledged for r in results) > 0
    assert {r.members for r in results} == {3, 5}
    assert {r.reconfiguring for r in results} == {False, True}
    zero = [name for name, count in coverage.as_dict().items() if count == 0]
    assert not zero, f"these faults never happened over the CI seeds: {zero}"


def test_same_seed_gives_the_same_trace() -> None:
    first = run_seed(7, trace=True)
    second = run_seed(7, trace=True)
    assert first.trace == second.trace
    assert first.trace_digest == second.trace_digest
    assert len(first.trace) > 100
    assert run_seed(8).trace_digest != first.trace_digest


@pytest.mark.parametrize("bug", [BUG_SKIP_REPROPOSAL, BUG_REPLY_BEFORE_DURABLE])
def test_ci_seeds_catch_a_planted_bug(bug: str) -> None:
    results, _ = run_many(CI_SEEDS, frozenset({bug}))
    caught = [r for r in results if not r.ok]
    print(f"\n{bug}: caught by {len(caught)} of {len(results)} seeds, e.g. {caught[:1]}")
    assert caught, f"no CI seed catches the planted bug {bug!r}"


def test_a_shell_that_never_advances_a_ready_fails_the_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulator's bound on Readies in flight is low enough to catch a forgetful shell."""
    monkeypatch.setattr(PaxosNode, "advance", lambda node, ready: None)
    results, _ = run_many(range(5), frozenset())
    assert results and all(not r.ok for r in results)
    assert all("Readies taken and not advanced" in (r.failure or "") for r in results), results


def test_a_core_assertion_fails_the_seed_and_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(node: PaxosNode, message: Message) -> bool:
        raise AssertionError("planted")

    monkeypatch.setattr(PaxosNode, "_refused_below_promise", broken)
    result = run_seed(3)
    assert not result.ok
    assert result.failure == "AssertionError in the core: planted"
