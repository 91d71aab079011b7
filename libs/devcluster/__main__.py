"""``make run``: a local cluster on 127.0.0.1 with SQLite — 3 CMS members, 3 replicas and a
reconciler — a demo workload through the SDK, then its status.

The replicas register with the CMS and are joined into a new ring (16 tokens each); a tracked
keyspace with RF 3 gets a table, rows are written and read back at QUORUM. Then a reconciler
starts, takes the leases of the keyspace's ranges and reconciles them every half second; once
each range has had a round (or 30 s passed) its status is shown as ``epochal reconcile status``
shows it. The cluster stays up until Ctrl-C or SIGTERM unless ``--exit`` is given; then every
process — the reconciler too — gets SIGTERM at once (SIGKILL if one outlives its grace period)
and this program exits. The servers run in sessions of their own, so the Ctrl-C reaches this
program, which stops them; if this program is killed outright they get SIGTERM from the kernel
(``epochal.runtime.processes``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from epochal.cli import reconcile_summary, reconcile_table
from epochal.client import Client, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.reconcile_client import RangeStatus, ReconcileClient, ReconcileStatus

# A round of each range every half second. The write timeout and the slack are not shortened for
# the demo: --write-timeout-ms must be the replicas' (their default, 2000) and --slack-ms at least
# their --max-skew-ms (5000), else a write still in flight could carry an id below the new low
# bound. So each bound trails the clock by 7 s at least.
RECONCILER_ARGS = ("--interval-ms", "500", "--write-timeout-ms", "2000", "--slack-ms", "5000")
SERVING_WAIT_S = 60.0  # a reconciler catches up with the metadata log, then serves
RECONCILED_WAIT_S = 30.0  # for every range of the demo keyspace to have had a round
RANGES_SHOWN = 6  # of the table; `epochal reconcile status` shows every range


async def run(data_dir: Path, exit_after: bool) -> int:
    if data_dir.exists():
        shutil.rmtree(data_dir)
    cluster = LocalCluster(data_dir, reconciler_args=RECONCILER_ARGS)
    main_task = asyncio.current_task()
    assert main_task is not None
    # asyncio.run turns Ctrl-C into a cancellation of this task; SIGTERM does the same.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        cluster.start()
        print(f"starting 3 CMS members: {cluster.cms.members_flag}")
        print(f"starting 3 replicas: {', '.join(cluster.addresses)}")
        await cluster.wait_ready()
        epoch = await cluster.form_ring()
        print(f"the replicas joined a new ring (16 tokens each) by epoch {epoch}\n")
        async with Client(cluster.addresses) as client:
            await demo(client)
        await report(cluster)
        await reconcile(cluster)
        if exit_after:
            return 0
        print(f"\nthe cluster stays up (seeds: {','.join(cluster.addresses)}); Ctrl-C stops it")
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        print("\nstopping every process")
    finally:
        cluster.stop()
        print(f"stopped; logs and databases are in {data_dir}")
    return 0


async def demo(client: Client) -> None:
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
        print(f"  epoch {record.epoch:<4} {record.transformation or record.problem!s}")


async def reconcile(cluster: LocalCluster) -> None:
    """Start a reconciler, wait until it has had a round of every demo range, show where the
    ranges stand."""
    reconciler = cluster.add_reconciler()
    cluster.start_reconciler(reconciler.name)
    print(
        f"\nstarting a reconciler: {reconciler.name} on {reconciler.address} (a round of each "
        "range every 0.5 s; a low bound trails the clock by at least the replicas' write "
        "timeout, 2 s, and their max clock skew, 5 s)"
    )
    await reconciler.wait_serving(time.monotonic() + SERVING_WAIT_S)
    async with ReconcileClient([reconciler.address]) as reconcilers:
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
    print(f"every range: {epochal_command()} reconcile status --reconciler {reconciler.address}")


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


def epochal_command() -> str:
    """The ``epochal`` script beside this interpreter, relative to here when it is below."""
    script = Path(sys.executable).with_name("epochal")
    relative = os.path.relpath(script)
    return relative if not relative.startswith("..") else str(script)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="var/devcluster", type=Path)
    parser.add_argument("--exit", action="store_true", help="stop after the report")
    args = parser.parse_args(argv)
    # Every line at once, also through a pipe (`make run | tee`, the tests).
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        return asyncio.run(run(args.data_dir, args.exit))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
