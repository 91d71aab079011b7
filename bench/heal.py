"""Bytes a partition's heal and a tracked join exchange: cohort data against the same mutations
sent one by one, and a joining node's difference against the ranges' whole log.

Workload (fixed):
- Two datacenters (``heal_*``): 3 CMS members and 6 replicas on 127.0.0.1 (3 in dc1, 3 in dc2,
  4 tokens each; a tracked keyspace replicated 3 + 3 and a table ``t(k text, v text)``), one
  reconciler reaching both sides (rounds every 250 ms, an advance every 500 ms, write timeout
  and slack 500 ms, ``--cohort-after-ms 1000``). The replicas of each side are cut off from the
  other's (test hook ``cut_off_from``); 3 writers a side write at LOCAL_QUORUM through their side
  for 10 s (4 s with ``--quick``), each overwriting its 40 keys in turn with ~100-byte values.
  Once each side folded its writes into its cohorts, the cut is healed, and the heal runs until
  every cohort ended and the low bound passed it. ``heal_cohort_bytes``: the cohort data the
  replicas sent (cells); ``heal_by_id_bytes``: mutations sent by id meanwhile;
  ``heal_one_by_one_bytes``: the folded mutations' bytes, times the 3 replicas of the other side
  (what delivering them one by one sends).
- Tracked join (``join_*``, with no reconciler and with the reconciler above): 3 replicas
  (RF 3, 4 tokens each), 3,000 partitions (1,000 with ``--quick``) of one ~100-byte row written
  at QUORUM while each replica refuses 15% of the writes other coordinators send it; then a
  fourth replica bootstraps (4 tokens) under 4 QUORUM writers. ``join_*_difference_bytes``: the
  whole mutations its streams brought (the mutations its sources' ids did not cover);
  ``join_*_whole_log_bytes``: the founders' log bytes of the ids it holds (what streaming the
  ranges' log whole sends, at least once); ``join_*_ids``: log entries it took as ids.
Each figure is the median of ``--runs`` runs (3 by default); every run is in ``runs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import _report

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.tcm import ReplicationParams

ROUNDS = (
    "--interval-ms", "250", "--advance-interval-ms", "500",
    "--write-timeout-ms", "500", "--slack-ms", "500", "--cohort-after-ms", "1000",
)  # fmt: skip
SIDES = {"dc1": ("replica1", "replica2", "replica3"), "dc2": ("replica4", "replica5", "replica6")}
KEYS = [
    "heal_cohort_bytes",
    "heal_by_id_bytes",
    "heal_one_by_one_bytes",
    "heal_writes",
    "join_none_difference_bytes",
    "join_none_whole_log_bytes",
    "join_none_ids",
    "join_reconciler_difference_bytes",
    "join_reconciler_whole_log_bytes",
    "join_reconciler_ids",
]


async def start_ring(cluster: LocalCluster) -> None:
    """The CMS and every replica, which join a new ring by themselves (4 tokens each)."""
    cluster.num_tokens = 4
    cluster.cms.start()
    for name in cluster.nodes:
        cluster.start_replica(name)
    await cluster.wait_ready(list(cluster.nodes))
    await cluster.wait_joined()


async def until(what: str, check: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.2)


def query(cluster: LocalCluster, name: str, sql: str) -> list[tuple]:
    path = cluster.data_dir / name / "replica.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


async def metric_sum(cluster: LocalCluster, names: list[str], metric: str) -> float:
    return sum([await cluster.metric(name, metric) for name in names])


async def heal(data_dir: Path, seconds: float) -> dict[str, float]:
    cluster = LocalCluster(
        data_dir, replicas=6, locations=[("dc1", "r1")] * 3 + [("dc2", "r1")] * 3, test_hooks=True
    )
    try:
        await start_ring(cluster)
        ids = {name: r.node_id for name, r in cluster.nodes.items()}
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace(
                "tks",
                replication=ReplicationParams.network_topology({"dc1": 3, "dc2": 3}),
                tracked=True,
            )
            await client.create_table("tks", "t", {"k": "text", "v": "text"}, partition_key=["k"])
            await cluster.wait_for_epoch(client.epoch)
            cluster.reconciler_args = ROUNDS
            cluster.start_reconciler(cluster.add_reconciler().name)
            for side, names in SIDES.items():
                others = [ids[n] for s, ns in SIDES.items() if s != side for n in ns]
                for name in names:
                    await cluster.set_hooks(name, cut_off_from=others)
            writes = 0
            deadline = time.monotonic() + seconds

            async def writer(side: str, w: int) -> None:
                nonlocal writes
                address = cluster.nodes[SIDES[side][w]].address
                for n in range(10**9):
                    if time.monotonic() > deadline:
                        return
                    key = f"{side}.{w}.{n % 40}"
                    with contextlib.suppress(EpochalError):
                        await client.write(
                            "tks",
                            "t",
                            {"k": key, "v": f"{key} #{n} " * 6},
                            consistency=Consistency.LOCAL_QUORUM,
                            coordinator=address,
                        )
                        writes += 1

            await asyncio.gather(*(writer(side, w) for side in SIDES for w in range(3)))
            for names in SIDES.values():
                await until(
                    "a side folded its writes",
                    lambda names=names: (
                        query(cluster, names[0], "SELECT COUNT(*) FROM cohorts")[0][0]
                        and not query(cluster, names[0], "SELECT COUNT(*) FROM mutations")[0][0]
                    ),
                    timeout_s=60.0,
                )
            folded = sum(
                query(cluster, names[0], "SELECT COALESCE(SUM(bytes), 0) FROM cohorts")[0][0]
                for names in SIDES.values()
            )
            everyone = list(cluster.nodes)
            cells = await metric_sum(cluster, everyone, "epochal_cohort_sent_bytes_total")
            by_id = await metric_sum(cluster, everyone, "epochal_reconcile_delivered_bytes_total")
            for name in everyone:
                await cluster.set_hooks(name, cut_off_from=[])
            await until(
                "the cohorts ended",
                lambda: (
                    not any(
                        query(cluster, n, "SELECT COUNT(*) FROM cohorts")[0][0] for n in everyone
                    )
                ),
                timeout_s=120.0,
            )
            return {
                "heal_cohort_bytes": await metric_sum(
                    cluster, everyone, "epochal_cohort_sent_bytes_total"
                )
                - cells,
                "heal_by_id_bytes": await metric_sum(
                    cluster, everyone, "epochal_reconcile_delivered_bytes_total"
                )
                - by_id,
                "heal_one_by_one_bytes": 3 * folded,
                "heal_writes": writes,
            }
    finally:
        cluster.stop()
        cluster.close()


async def join(data_dir: Path, partitions: int, *, reconciler: bool) -> dict[str, float]:
    kind = "reconciler" if reconciler else "none"
    cluster = LocalCluster(data_dir, replicas=3, test_hooks=True)
    try:
        founders = list(cluster.nodes)
        await start_ring(cluster)
        joining = cluster.add_replica(auto_join=False)
        async with AsyncClient([cluster.nodes[n].address for n in founders]) as client:
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await client.create_table("tks", "t", {"k": "text", "v": "text"}, partition_key=["k"])
            for name in founders:
                await cluster.set_hooks(name, drop_write_share=0.15)

            async def write(key: str) -> None:
                with contextlib.suppress(EpochalError):
                    await client.write("tks", "t", {"k": key, "v": f"{key} " * 12})

            for start in range(0, partitions, 50):
                await asyncio.gather(*(write(f"p{n}") for n in range(start, start + 50)))
            for name in founders:
                await cluster.set_hooks(name, drop_write_share=0.0)
            if reconciler:
                cluster.reconciler_args = ROUNDS
                cluster.start_reconciler(cluster.add_reconciler().name)
            cluster.start_replica(joining.name)
            await cluster.wait_ready([joining.name])
            stop = asyncio.Event()

            async def writer(w: int) -> None:
                for n in range(10**9):
                    if stop.is_set():
                        return
                    await write(f"w{w}.{n}")

            writers = [asyncio.create_task(writer(w)) for w in range(4)]
            status = await cluster.bootstrap(joining.name, num_tokens=4)
            stop.set()
            await asyncio.gather(*writers)
            assert status.state == "finished", status
        held = set(query(cluster, joining.name, "SELECT node, log, seq FROM mutations"))
        sizes = {}
        for name in founders:
            for n, g, s, size in query(
                cluster, name, "SELECT node, log, seq, LENGTH(body) FROM mutations"
            ):
                if (n, g, s) in held and size:
                    sizes[(n, g, s)] = size
        return {
            f"join_{kind}_difference_bytes": await cluster.metric(
                joining.name, "epochal_stream_received_mutation_bytes_total"
            ),
            f"join_{kind}_whole_log_bytes": sum(sizes.values()),
            f"join_{kind}_ids": await cluster.metric(
                joining.name, "epochal_stream_received_ids_total"
            ),
        }
    finally:
        cluster.stop()
        cluster.close()


async def one_run(quick: bool) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="epochal-heal-") as tmp:
        figures |= await heal(Path(tmp) / "heal", 4.0 if quick else 10.0)
        for reconciler in (False, True):
            name = f"join-{reconciler}"
            figures |= await join(
                Path(tmp) / name, 1_000 if quick else 3_000, reconciler=reconciler
            )
    return figures


def main() -> int:
    parser = _report.parser(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs (each figure: their median)")
    args = parser.parse_args()
    runs = [asyncio.run(one_run(args.quick)) for _ in range(1 if args.quick else args.runs)]
    figures: dict[str, float] = {key: statistics.median(r[key] for r in runs) for key in KEYS}
    out = _report.write_result(
        "heal",
        {**figures, "runs": runs},
        workload=(__doc__ or "").split("Workload (fixed):")[1].strip(),
        quick=args.quick,
    )
    _report.print_table(figures, KEYS)
    print(
        f"\nheal: cohort data {figures['heal_cohort_bytes']:,.0f} bytes + "
        f"{figures['heal_by_id_bytes']:,.0f} by id, against "
        f"{figures['heal_one_by_one_bytes']:,.0f} one by one "
        f"({figures['heal_one_by_one_bytes'] / max(figures['heal_cohort_bytes'], 1):.1f}x); "
        f"join without a reconciler: {figures['join_none_difference_bytes']:,.0f} bytes whole "
        f"against a {figures['join_none_whole_log_bytes']:,.0f}-byte log"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
