"""Cohort reconciliation with real processes: 3 CMS members, 3 replicas and a reconciler on
127.0.0.1 (RF 3, a tracked keyspace), under the history check of tests/integration/history.py.

Proves too that a replica stopped (SIGSTOP: the common way one goes missing — stopped, swapping,
in a long pause) does not hold the others' rounds up: with the reconciler's default call
deadline, lease and lease margin and ``--cohort-after-ms 5000``, the two others fold a cohort
while it is stopped, under QUORUM writes through them.

Proves, for a partition {A} | {B, C} (A isolated with the test hooks) under QUORUM writers and
readers: B and C reconcile under a cohort (every range's cohort id is ``cohort_id`` of its range,
its members B and C and its low bound) while the low bound stays where it was; after the heal,
QUORUM reads through A — with the reconciler paused, so A still lacks the cohort — miss nothing
(the history check across the heal, and A's reads took the cohort repair); then A receives the
cohort, a full reconciliation advances the low bound past the heal and the cohorts end. A second
partition of another shape ({B} | {A, C}) gives other cohort ids.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.client import AsyncClient
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.mtrack.cohorts import cohort_id
from epochal.reconcile_client import ReconcileClient
from epochal.tcm.tokens import TokenRange
from tests.harness import QuorumWriters, create_events, replica_rows, run, start_ring, until

from .history import KEYSPACE, Workload, run_history
from .partitions import Partition

pytestmark = pytest.mark.integration

FAST_ROUNDS = (
    "--interval-ms", "250", "--advance-interval-ms", "500",
    "--write-timeout-ms", "500", "--slack-ms", "500", "--cohort-after-ms", "1000",
)  # fmt: skip
SECONDS = 30.0
STOPPED_S = 15.0  # three times --cohort-after-ms 5000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster", test_hooks=True)
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.close()


def cohorts_of(entry: dict, name: str) -> dict[str, list]:
    return entry[name]["cohorts"]  # type: ignore[no-any-return]


def test_a_partitioned_replica_misses_nothing_across_the_heal(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    workload = Workload(
        duration_s=SECONDS,
        faults=False,
        reconciler_args=FAST_ROUNDS,
        partitions_schedule=(
            Partition("replica1", start=0.1, heal=0.45),
            Partition("replica2", start=0.6, heal=0.85),
        ),
    )
    result = asyncio.run(run_history(cluster, workload, tmp_path))
    history = json.loads(result.history_path.read_text())
    assert result.verdict.ok, "\n".join(history["violations"][:20])
    events = {(f["what"], f["replica"]): f for f in history["faults"]}
    ids = {name: r.node_id for name, r in cluster.nodes.items()}
    seen: list[set[str]] = []
    for cut, members in (
        ("replica1", ("replica2", "replica3")),
        ("replica2", ("replica1", "replica3")),
    ):
        isolated, healed = events[("isolated", cut)], events[("heal", cut)]
        settled = events[("settled", cut)]
        for name in ids:
            # the low bound stayed while the replica was cut off, and passed the heal after
            assert healed[name]["low_bound"] == isolated[name]["low_bound"], (cut, name)
            assert settled[name]["low_bound"] > healed[name]["low_bound"], (cut, name)
            assert not settled[name]["cohorts"], (cut, name)
        # the others formed cohorts — one per range, named by its range, members and bound
        formed = cohorts_of(healed, members[0])
        assert formed and formed == cohorts_of(healed, members[1]), cut
        assert not set(formed) & set(cohorts_of(healed, cut)), "the cut-off one took no part"
        for text, (left, right, names, low) in formed.items():
            assert names == ",".join(sorted(ids[m] for m in members))
            assert int(text) == cohort_id(KEYSPACE, TokenRange(left, right), names.split(","), low)
        seen.append(set(formed))
    assert not seen[0] & seen[1], "another partition shape, other cohort ids"
    reads = [op for op in history["ops"] if op["process"].startswith("healed-")]
    assert reads and all(op["outcome"] == "ok" for op in reads[:5]), reads[:5]

    async def repaired() -> None:
        # reads through each returning replica lacked the cohort and took the cohort repair
        for cut in ("replica1", "replica2"):
            assert await cluster.metric(cut, "epochal_read_cohort_repairs_total") > 0, cut

    asyncio.run(repaired())


async def advanced(reconcilers: ReconcileClient) -> bool:
    """Whether a round of some range advanced its low bound (the reconciler's Status)."""
    try:
        status = await reconcilers.status()
    except EpochalError:
        return False  # not serving yet
    return any(r.last_outcome == "advanced" for r in status.ranges)


def test_the_others_fold_while_a_replica_is_stopped_at_the_default_timeouts(
    cluster: LocalCluster,
) -> None:
    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await create_events(client, "tks")
        others = ("replica1", "replica3")
        members = ",".join(sorted(cluster.nodes[name].node_id for name in others))
        # only the default --rpc-timeout-ms, --lease-ms and --lease-margin-ms
        cluster.reconciler_args = ("--cohort-after-ms", "5000")
        cluster.start_reconciler(cluster.add_reconciler().name)
        reconciler = cluster.reconcilers["reconciler1"].address
        async with (
            AsyncClient([cluster.nodes[name].address for name in others]) as client,
            ReconcileClient([reconciler]) as reconcilers,
        ):
            writers = QuorumWriters(client, ["tks"])
            writers.start()
            try:
                await until(
                    "the reconciler advanced a range",
                    lambda: advanced(reconcilers),
                    timeout_s=60,
                    interval_s=0.2,
                )
                await writers.more(20)
                stopped = cluster.nodes["replica2"].process
                assert stopped is not None
                os.kill(stopped.pid, signal.SIGSTOP)
                try:

                    def folded() -> bool:
                        return all(
                            replica_rows(
                                cluster,
                                name,
                                f"SELECT 1 FROM cohorts WHERE members = '{members}'",
                            )
                            for name in others
                        )

                    await until(
                        f"{' and '.join(others)} folding a cohort while replica2 is stopped",
                        folded,
                        timeout_s=STOPPED_S,
                        interval_s=0.2,
                    )
                finally:
                    os.kill(stopped.pid, signal.SIGCONT)
                await writers.more(20)  # the writes went on through the others
            finally:
                await writers.stop()

    run(cluster, scenario, timeout_s=180)
