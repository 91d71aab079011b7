"""Metrics from every process (issue 34), scraped over HTTP as Prometheus does, from a real
cluster — 3 CMS members, 3 replicas, 1 reconciler — during an SDK workload:

- each process's ``epochal_current_epoch`` is the log's last epoch;
- the CMS members' commit-latency count grows by exactly the DDL commits the workload made (a
  delta, of the ``schema`` group: registrations, lease grants and snapshots are other groups);
- a SIGSTOPped member is counted unreachable by the others;
- every metric of seed 001's list is exported by the processes that see it, and the largest
  finite latency bucket is at least 60 s.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from epochal.client import AsyncClient
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.tcm import Column, ColumnType, CreateTable
from tests.harness import paused_processes, run, sample, scrape, start_ring, total, until

pytestmark = pytest.mark.integration

COMMIT_LATENCY = "epochal_cms_commit_latency_seconds_count"
# Seed 001's TCM metrics (and the issue's), by the processes that export them.
EVERY_PROCESS = ("epochal_current_epoch", "epochal_cms_members", "epochal_cms_unreachable_members")
CMS_MEMBER = ("epochal_cms_commit_latency_seconds_bucket", "epochal_cms_is_leader")
FOLLOWER = (  # replicas and reconcilers: they follow the log and commit through a CMS client
    "epochal_cms_client_commit_latency_seconds_bucket",
    "epochal_cms_client_commit_retries_total",
    "epochal_fetch_log_latency_seconds_bucket",
    "epochal_fetch_log_entries_total",
    "epochal_epochs_behind_cms",
)
REPLICA = (
    "epochal_progress_barrier_latency_seconds_bucket",
    "epochal_progress_barrier_retries_total",
    "epochal_progress_barrier_relaxations_total",
    "epochal_coordinator_behind_schema_total",
    "epochal_coordinator_behind_placements_total",
    "epochal_write_latency_seconds_bucket",
    "epochal_read_latency_seconds_bucket",
    "epochal_stream_received_bytes_total",
    "epochal_stream_sent_bytes_total",
)
RECONCILER = ("epochal_reconcile_unreconciled_mutations", "epochal_reconcile_lag_seconds")
DDL_COMMITS = 3  # a keyspace and two tables, through the SDK
FORWARDED_TABLES = ("forwarded1", "forwarded2")


def families(samples: dict[str, float]) -> set[str]:
    return {key.partition("{")[0] for key in samples}


def test_every_process_exports_the_seeds_metrics_during_a_workload(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, metrics=True)
    cluster.reconciler_args = ("--interval-ms", "200", "--advance-interval-ms", "200")

    async def scrape_all(names: list[str] | None = None) -> dict[str, dict[str, float]]:
        """Every process's metrics (or the named ones'), by process name."""
        named = {
            p.name: p.metrics_address for p in cluster.processes if names is None or p.name in names
        }
        scraped = await asyncio.gather(*(asyncio.to_thread(scrape, a) for a in named.values()))
        return dict(zip(named, scraped, strict=True))

    def ddl_commits(scraped: dict[str, dict[str, float]]) -> dict[str, float]:
        return {
            member: total(scraped[member], COMMIT_LATENCY, outcome="success", kind="schema")
            for member in cluster.cms.members
        }

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        reconciler = cluster.add_reconciler()
        cluster.start_reconciler(reconciler.name)
        await reconciler.wait_serving(time.monotonic() + 60)
        before = await scrape_all()
        assert len(before) == 7
        leader = await cluster.cms.leader()
        follower = next(m for m in cluster.cms.members if m != leader)
        async with AsyncClient(cluster.addresses) as client:
            # Through the SDK (its CMS client asks cms1 first) ...
            await client.create_keyspace("shop", replication_factor=3, tracked=True)
            for table in ("carts", "orders"):
                await client.create_table(
                    "shop", table, {"user": "text", "qty": "int"}, partition_key=["user"]
                )
            # ... and through a follower, which forwards them to the leader.
            async with CMSClient([cluster.cms.members[follower].address]) as cms:
                for name in FORWARDED_TABLES:
                    columns = (Column("id", ColumnType.TEXT),)
                    await cms.commit(
                        CreateTable(
                            keyspace="shop", name=name, columns=columns, partition_key=("id",)
                        )
                    )
            for n in range(50):
                await client.write("shop", "carts", {"user": f"u{n}", "qty": n})
                await client.read("shop", "carts", {"user": f"u{n}"})
            after = await scrape_all()
        # Counted once per client commit, on the member the client called: the forwarded ones
        # at the follower, not again at the leader.
        grew = {m: ddl_commits(after)[m] - ddl_commits(before)[m] for m in cluster.cms.members}
        assert sum(grew.values()) == DDL_COMMITS + len(FORWARDED_TABLES), grew
        assert grew[follower] >= len(FORWARDED_TABLES), grew
        assert grew[leader] == (DDL_COMMITS if leader == "cms1" else 0), grew

        async def every_process_at_the_last_epoch() -> bool:
            last = (await cluster.cms.describe(await cluster.cms.leader())).epoch
            scraped = await scrape_all()
            epochs = {name: sample(s, "epochal_current_epoch") for name, s in scraped.items()}
            return all(epoch == last for epoch in epochs.values())

        await until("every process reports the log's last epoch", every_process_at_the_last_epoch)

        async def reconciled() -> dict[str, dict[str, float]] | None:
            scraped = await scrape_all()
            done = RECONCILER[1] in families(scraped["reconciler1"])  # a round went through
            return scraped if done else None

        scraped = await until("a reconciliation round reports its lag", reconciled)
        for name, samples in scraped.items():
            kind = name.rstrip("0123456789")
            expected = {
                "cms": EVERY_PROCESS + CMS_MEMBER,
                "replica": EVERY_PROCESS + FOLLOWER + REPLICA,
                "reconciler": EVERY_PROCESS + FOLLOWER + RECONCILER,
            }[kind]
            assert set(expected) <= families(samples), (name, set(expected) - families(samples))
            assert sample(samples, "epochal_cms_members") == 3, name
            assert sample(samples, "epochal_cms_unreachable_members") == 0, name
            buckets = [
                float(key.split('le="')[1].split('"')[0])
                for key in samples
                if key.endswith("}") and "_bucket{" in key and 'le="+Inf"' not in key
            ]
            assert max(buckets) >= 60.0, name
        leaders = [m for m in cluster.cms.members if sample(scraped[m], "epochal_cms_is_leader")]
        assert len(leaders) == 1
        # The harness's lookup raises on a name no longer exported, rather than answering 0.
        assert await cluster.metric("replica1", "epochal_current_epoch") > 0
        with pytest.raises(KeyError, match=r"exports no metric .*epochal_current_epoch"):
            await cluster.metric("replica1", "current_epoch")  # the name before issue 34

        # One member stopped (SIGSTOP: its sockets stay open, it answers nothing): the other
        # members, the replicas and the reconciler count it, and stop counting it once it runs.
        stopped = cluster.cms.members["cms3"]
        watching = ["cms1", "cms2", *cluster.nodes, *cluster.reconcilers]

        async def unreachable_counts() -> list[float]:
            scraped = await scrape_all(watching)  # not the stopped one: it would not answer
            return [sample(scraped[n], "epochal_cms_unreachable_members") for n in watching]

        with paused_processes(stopped):

            async def seen_unreachable() -> bool:
                return all(count >= 1 for count in await unreachable_counts())

            await until("every other process counts the stopped member", seen_unreachable)

        async def reachable_again() -> bool:
            return all(count == 0 for count in await unreachable_counts())

        await until("no process counts it once it runs again", reachable_again)

    run(cluster, scenario, timeout_s=240)
