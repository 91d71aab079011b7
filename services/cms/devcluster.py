"""``make run``: a local CMS of 3 members on 127.0.0.1 with SQLite, a few schema changes, a report.

Stays up until Ctrl-C (then stops the members with SIGTERM) unless ``--exit`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path

from epochal.cms.local import LocalCMS
from epochal.cms_client import CMSClient
from epochal.tcm import (
    AlterTable,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropTable,
    ReplicationParams,
    ReplicationType,
    Transformation,
)
from epochal.wire.metadata import transformation_from_proto


def demo_transformations() -> list[Transformation]:
    text, bigint = ColumnType.TEXT, ColumnType.BIGINT
    return [
        CreateKeyspace(
            name="demo",
            replication=ReplicationParams.simple(3),
            replication_type=ReplicationType.TRACKED,
        ),
        CreateTable(
            keyspace="demo",
            name="users",
            columns=(Column("user_id", text), Column("name", text), Column("joined_ms", bigint)),
            partition_key=("user_id",),
            clustering_key=(),
        ),
        AlterTable(keyspace="demo", name="users", add_columns=(Column("email", text),)),
        CreateTable(
            keyspace="demo",
            name="events",
            columns=(Column("user_id", text), Column("at_ms", bigint), Column("what", text)),
            partition_key=("user_id",),
            clustering_key=("at_ms",),
        ),
        DropTable(keyspace="demo", name="events"),
    ]


async def run(data_dir: Path, exit_after: bool) -> int:
    if data_dir.exists():
        shutil.rmtree(data_dir)
    cluster = LocalCMS(data_dir)
    try:
        cluster.start()
        print(f"starting 3 CMS members: {cluster.members_flag}")
        await cluster.wait_serving()
        async with CMSClient(cluster.addresses) as client:
            for transformation in demo_transformations():
                committed = await client.commit(transformation)
                print(f"committed {transformation.kind:<16} at epoch {committed.epoch}")
            await report(cluster, client)
        if exit_after:
            return 0
        print("\nthe CMS stays up; press Ctrl-C to stop it")
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass
    finally:
        cluster.stop()
        print(f"stopped; logs and databases are in {data_dir}")
    return 0


async def converge(cluster: LocalCMS, timeout_s: float = 10.0) -> None:
    """Followers learn the newest slots with the leader's next message; wait for that."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        epochs = {(await cluster.describe(m)).epoch for m in cluster.members}
        if len(epochs) == 1:
            return
        await asyncio.sleep(0.02)


async def report(cluster: LocalCMS, client: CMSClient) -> None:
    await converge(cluster)
    leader = await cluster.leader()
    print("\nmembers:")
    for member in cluster.members.values():
        described = await cluster.describe(member.member_id)
        role = "leader" if member.member_id == leader else "follower"
        print(
            f"  {member.member_id:<6} {member.address:<18} {role:<9} epoch {described.epoch:<4} "
            f"ready={described.ready}"
        )
    described = await client.describe()
    print(
        f"leader: {leader}   epoch: {described.epoch}   ballot: "
        f"{described.ballot.round}.{described.ballot.node_id}   "
        f"snapshots at epochs: {list(described.snapshot_epochs) or 'none yet'}"
    )
    print("\nthe metadata log:")
    log = await client.fetch_log(0)
    for entry in log.entries:
        transformation = transformation_from_proto(entry.transformation)
        print(f"  epoch {entry.epoch:<4} slot {entry.slot:<4} {transformation!s}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="var/devcluster", type=Path)
    parser.add_argument("--exit", action="store_true", help="stop after the report")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run(args.data_dir, args.exit))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
