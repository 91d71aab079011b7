"""Group commit: while the log is busy the leader waits for more commits before proposing."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.tcm import Column, ColumnType, CreateTable
from tests.harness import keyspace, run, until_logged

pytestmark = pytest.mark.integration


def table(name: str) -> CreateTable:
    return CreateTable(
        keyspace="grouped",
        name=name,
        columns=(Column("id", ColumnType.TEXT),),
        partition_key=("id",),
    )


def test_commits_spread_over_the_linger_window_share_one_slot(tmp_path: Path) -> None:
    """With a 1 s window that opens after any slot (--batch-linger-commits 1), three commits
    that reach the leader one after another — each sent once the leader logged the one before
    as queued — land in one Paxos slot; without grouping each would take its own."""
    cluster = LocalCMS(
        tmp_path / "cms",
        extra_args=(
            *("--batch-linger-ms", "1000", "--batch-linger-commits", "1"),
            *("--log-level", "DEBUG"),  # the leader logs each commit it queues
        ),
    )

    async def scenario() -> list[int]:
        cluster.start()
        await cluster.wait_serving()
        async with CMSClient(cluster.addresses) as sdk:
            await sdk.commit(keyspace("grouped"))
            names = ("first", "second", "third")
            commits = []
            for name in names:
                commits.append(asyncio.ensure_future(sdk.commit(table(name), entry_id=name)))
                queued = re.compile(rf"commit {name} queued at the leader")
                await until_logged(queued, cluster.members.values(), timeout_s=30)
            epochs = [committed.epoch for committed in await asyncio.gather(*commits)]
            log = await sdk.fetch_log(since_epoch=min(epochs) - 1)
        slot_of = {entry.entry_id: entry.slot for entry in log.records}
        return [slot_of[name] for name in names]

    slots = run(cluster, scenario, 120)
    assert len(set(slots)) == 1, f"the three commits took slots {slots}"
