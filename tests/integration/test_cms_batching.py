"""Group commit: while the log is busy the leader waits for more commits before proposing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.tcm import (
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    ReplicationParams,
    ReplicationType,
)

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
    sent 200 ms apart land in one Paxos slot; without grouping each would take its own."""
    cluster = LocalCMS(
        tmp_path / "cms",
        extra_args=("--batch-linger-ms", "1000", "--batch-linger-commits", "1"),
    )

    async def scenario() -> list[int]:
        await cluster.wait_serving()
        async with CMSClient(cluster.addresses) as sdk:
            await sdk.commit(
                CreateKeyspace(
                    name="grouped",
                    replication=ReplicationParams.simple(3),
                    replication_type=ReplicationType.UNTRACKED,
                )
            )

            async def later(delay_s: float, name: str) -> int:
                await asyncio.sleep(delay_s)
                return (await sdk.commit(table(name), entry_id=name)).epoch

            epochs = await asyncio.gather(
                later(0.0, "first"), later(0.2, "second"), later(0.4, "third")
            )
            log = await sdk.fetch_log(since_epoch=min(epochs) - 1)
        slot_of = {entry.entry_id: entry.slot for entry in log.entries}
        return [slot_of[name] for name in ("first", "second", "third")]

    try:
        cluster.start()
        slots = asyncio.run(scenario())
    finally:
        cluster.stop()
        cluster.close()
    assert len(set(slots)) == 1, f"the three commits took slots {slots}"
