"""The cost of TLS, for the benchmarks that measure it (cms_commit, data_path): the same
measurement with mutual TLS (the default deployment: certificates of a CA made for the run) and
in plain text (``--insecure`` on both sides), in alternating order over the runs so that drift
favours neither; each figure the median over the runs, the plain-text one under ``<key>_plain``,
and ``<key>_tls_over_plain`` their ratio. Not a benchmark itself."""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from epochal.devcluster.pki import DevPki, use_pki
from epochal.wire import channels
from epochal.wire.tls import INSECURE

MODES = ("tls", "plain")
Measure = Callable[[DevPki | None, Path], Awaitable[dict[str, Any]]]


def add_runs_flag(parser: Any, default: int = 3) -> None:
    parser.add_argument(
        "--runs", type=int, default=default, help="runs of each mode (TLS, plain); medians"
    )


async def both_modes(measure: Measure, root: Path, runs: int) -> dict[str, list[dict[str, Any]]]:
    """``measure(pki, folder)`` ``runs`` times in each mode (pki None: plain text), TLS first in
    odd runs and plain text first in even ones; every run's figures by mode."""
    pki = DevPki(root / "pki")
    use_pki(pki)  # the local clusters' CA from now on, in either mode's runs and after
    figures: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for number in range(runs):
        order = MODES if number % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            channels.use(pki.admin() if mode == "tls" else INSECURE)  # this process's calls
            folder = root / f"{mode}-{number}"
            figures[mode].append(await measure(pki if mode == "tls" else None, folder))
            print(f"run {number + 1} of {runs}, {mode}: done", flush=True)
    channels.use(pki.admin())
    return figures


def medians(runs: Mapping[str, list[dict[str, Any]]], ratios: Sequence[str]) -> dict[str, Any]:
    """The TLS figures under their own keys, the plain ones as ``<key>_plain``, the ratios
    ``<key>_tls_over_plain`` of the keys in ``ratios``, and every run's under ``runs``."""
    result: dict[str, Any] = {}
    for mode, suffix in (("tls", ""), ("plain", "_plain")):
        for key in runs[mode][0]:
            values = [run[key] for run in runs[mode]]
            result[key + suffix] = statistics.median(values)
    for key in ratios:
        result[f"{key}_tls_over_plain"] = result[key] / result[key + "_plain"]
    result["runs"] = {mode: runs[mode] for mode in MODES}
    return result
