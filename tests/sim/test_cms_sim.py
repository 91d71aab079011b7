"""The CMS under the deterministic simulator: the member core the server runs
(``epochal.cmscore``), its Paxos node and the metadata state machine, with clients committing
every transformation kind through leaders and followers under seeded faults; invariants,
coverage, replay, and bugs planted in the member core and in Paxos.

CI runs the seeds 0..N-1 (N = EPOCHAL_SIM_SEEDS, default 1000; about 25 s on a 2-core machine);
a planted bug must be caught within them. A failure names its seed and ``make sim SEED=S``
replays it exactly.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from epochal.cmscore.config import (
    BUG_ANSWER_FORWARDED_EARLY,
    BUG_FORGET_ENTRY_ID,
    BUG_SNAPSHOT_AS_IF_LAST,
)
from epochal.paxos import BUG_REPLY_BEFORE_DURABLE, BUG_SKIP_REPROPOSAL, Message, PaxosNode
from epochal.sim.cli import run_many
from epochal.sim.cms_cluster import run_seed
from epochal.tcm import ALL_KINDS

CI_SEEDS = range(int(os.environ.get("EPOCHAL_SIM_SEEDS", "1000")))
SIM = Path(__file__).resolve().parents[2] / "libs" / "sim"


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
    assert not zero, f"these never happened over the CI seeds: {zero}"
    committed = set().union(*(r.kinds for r in results))
    missing = sorted({kind.kind for kind in ALL_KINDS} - committed)
    assert not missing, f"kinds never committed over the CI seeds: {missing}"


def test_same_seed_gives_the_same_trace() -> None:
    first = run_seed(7, trace=True)
    second = run_seed(7, trace=True)
    assert first.trace == second.trace
    assert first.trace_digest == second.trace_digest
    assert len(first.trace) > 100
    assert run_seed(8).trace_digest != first.trace_digest


@pytest.mark.parametrize(
    ("bug", "caught_by"),
    [
        # in the member core, each caught by the invariant it breaks
        (BUG_ANSWER_FORWARDED_EARLY, "before any member applied that epoch"),
        (BUG_FORGET_ENTRY_ID, "and again at epoch"),
        (BUG_SNAPSHOT_AS_IF_LAST, "holds the state of epoch"),
        # in Paxos
        (BUG_SKIP_REPROPOSAL, "two values chosen"),
        (BUG_REPLY_BEFORE_DURABLE, ""),
    ],
)
def test_ci_seeds_catch_a_planted_bug(bug: str, caught_by: str) -> None:
    caught = None
    for seed in CI_SEEDS:
        result = run_seed(seed, planted_bugs=frozenset({bug}))
        if not result.ok:
            caught = result
            break
    assert caught is not None, f"no CI seed catches the planted bug {bug!r}"
    print(f"\n{bug}: first caught by seed {caught.seed}: {caught.failure}")
    assert caught_by in caught.failure
    assert "no progress" not in caught.failure, "caught as a stall, not by an invariant"


def test_the_simulator_drives_the_member_core_and_holds_no_copy_of_it() -> None:
    """libs/sim runs ``epochal.cmscore.MemberCore`` — the object the CMS server runs — and
    defines no member of its own around a bare Paxos node."""
    imported: set[str] = set()
    constructed: set[str] = set()
    for path in SIM.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                constructed.add(node.func.id)
    assert "epochal.cmscore.MemberCore" in imported
    assert "MemberCore" in constructed
    assert "PaxosNode" not in constructed, "the simulator builds a Paxos node of its own"
    assert not (SIM / "paxos_cluster.py").exists()


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
    assert result.failure == "AssertionError in a core: planted"
