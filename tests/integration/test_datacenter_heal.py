"""Two datacenters cut apart, with real processes: 3 CMS members, 6 replicas (3 in dc1, 3 in dc2,
4 tokens each), a tracked keyspace replicated 3 + 3 (NetworkTopologyStrategy) and a reconciler
that reaches both sides; the replicas of each side cannot reach the other's (test hooks:
``cut_off_from``, set on both sides).

Proves: with LOCAL_QUORUM writes on both sides for a while (each writer overwriting its 40 keys
again and again), each side reconciles among itself under its own cohorts (members: its three
replicas) while the low bound stays; once healed, the sides exchange their cohorts' data and a
full reconciliation advances the bound and ends them; every replica then holds every key's last
write (each side's, read at ONE through every replica, from its own storage). The bytes
exchanged at the heal — cohort data as cells, and mutations sent by id — are printed (``-s``)
against the bytes of the folded mutations sent one by one to each replica of the other side;
the cohort data is less (a cohort's cells are each key's last value, not every write).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.tcm import ReplicationParams
from tests.harness import replica_rows, start_ring, until

pytestmark = pytest.mark.integration

LOCATIONS = [("dc1", "r1")] * 3 + [("dc2", "r1")] * 3
FAST_ROUNDS = (
    "--interval-ms", "250", "--advance-interval-ms", "500",
    "--write-timeout-ms", "500", "--slack-ms", "500", "--cohort-after-ms", "1000",
)  # fmt: skip
CUT_S = 8.0
KEYS_PER_WRITER = 40


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster", replicas=6, locations=LOCATIONS, test_hooks=True)
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.close()


def cohorts(cluster: LocalCluster, name: str) -> list[tuple]:
    return replica_rows(cluster, name, "SELECT cohort_id, members, bytes FROM cohorts")


def low_bound(cluster: LocalCluster, name: str) -> int:
    rows = replica_rows(
        cluster, name, "SELECT MIN(mark) FROM reconcile_marks WHERE kind = 'low_bound'"
    )
    return int(rows[0][0] or 0)


async def heal_bytes(cluster: LocalCluster) -> tuple[float, float]:
    """The cohort data (cells) and the mutations by id the replicas sent for the reconciler."""
    cells = by_id = 0.0
    for name in cluster.nodes:
        cells += await cluster.metric(name, "epochal_cohort_sent_bytes_total")
        by_id += await cluster.metric(name, "epochal_reconcile_delivered_bytes_total")
    return cells, by_id


def test_two_datacenters_cut_apart_converge_when_healed(cluster: LocalCluster) -> None:
    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        sides = {
            "dc1": ["replica1", "replica2", "replica3"],
            "dc2": ["replica4", "replica5", "replica6"],
        }
        ids = {name: r.node_id for name, r in cluster.nodes.items()}
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace(
                "tks",
                replication=ReplicationParams.network_topology({"dc1": 3, "dc2": 3}),
                tracked=True,
            )
            await client.create_table("tks", "t", {"k": "text", "v": "text"}, partition_key=["k"])
            await cluster.wait_for_epoch(client.epoch)
            cluster.reconciler_args = FAST_ROUNDS
            cluster.start_reconciler(cluster.add_reconciler().name)
            for side, names in sides.items():
                others = [ids[n] for s, ns in sides.items() if s != side for n in ns]
                for name in names:
                    await cluster.set_hooks(name, cut_off_from=others)
            bounds_at_cut = {n: low_bound(cluster, n) for n in cluster.nodes}
            # per key: the values a writer sent since (and with) its last acknowledged one; the
            # key's final value must be one of them (a refused write may have landed too)
            possible: dict[str, list[str]] = {}
            acknowledged = 0
            deadline = time.monotonic() + CUT_S

            async def writer(side: str, w: int) -> None:
                nonlocal acknowledged
                coordinator = cluster.nodes[sides[side][w % 3]].address
                for n in range(1_000_000):
                    if time.monotonic() > deadline:
                        return
                    key = f"{side}.{w}.{n % KEYS_PER_WRITER}"  # each key written again and again
                    value = f"{key} #{n} " * 6
                    try:
                        await client.write(
                            "tks",
                            "t",
                            {"k": key, "v": value},
                            consistency=Consistency.LOCAL_QUORUM,
                            coordinator=coordinator,
                        )
                    except EpochalError:
                        possible.setdefault(key, []).append(value)
                        continue
                    possible[key] = [value]
                    acknowledged += 1

            await asyncio.gather(*(writer(side, w) for side in sides for w in range(3)))
            assert {key.split(".")[0] for key in possible} == {"dc1", "dc2"}
            # each side folds into cohorts of its own three; the low bound stays
            for side, names in sides.items():
                members = ",".join(sorted(ids[n] for n in names))

                def caught_up(names: list[str] = names, members: str = members) -> bool:
                    # its cohorts formed, and its folds reached the end of the writes
                    logs = replica_rows(cluster, names[0], "SELECT COUNT(*) FROM mutations")[0][0]
                    held = cohorts(cluster, names[0])
                    return bool(held) and all(m == members for _, m, _ in held) and logs == 0

                await until(f"{side}'s replicas folded their writes", caught_up, timeout_s=30.0)
            for name in cluster.nodes:
                assert low_bound(cluster, name) == bounds_at_cut[name], name
            # one by one: each side's folded mutations to each of the other side's 3 replicas
            one_by_one = 3 * sum(
                sum(size for _, _, size in cohorts(cluster, names[0])) for names in sides.values()
            )
            before = await heal_bytes(cluster)
            healed_at = max(low_bound(cluster, n) for n in cluster.nodes)
            for name in cluster.nodes:
                await cluster.set_hooks(name, cut_off_from=[])
            await until(
                "the cohorts exchanged and ended, the low bound past the heal",
                lambda: all(
                    not cohorts(cluster, n) and low_bound(cluster, n) > healed_at
                    for n in cluster.nodes
                ),
                timeout_s=90.0,
            )
            cells_sent, by_id = (
                a - b for a, b in zip(await heal_bytes(cluster), before, strict=True)
            )
            print(
                f"\ntwo datacenters healed: {acknowledged} writes acknowledged to "
                f"{len(possible)} keys; at the heal {cells_sent:.0f} bytes of cohort data (cells) "
                f"and {by_id:.0f} bytes of mutations by id, against {one_by_one} bytes to send "
                "the folded mutations one by one"
            )
            # every key's last write, from either side, on every replica, from its own storage
            for name in cluster.nodes:
                address = cluster.nodes[name].address
                for key, values in sorted(possible.items()):
                    result = await client.read(
                        "tks", "t", {"k": key}, consistency=Consistency.ONE, coordinator=address
                    )
                    seen = [row["v"] for row in result.rows]
                    assert len(seen) == 1 and seen[0] in values, (name, key, seen)
            assert cells_sent < one_by_one

    asyncio.run(asyncio.wait_for(scenario(), 400))
