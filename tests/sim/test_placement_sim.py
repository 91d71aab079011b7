"""The placement simulator: random topology operations on 3 to 50 nodes, 1 to 3 datacenters,
RF 1 to 5, several sequences in flight where their locks allow; after every epoch the placements
must equal a naive reference that recomputes them from scratch (see epochal.sim.placement)."""

from __future__ import annotations

import os
from collections import Counter

from epochal.sim.placement import run_placement_seed

SEEDS = range(int(os.environ.get("EPOCHAL_PLACEMENT_SEEDS", "150")))


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
    # It bit: every kind of operation ran, cancels undid steps, locks refused overlaps.
    for what in (
        "prepare join",
        "prepare leave",
        "prepare remove",
        "prepare replace",
        "prepare move",
        "step start",
        "step mid",
        "step finish",
        "cancel_step",
        "rejected range_locked",
    ):
        assert totals[what] > 0, f"{what} never happened"
    assert {d for _, d in shapes} == {1, 2, 3}
    assert max(n for n, _ in shapes) == 50
