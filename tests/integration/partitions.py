"""Network partitions for a recorded-history run (tests/integration/history.py): a replica cut off
from its peers and from reconcilers with the test hooks (``isolated``: it refuses their requests,
its clients still reach it) for a share of the run, then healed. Right after each heal the
reconciler is paused for a while and readers read through the replica that returned — the
window in which it lacks the cohort the others formed — then the reconciler continues.

Then, before the next cut, the cohorts must end: the replica receives them, a full
reconciliation advances the low bound past them (``SETTLE_S`` at most). What each replica held is
recorded with the fault entries at isolation and at the heal: its
cohorts and its highest low bound, read off its database."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochal.client import AsyncClient
from epochal.devcluster.cluster import LocalCluster
from tests.harness import until

SETTLE_S = 60.0

if TYPE_CHECKING:
    from .history import Recorder, Workload


@dataclass(frozen=True, slots=True)
class Partition:
    replica: str  # cut off from its peers and the reconcilers
    start: float  # share of the run
    heal: float
    reads_after_heal_s: float = 3.0  # the reconciler paused, readers read through the replica


def marks(cluster: LocalCluster, name: str, keyspace: str) -> dict[str, object]:
    """The replica's cohorts (id -> [left, right, members, low]) and highest low bound of
    ``keyspace``."""
    path = cluster.data_dir / name / "replica.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        cohorts = {
            str(cohort_id): [left, right, members, low]
            for cohort_id, left, right, members, low in db.execute(
                "SELECT cohort_id, range_left, range_right, members, low FROM cohorts "
                "WHERE keyspace = ?",
                (keyspace,),
            )
        }
        (bound,) = db.execute(
            "SELECT MAX(mark) FROM reconcile_marks WHERE keyspace = ? AND kind = 'low_bound'",
            (keyspace,),
        ).fetchone()
    return {"cohorts": cohorts, "low_bound": int(bound or 0)}


async def partitions(
    cluster: LocalCluster,
    workload: Workload,
    recorder: Recorder,
    keyspace: str,
    read: object,
) -> None:
    """Each of ``workload.partitions_schedule`` in turn. ``read(client, partition)`` reads one
    partition through the client given (recorded as a read)."""
    for cut in workload.partitions_schedule:
        await asyncio.sleep(max(cut.start * workload.duration_s - recorder.now(), 0))
        await cluster.set_hooks(cut.replica, isolated=True)
        recorder.fault("isolate", cut.replica)
        await asyncio.sleep(1.0)  # a round in flight at the cut has ended
        recorder.fault("isolated", cut.replica, **_held(cluster, keyspace))
        # as long as planned, even when the one before ran late
        await asyncio.sleep((cut.heal - cut.start) * workload.duration_s - 1.0)
        reconcilers = [p.process.pid for p in cluster.reconcilers.values() if p.process]
        for pid in reconcilers:
            os.kill(pid, signal.SIGSTOP)
        recorder.fault("pause-reconcilers", cut.replica)
        try:
            await cluster.set_hooks(cut.replica, isolated=False)
            recorder.fault("heal", cut.replica, **_held(cluster, keyspace))
            await _read_through(cluster, workload, recorder, cut, read)
        finally:
            for pid in reconcilers:
                os.kill(pid, signal.SIGCONT)
        recorder.fault("continue-reconcilers", cut.replica, **_held(cluster, keyspace))
        # The replica receives the cohorts, a full reconciliation advances the low bound past
        # them and they end, before anything else is cut.
        await until(
            f"the cohorts formed while {cut.replica} was cut off ended",
            lambda: not any(m["cohorts"] for m in _held(cluster, keyspace).values()),
            timeout_s=SETTLE_S,
            interval_s=0.2,
        )
        recorder.fault("settled", cut.replica, **_held(cluster, keyspace))


async def _read_through(
    cluster: LocalCluster, workload: Workload, recorder: Recorder, cut: Partition, read: object
) -> None:
    """Every partition read, again and again, through the replica that returned only."""
    address = cluster.nodes[cut.replica].address
    deadline = recorder.now() + cut.reads_after_heal_s
    async with AsyncClient([address], timeout_s=workload.client_timeout_s) as client:
        while recorder.now() < deadline:
            for partition in range(workload.partitions):
                await read(client, recorder, f"healed-{cut.replica}", partition, address)  # type: ignore[operator]


def _held(cluster: LocalCluster, keyspace: str) -> dict[str, object]:
    return {name: marks(cluster, name, keyspace) for name in sorted(cluster.nodes)}
