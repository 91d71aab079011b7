"""The history check (tests/integration/history.py) with the reconciler at work and the ring
changing under the clients: concurrent QUORUM writers and readers of a tracked keyspace while a
reconciler with quick rounds delivers missing mutations, fences the replicas, advances their low
bounds and deletes the log below them; a fourth replica bootstraps at a third of the run and a
founder decommissions at two thirds; replicas are SIGKILLed and restarted or SIGSTOPped and
continued between the operations. A fault and an operation never overlap: a streaming source
killed in a join fails the join once its pulls run out of attempts ("could not stream ... in 5
rounds"), which the topology tests cover; it says nothing of the reconciler.

Proves that every QUORUM read holds every row acknowledged (or returned by a completed read)
before it started, nothing flaps, nothing is invented, nothing acknowledged is lost — while log
entries are collected below advancing low bounds and ranges move — and that the run did what it
claims: the join and the decommission finished, the low bound advanced on every replica of the
final ring past the bounds the node that left holds (rounds ran on the final placements), and
the replicas collected log entries.

``EPOCHAL_HISTORY_SECONDS``, ``EPOCHAL_HISTORY_RUNS`` and ``EPOCHAL_HISTORY_SEED`` as for
test_history.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from epochal.client import AsyncClient
from epochal.devcluster.cluster import LocalCluster
from epochal.tcm import ReplicationType
from tests.harness import replica_db, until

from .history import KEYSPACE, RunResult, Workload, run_history

pytestmark = pytest.mark.integration

SECONDS = float(os.environ.get("EPOCHAL_HISTORY_SECONDS", "20"))
RUNS = int(os.environ.get("EPOCHAL_HISTORY_RUNS", "1"))
SEED = int(os.environ.get("EPOCHAL_HISTORY_SEED", "0"))
# Quick rounds (as test_reconciler's): deliveries every quarter-second, fences, collection and
# an advance every half-second, the reconciliation time a second behind the replicas' clocks.
FAST_ROUNDS = (
    "--interval-ms", "250", "--advance-interval-ms", "500",
    "--write-timeout-ms", "500", "--slack-ms", "500",
)  # fmt: skip
# After the run, how long the final ring's bounds may take to pass those of the node that left
# (a replica killed at the end is back and its leases claimed again within a few rounds).
FINAL_ROUNDS_S = 30.0


def highest_low_bound(cluster: LocalCluster, name: str) -> int:
    """The highest low bound the replica holds for the history's keyspace (0: none)."""
    with replica_db(cluster, name) as db:
        (mark,) = db.execute(
            "SELECT MAX(mark) FROM reconcile_marks WHERE keyspace = ? AND kind = 'low_bound'",
            (KEYSPACE,),
        ).fetchone()
    return int(mark or 0)


def log_size(cluster: LocalCluster, name: str) -> int:
    """How many log entries of the history's keyspace the replica holds."""
    with replica_db(cluster, name) as db:
        (count,) = db.execute(
            "SELECT COUNT(*) FROM mutations WHERE keyspace = ?", (KEYSPACE,)
        ).fetchone()
    return int(count)


def round_outcomes(cluster: LocalCluster) -> Counter[str]:
    """How the reconcilers' rounds of the history's keyspace ended, by outcome."""
    outcomes: Counter[str] = Counter()
    for name in cluster.reconcilers:
        path = cluster.data_dir / name / "reconciler.db"
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            outcomes.update(
                outcome
                for (outcome,) in db.execute(
                    "SELECT outcome FROM rounds WHERE keyspace = ?", (KEYSPACE,)
                )
            )
    return outcomes


@dataclass(frozen=True)
class Reconciled:
    """What the reconciler left on the replicas, and what they counted."""

    tracked: bool
    members: list[str]  # the final ring
    left: list[str]  # the node that decommissioned (stopped)
    bounds: dict[str, int]  # replica -> its highest low bound
    logs: dict[str, int]  # replica -> log entries left
    collected: dict[str, float]  # member -> log entries it collected since it last started
    fenced: dict[str, float]  # member -> writes it coordinated that a fence made it retry


async def reconciled(cluster: LocalCluster) -> Reconciled:
    """Once every member's low bound passed the node's that left (or FINAL_ROUNDS_S passed)."""
    members = [n for n, r in cluster.nodes.items() if r.running]
    left = [n for n in cluster.nodes if n not in members]

    def passed_left() -> bool:
        floor = max((highest_low_bound(cluster, n) for n in left), default=0)
        return all(highest_low_bound(cluster, n) > floor for n in members)

    with contextlib.suppress(TimeoutError):  # asserted by the test, after the verdict
        await until("the final ring's bounds past the left node's", passed_left, FINAL_ROUNDS_S)
    async with AsyncClient([cluster.nodes[n].address for n in members]) as client:
        keyspace = client.metadata.keyspaces[KEYSPACE]
    return Reconciled(
        tracked=keyspace.replication_type is ReplicationType.TRACKED,
        members=members,
        left=left,
        bounds={n: highest_low_bound(cluster, n) for n in cluster.nodes},
        logs={n: log_size(cluster, n) for n in cluster.nodes},
        collected={
            n: await cluster.metric(n, "epochal_log_entries_collected_total") for n in members
        },
        fenced={n: await cluster.metric(n, "epochal_writes_fenced_total") for n in members},
    )


@pytest.mark.parametrize("run", range(RUNS))
def test_quorum_reads_miss_no_write_while_the_reconciler_collects_and_the_ring_changes(
    tmp_path: Path, run: int
) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    workload = Workload(
        duration_s=SECONDS,
        seed=SEED + run,
        reconciler_args=FAST_ROUNDS,
        join_at=1 / 3,
        decommission_at=2 / 3,
    )

    async def scenario() -> tuple[RunResult, Reconciled]:
        result = await run_history(cluster, workload, tmp_path)
        return result, await reconciled(cluster)

    try:
        result, state = asyncio.run(asyncio.wait_for(scenario(), SECONDS + 300))
        outcomes = round_outcomes(cluster)
    finally:
        cluster.close()
    operations = [(s.kind, s.state) for s in result.operations]
    print(
        f"reconciled history run {run} (seed {workload.seed}, {SECONDS:.0f} s): {result.ops} "
        f"ops, {result.writes_acknowledged} writes acknowledged, {result.reads_ok} reads "
        f"({result.reads_failed} failed), {result.kills} kills, {result.pauses} pauses, "
        f"operations {operations}, violations {dict(result.verdict.counts)}; highest low "
        f"bounds {state.bounds}, log entries left {state.logs}, collected {state.collected}, "
        f"fenced writes {state.fenced}, rounds {dict(outcomes)}; history in "
        f"{result.history_path}"
    )
    assert result.verdict.ok, "\n".join(str(v) for v in result.verdict.violations[:20])
    # The run did what it claims: enough tracked operations, faults of both kinds, a join and a
    # decommission that finished, and a reconciler that advanced low bounds and collected logs.
    assert state.tracked
    assert result.writes_acknowledged >= 50 and result.reads_ok >= 50, result
    assert result.reads_failed < result.reads_ok, result
    assert result.kills >= 1 and result.pauses >= 1, result
    assert operations == [("join", "finished"), ("leave", "finished")], result.operations
    assert len(state.members) == 3 and len(state.left) == 1, state
    floor = max(state.bounds[n] for n in state.left)
    assert all(state.bounds[n] > floor for n in state.members), state.bounds
    assert sum(state.collected.values()) > 0, state.collected
    assert outcomes["advanced"] > 0, outcomes
