"""The history check (tests/integration/history.py): concurrent QUORUM writers and readers against
real processes while replicas are SIGKILLed and restarted or SIGSTOPped and continued; every
QUORUM read holds every row acknowledged (or returned by a completed read) before it started,
nothing flaps, nothing is invented, nothing acknowledged is lost.

A short run in CI. ``make history`` runs it longer, several times in a row
(``EPOCHAL_HISTORY_SECONDS``, ``EPOCHAL_HISTORY_RUNS``, ``EPOCHAL_HISTORY_SEED``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from epochal.devcluster.cluster import LocalCluster

from .history import Workload, run_history

pytestmark = pytest.mark.integration

SECONDS = float(os.environ.get("EPOCHAL_HISTORY_SECONDS", "20"))
RUNS = int(os.environ.get("EPOCHAL_HISTORY_RUNS", "1"))
SEED = int(os.environ.get("EPOCHAL_HISTORY_SEED", "0"))


@pytest.mark.parametrize("run", range(RUNS))
def test_quorum_reads_under_kills_and_pauses_miss_no_acknowledged_write(
    tmp_path: Path, run: int
) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    workload = Workload(duration_s=SECONDS, seed=SEED + run)

    async def scenario():  # type: ignore[no-untyped-def]
        return await run_history(cluster, workload, tmp_path)

    try:
        result = asyncio.run(asyncio.wait_for(scenario(), SECONDS + 240))
    finally:
        cluster.close()
    print(
        f"history run {run} (seed {workload.seed}, {SECONDS:.0f} s): {result.ops} ops, "
        f"{result.writes_acknowledged} writes acknowledged, {result.reads_ok} reads "
        f"({result.reads_failed} failed), "
        f"{result.kills} kills, {result.pauses} pauses, violations {dict(result.verdict.counts)}; "
        f"history in {result.history_path}"
    )
    assert result.verdict.ok, "\n".join(str(v) for v in result.verdict.violations[:20])
    # The run did what it claims: enough operations, and faults of both kinds.
    assert result.writes_acknowledged >= 50 and result.reads_ok >= 50, result
    assert result.reads_failed < result.reads_ok, result  # the reads checked are most of them
    assert result.kills >= 1 and result.pauses >= 1, result
