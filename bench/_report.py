"""What every benchmark writes and prints (../shared/BENCHMARKS.md): the JSON result with its
machine, git sha, quick flag and time, and the figures as a table. Not a benchmark itself."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser(doc: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a short run that still gives every key"
    )
    return parser


def git_sha() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_result(name: str, figures: Mapping[str, object], *, workload: str, quick: bool) -> Path:
    """bench/results/<name>.json: the figures plus workload, machine, git_sha, quick, when."""
    result = {
        **figures,
        "workload": workload,
        "machine": f"{os.cpu_count()} cpus, Python {platform.python_version()}",
        "git_sha": git_sha(),
        "quick": quick,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out = ROOT / "bench" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return out


def print_table(figures: Mapping[str, object], keys: Iterable[str]) -> None:
    keys = list(keys)
    width = max(len(k) for k in keys) + 2
    print(f"{'figure':<{width}}{'value':>14}")
    for key in keys:
        value = figures[key]
        shown = f"{value:>14,}" if isinstance(value, int) else f"{value:>14.2f}"
        print(f"{key:<{width}}{shown}")
