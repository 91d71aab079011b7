"""The placement simulator: random topology operations on 3 to 50 nodes, 1 to 3 datacenters of
1 to 5 racks, RF 1 to 5, several sequences in flight where their locks allow; after every epoch
the placements must equal a naive reference that recomputes them from scratch, and at the end
every read group must meet every write group alive at once (see epochal.sim.placement).

The planted bug ``skip_quorum_intersection`` lets a PREPARE through that only the
quorum_intersection rule refused (a replace into another rack, here): the adjacent-views checker
must catch it, and without the bug no seed may fail."""

from __future__ import annotations

import os
from collections import Counter

from epochal.sim.placement import BUG_SKIP_QUORUM_INTERSECTION, run_placement_seed

SEEDS = range(int(os.environ.get("EPOCHAL_PLACEMENT_SEEDS", "150")))
# Enough seeds to meet a replace into another rack that the rule refuses and that, let through,
# reaches START (two do, among the first twenty); failing seeds stop before the costly checker.
PLANTED_BUG_SEEDS = range(20)


def test_random_topology_histories_match_the_reference_after_every_epoch() -> None:
    totals: Counter[str] = Counter()
    failures = []
    shapes = set()
    for seed in SEEDS:
        run = run_placement_seed(seed)
        totals += run.counts
        shapes.add((run.nodes, run.datacenters))
        if not run.ok:
            failures.append(
                f"seed {seed} ({run.nodes} nodes, {run.datacenters} dcs): {run.failure}"
            )
    print(f"\nplacement simulator over {len(SEEDS)} seeds: {dict(totals.most_common())}")
    assert not failures, "\n".join(failures[:10])
    # It bit: every kind of operation ran, under rack-aware placement too; cancels undid steps;
    # locks refused overlaps; the quorum rule refused some replaces into another rack and let
    # others through; both kinds of datacenter whose rack count is not its RF were built.
    for what in (
        "prepare join",
        "prepare join racked",
        "prepare leave",
        "prepare leave racked",
        "prepare remove",
        "prepare remove racked",
        "prepare replace same rack",
        "prepare replace other rack",
        "prepare move",
        "prepare move racked",
        "step start",
        "step mid",
        "step finish",
        "cancel_step",
        "rejected range_locked",
        "rejected quorum_intersection: prepare replace other rack",
        "rack-aware datacenter with fewer racks than RF",
        "rack-aware datacenter with more racks than RF",
        "view checks",
    ):
        assert totals[what] > 0, f"{what} never happened"
    # Only a replace into another rack changes two replicas of a range at once: the rule never
    # refuses a join, leave, remove or move (tests/unit/test_tcm_intersection.py says why).
    refused = totals["rejected quorum_intersection"]
    assert refused == totals["rejected quorum_intersection: prepare replace other rack"]
    assert {d for _, d in shapes} == {1, 2, 3}
    assert max(n for n, _ in shapes) == 50


def test_a_prepare_that_skips_the_quorum_intersection_rule_is_caught() -> None:
    planted = frozenset({BUG_SKIP_QUORUM_INTERSECTION})
    runs = [run_placement_seed(seed, planted_bugs=planted) for seed in PLANTED_BUG_SEEDS]
    caught = [run for run in runs if not run.ok]
    print(
        f"\n{BUG_SKIP_QUORUM_INTERSECTION}: caught by seeds {[run.seed for run in caught]} of "
        f"{len(runs)}, e.g. {caught[0].failure if caught else None}"
    )
    assert caught, "no seed catches a PREPARE that skips the quorum_intersection rule"
    for run in caught:
        assert "quorum intersection of adjacent views" in (run.failure or ""), run.failure
        assert run.counts["rejected quorum_intersection"] > 0, run.seed
