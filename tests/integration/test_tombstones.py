"""Tombstone purging bounded by full reconciliation, with real processes: 3 CMS members,
3 replicas purging every 0.2 s and a reconciler on 127.0.0.1 (RF 3, a tracked keyspace, a table
with ``gc_grace_seconds`` 0).

Proves: rows deleted while replica A was cut off (the others then fold the deletes into a cohort)
are not purged by B and C — their gc grace has passed, but the low bound of a full
reconciliation has not — so when A returns, holding the rows alive, a QUORUM read through A
does not bring them back; once A received the cohort and a full reconciliation passed the
deletes, every replica purges the tombstones, and a read at ONE through each replica still shows
the rows deleted. With a purge that ignores the bound, B and C purge while A is away and the
read through A returns the deleted rows (the test fails).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from tests.harness import replica_rows, start_ring, until

pytestmark = pytest.mark.integration

FAST_ROUNDS = (
    "--interval-ms", "250", "--advance-interval-ms", "500",
    "--write-timeout-ms", "500", "--slack-ms", "500", "--cohort-after-ms", "1000",
)  # fmt: skip
ROWS = 10
DELETED = range(5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster", test_hooks=True)
    cluster.replica_args = ("--purge-interval-ms", "200")
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.close()


def tombstones(cluster: LocalCluster, name: str) -> int:
    return replica_rows(cluster, name, "SELECT COUNT(*) FROM cells WHERE tombstone = 1")[0][0]


def low_bound(cluster: LocalCluster, name: str) -> int:
    rows = replica_rows(
        cluster,
        name,
        "SELECT MIN(mark) FROM reconcile_marks WHERE keyspace = 'tks' AND kind = 'low_bound'",
    )
    return int(rows[0][0] or 0)


def cohorts(cluster: LocalCluster, name: str) -> int:
    return replica_rows(cluster, name, "SELECT COUNT(*) FROM cohorts")[0][0]


async def rows_seen(client: AsyncClient, coordinator: str, level: Consistency) -> list[int]:
    result = await client.read("tks", "t", {"p": "p"}, consistency=level, coordinator=coordinator)
    return sorted(int(row["k"]) for row in result.rows)


def test_a_row_deleted_in_a_cohort_does_not_come_back_after_the_purge(
    cluster: LocalCluster,
) -> None:
    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        a, b, c = (cluster.nodes[n].address for n in ("replica1", "replica2", "replica3"))
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await client.create_table(
                "tks",
                "t",
                {"p": "text", "k": "int", "v": "text"},
                partition_key=["p"],
                clustering_key=["k"],
                options={"gc_grace_seconds": "0"},
            )
            await cluster.wait_for_epoch(client.epoch)
            cluster.reconciler_args = FAST_ROUNDS
            cluster.start_reconciler(cluster.add_reconciler().name)
            for k in range(ROWS):
                row = {"p": "p", "k": k, "v": f"v{k}"}
                await client.write("tks", "t", row, consistency=Consistency.ALL)
            written = await client.write("tks", "t", {"p": "q", "k": 0, "v": "x"})
            # every replica holds the rows, and the low bound passed them
            await until(
                "the low bound past the rows on every replica",
                lambda: all(low_bound(cluster, n) > written.mutation_id.hlc for n in cluster.nodes),
            )
            await cluster.set_hooks("replica1", isolated=True)
            deleted = [
                await client.delete(
                    "tks", "t", {"p": "p", "k": k}, consistency=Consistency.QUORUM, coordinator=b
                )
                for k in DELETED
            ]
            last = max(d.mutation_id.hlc for d in deleted)
            # B and C fold the deletes into a cohort; they do not purge them (no full bound)
            await until(
                "B and C folded the deletes into a cohort",
                lambda: all(
                    replica_rows(cluster, n, f"SELECT COUNT(*) FROM cohorts WHERE high > {last}")[
                        0
                    ][0]
                    for n in ("replica2", "replica3")
                ),
            )
            await asyncio.sleep(1.0)  # five purge passes
            for name in ("replica2", "replica3"):
                assert tombstones(cluster, name) >= len(DELETED), name
                assert low_bound(cluster, name) < last
            assert tombstones(cluster, "replica1") == 0  # A never saw them
            await cluster.set_hooks("replica1", isolated=False)
            expected = [k for k in range(ROWS) if k not in DELETED]
            assert await rows_seen(client, a, Consistency.QUORUM) == expected
            # A receives the cohort, a full reconciliation passes the deletes, all purge
            await until(
                "the cohorts ended and the low bound passed the deletes everywhere",
                lambda: all(
                    not cohorts(cluster, n) and low_bound(cluster, n) > last for n in cluster.nodes
                ),
                timeout_s=60.0,
            )
            await until(
                "every replica purged the tombstones",
                lambda: all(tombstones(cluster, n) == 0 for n in cluster.nodes),
            )
            for name in cluster.nodes:
                assert await cluster.metric(name, "epochal_tombstones_purged_total") >= len(DELETED)
            for address in (a, b, c):
                assert await rows_seen(client, address, Consistency.ONE) == expected, address
            assert await rows_seen(client, a, Consistency.ALL) == expected

    asyncio.run(scenario())
