"""Run simulator seeds of the CMS (``epochal.sim.cms_cluster``): ``make sim SEEDS=N``, or replay
one with ``make sim SEED=S`` (``BUG=name`` plants a bug of the member core or of Paxos)."""

from __future__ import annotations

import argparse
import sys
import time

from epochal.cmscore import KNOWN_BUGS
from epochal.sim.cms_checks import Coverage
from epochal.sim.cms_cluster import RunResult, run_seed


def run_many(
    seeds: range, planted_bugs: frozenset[str] = frozenset()
) -> tuple[list[RunResult], Coverage]:
    results = []
    total = Coverage()
    for seed in seeds:
        result = run_seed(seed, planted_bugs=planted_bugs)
        total.add(result.coverage)
        results.append(result)
    return results, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=300, help="run seeds 0..N-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, help="replay one seed")
    parser.add_argument("--trace", action="store_true", help="print the event trace of --seed")
    parser.add_argument("--bug", action="append", default=[], choices=sorted(KNOWN_BUGS))
    args = parser.parse_args(argv)
    bugs = frozenset(args.bug)

    if args.seed is not None:
        result = run_seed(args.seed, planted_bugs=bugs, trace=args.trace)
        for line in result.trace:
            print(line)
        print(
            f"seed {result.seed}: members={result.members} reconfiguring={result.reconfiguring} "
            f"{'ok' if result.ok else 'FAILED: ' + result.failure} "
            f"acknowledged={result.acknowledged} trace={result.trace_digest}"
        )
        print(f"coverage {result.coverage.as_dict()}")
        return 0 if result.ok else 1

    started = time.monotonic()
    results, total = run_many(range(args.first_seed, args.first_seed + args.seeds), bugs)
    failed = [r for r in results if not r.ok]
    planted = "".join(f" BUG={bug}" for bug in sorted(bugs))
    for result in failed:
        print(
            f"FAILED seed {result.seed}: {result.failure}\n"
            f"  replay: make sim SEED={result.seed}{planted}"
        )
    kinds = set().union(*(r.kinds for r in results))
    print(
        f"{len(results) - len(failed)}/{len(results)} seeds ok in "
        f"{time.monotonic() - started:.1f}s; coverage {total.as_dict()}; "
        f"{len(kinds)} transformation kinds committed"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
