"""``make run``: ``epochal dev up`` in the foreground plus a demo workload through the SDK.

A new cluster on 127.0.0.1 with SQLite — 3 CMS members, 3 replicas that join a new ring by
themselves (16 tokens each), a reconciler — under a supervisor running in this process; the
listing of where each process and its log is comes first. Then a tracked keyspace with RF 3
gets a table, rows are written and read back at QUORUM, the replicas, the CMS and the metadata
log are shown, and once the reconciler has had a round of each range (or 30 s passed) the
ranges are shown as ``epochal reconcile status`` shows them. The cluster stays up until Ctrl-C,
SIGTERM or ``epochal dev down`` from another terminal (``epochal dev status`` and
``add-replica`` work too) unless ``--exit`` is given; then every process gets SIGTERM at once
(SIGKILL if one outlives its grace period). The servers die with this program even if it is
killed outright (``epochal.runtime.processes``).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from epochal.cli.reconcile import reconcile_summary, reconcile_table
from epochal.client import AsyncClient, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.commands import epochal_command, listing
from epochal.devcluster.state import DataDir
from epochal.devcluster.supervisor import Shape, Supervisor
from epochal.reconcile_client import RangeStatus, ReconcileClient, ReconcileStatus
from epochal.views import log_text

RECONCILED_WAIT_S = 30.0  # for every range of the demo keyspace to have had a round
RANGES_SHOWN = 6  # of the table; `epochal reconcile status` shows every range


def run_in_foreground(
    data_dir: DataDir, shape: Shape, *, exit_after: bool, trace_dir: Path | None
) -> int:
    """A new cluster in ``data_dir`` (wiped first), its processes writing spans to
    ``trace_dir`` (None: none), the demo, then (unless ``exit_after``) serve until stopped."""
    running = data_dir.supervisor_pid()
    if running:
        print(
            f"a cluster already runs in {data_dir.path} (supervisor pid {running}): "
            "`epochal dev down` stops it",
            file=sys.stderr,
        )
        return 1
    if data_dir.path.exists():
        shutil.rmtree(data_dir.path)
    print(
        f"starting {shape.cms} CMS members, {shape.replicas} replicas and {shape.reconcilers} "
        f"reconciler(s); data and logs in {data_dir.path}"
    )
    supervisor = Supervisor(data_dir.path, shape, trace_dir)

    async def serving(supervisor: Supervisor) -> None:
        for line in listing(supervisor.record, data_dir):
            print(line)
        print()
        cluster = supervisor.cluster
        async with AsyncClient(cluster.addresses, **cluster.sdk_options()) as client:
            await demo(client)
        await report(supervisor.cluster)
        await reconcile(supervisor.cluster)
        if not exit_after:
            print(
                "\nthe cluster stays up: Ctrl-C here or `epochal dev down` in another terminal "
                "stops it"
            )

    try:
        asyncio.run(supervisor.run(serving, stay=not exit_after))
    except asyncio.CancelledError:  # a signal or `epochal dev down` before the demo ended
        print("\nstopping every process")
    except Exception as error:
        print(f"the cluster failed: {type(error).__name__}: {error}", file=sys.stderr)
        print(f"logs are in {data_dir.path}", file=sys.stderr)
        return 1
    print(f"stopped; logs and databases are in {data_dir.path}")
    if trace_dir is not None:
        print(f"spans in {trace_dir}: make analyze TRACES={trace_dir} (trace analytics on Spark)")
    return 0


async def demo(client: AsyncClient) -> None:
    epoch = await client.create_keyspace("demo", replication_factor=3, tracked=True)
    print(f"created keyspace demo (tracked, RF 3) at epoch {epoch}")
    epoch = await client.create_table(
        "demo",
        "events",
        {"user": "text", "at_ms": "bigint", "what": "text"},
        partition_key=["user"],
        clustering_key=["at_ms"],
    )
    print(f"created table demo.events at epoch {epoch}")
    for user in ("ada", "grace", "linus"):
        rows = [{"user": user, "at_ms": 1000 * n, "what": f"event {n}"} for n in range(3)]
        written = await client.write_rows("demo", "events", rows, consistency=Consistency.QUORUM)
        print(
            f"wrote 3 rows of {user} at QUORUM as mutation {written.mutation_id} "
            f"(acknowledged by {', '.join(written.acknowledged)})"
        )
    result = await client.read("demo", "events", {"user": "grace"}, consistency=Consistency.QUORUM)
    print(
        f"read {len(result.rows)} rows of grace at QUORUM: data from "
        f"{result.stats.data_replica}, summaries from "
        f"{', '.join(r for r in result.stats.replicas if r != result.stats.data_replica)}"
    )
    for row in result.rows:
        print(f"  {row}")


async def report(cluster: LocalCluster) -> None:
    print("\nreplicas:")
    for name in cluster.nodes:
        described = await cluster.describe(name)
        print(
            f"  {described.node_id:<8} {described.address:<18} {described.datacenter}/"
            f"{described.rack}  {described.state:<8} epoch {described.epoch:<4} "
            f"ready={described.ready}"
        )
    leader = await cluster.cms.leader()
    print("CMS members:")
    for member_id in cluster.cms.members:
        described = await cluster.cms.describe(member_id)
        role = "leader" if member_id == leader else "follower"
        print(
            f"  {member_id:<6} {cluster.cms.members[member_id].address:<18} {role:<9} "
            f"epoch {described.epoch}"
        )
    async with CMSClient(cluster.cms.addresses) as cms:
        log = await cms.fetch_log(0)
    print(f"\nthe metadata log ({len(log.records)} entries):")
    for record in log.records:
        print(f"  {log_text(record)}")


async def reconcile(cluster: LocalCluster) -> None:
    """Wait until the reconcilers have had a round of every demo range, show where the ranges
    stand."""
    if not cluster.reconcilers:
        return
    addresses = [r.address for r in cluster.reconcilers.values()]
    print(
        f"\nthe reconcilers ({', '.join(cluster.reconcilers)}) reconcile each range every 0.5 s; "
        "a low bound trails the clock by at least the replicas' write timeout, 2 s, and their "
        "max clock skew, 5 s"
    )
    async with ReconcileClient(addresses) as reconcilers:
        status = await reconciled(reconcilers, "demo", RECONCILED_WAIT_S)
    demo_ranges = [r for r in status.ranges if r.keyspace == "demo"]
    if had_rounds(demo_ranges):
        rounds = sum(r.rounds for r in demo_ranges)
        print(f"every range of demo had a round ({rounds} rounds in all):")
    else:
        print(f"not every range of demo had a round within {RECONCILED_WAIT_S:.0f} s:")
    for line in reconcile_table(demo_ranges[:RANGES_SHOWN]):
        print(f"  {line}")
    if len(demo_ranges) > RANGES_SHOWN:
        print(f"  ... and {len(demo_ranges) - RANGES_SHOWN} more ranges")
    print(f"  {reconcile_summary(status)}")
    print(f"every range: {epochal_command()} reconcile status")


async def reconciled(
    reconcilers: ReconcileClient, keyspace: str, timeout_s: float
) -> ReconcileStatus:
    """The reconcilers' status once every range of ``keyspace`` has had a round (at most
    ``timeout_s`` later: the status then)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = await reconcilers.status()
        ranges = [r for r in status.ranges if r.keyspace == keyspace]
        if had_rounds(ranges) or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.25)


def had_rounds(ranges: Sequence[RangeStatus]) -> bool:
    """Every one of ``ranges`` (some) has had a round."""
    return bool(ranges) and all(r.rounds for r in ranges)
