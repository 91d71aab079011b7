"""Before/after comparison of one benchmark on this noisy machine: runs it alternately in two
checkouts (each with its own ``.venv``, as ``make install`` makes it), ``--runs`` times each,
and prints the median of every numeric figure for both, with after / before.

    python bench/_alternate.py --before ../epochal-before --after . cms_commit --runs 3

Alternating means a slow spell of the machine falls on both sides alike. Each run's JSON
result is kept as ``bench/results/<name>.<side>.<i>.json`` in this checkout, and the medians
as ``bench/results/<name>.alternate.json``. Not a benchmark itself (the leading underscore keeps
``make bench`` from running it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def run_once(checkout: Path, name: str, quick: bool) -> dict[str, object]:
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{checkout} has no .venv: run `make install` there first")
    command = [str(python), f"bench/{name}.py", *(["--quick"] if quick else [])]
    subprocess.run(command, cwd=checkout, check=True, stdout=sys.stderr)
    return json.loads((checkout / "bench" / "results" / f"{name}.json").read_text())


def numeric(result: dict[str, object]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in result.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", help="the benchmark: bench/<name>.py")
    parser.add_argument("--before", type=Path, required=True, help="the checkout before")
    parser.add_argument("--after", type=Path, default=HERE, help="the checkout after")
    parser.add_argument("--runs", type=int, default=3, help="runs on each side")
    parser.add_argument("--quick", action="store_true", help="pass --quick to the benchmark")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    kept = HERE / "bench" / "results"
    for index in range(args.runs):
        for side in ("before", "after"):
            checkout = getattr(args, side).resolve()
            print(f"run {index + 1}/{args.runs}: {side} ({checkout})", file=sys.stderr)
            results[side].append(numeric(run_once(checkout, args.name, args.quick)))
            shutil.copy(
                checkout / "bench" / "results" / f"{args.name}.json",
                kept / f"{args.name}.{side}.{index + 1}.json",
            )
    keys = sorted(set(results["before"][0]) & set(results["after"][0]))
    medians = {
        side: {key: statistics.median(run[key] for run in runs) for key in keys}
        for side, runs in results.items()
    }
    (kept / f"{args.name}.alternate.json").write_text(
        json.dumps({"runs": args.runs, "quick": args.quick, **medians}, indent=2) + "\n"
    )
    print(f"{'figure':<44} {'before':>12} {'after':>12} {'after/before':>13}")
    for key in keys:
        before, after = medians["before"][key], medians["after"][key]
        ratio = f"{after / before:.3f}" if before else "-"
        print(f"{key:<44} {before:>12.4g} {after:>12.4g} {ratio:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
