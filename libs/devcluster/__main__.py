"""``make run``: a local cluster on 127.0.0.1 with SQLite — 3 CMS members and 3 replicas — a demo
workload through the SDK, then its status.

The replicas register with the CMS and are joined into a new ring (16 tokens each); a tracked
keyspace with RF 3 gets a table, rows are written and read back at QUORUM. The cluster stays up
until Ctrl-C or SIGTERM unless ``--exit`` is given; then every process gets SIGTERM at once
(SIGKILL if one outlives its grace period) and this program exits. The servers run in sessions
of their own, so the Ctrl-C reaches this program, which stops them; if this program is killed
outright they get SIGTERM from the kernel (``epochal.runtime.processes``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
from pathlib import Path

from epochal.client import Client, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster


async def run(data_dir: Path, exit_after: bool) -> int:
    if data_dir.exists():
        shutil.rmtree(data_dir)
    cluster = LocalCluster(data_dir)
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
