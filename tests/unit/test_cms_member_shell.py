"""The CMS member's asyncio shell performs what its core asks, on every path: here a follower's
deferred apply of a slot it cannot read, after which the member must report itself not ready,
answer the commits waiting at it, and stop taking Paxos messages (``epochal.cms.member``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from epochal.cms.member import CMSMemberLoop
from epochal.cms.settings import CMSSettings
from epochal.cms.storage import CMSStorage
from epochal.cmscore.batching import proposal_item
from epochal.cmscore.state_machine import CommitResult
from epochal.errors import Unavailable
from epochal.paxos import ChosenSlot
from epochal.tcm import CreateKeyspace, ReplicationParams


def test_a_slot_applied_late_that_cannot_be_read_stops_the_member_at_once(tmp_path: Path) -> None:
    asyncio.run(_stops_at_once(tmp_path))


async def _stops_at_once(tmp_path: Path) -> None:
    settings = CMSSettings(
        member_id="m1",
        members={"m1": "127.0.0.1:1"},  # one member: it leads and initialises the log alone
        data_dir=str(tmp_path),
        heartbeat_interval_ms=10,
        election_timeout_ms=50,
    )
    (tmp_path / "m1").mkdir()
    member = CMSMemberLoop(settings, CMSStorage(settings.db_url))
    readiness: list[bool] = []
    became_ready = asyncio.Event()

    def on_readiness(ready: bool) -> None:
        readiness.append(ready)
        if ready:
            became_ready.set()

    member.on_readiness = on_readiness
    await member.start()
    try:
        await asyncio.wait_for(became_ready.wait(), timeout=5.0)
        assert readiness == [True]
        waiting: asyncio.Future[CommitResult] = asyncio.get_running_loop().create_future()
        item = proposal_item(
            CreateKeyspace(name="ks", replication=ReplicationParams.simple(1)), "waits"
        )
        member.core.commits.forwarding(item, waiting)
        # What a follower does with slots it learned while its vote was being written.
        member._to_apply = [
            ChosenSlot(slot=member.core.sm.applied_slot + 1, value=(b"\xff not an item",))
        ]
        member._apply_deferred()
        assert readiness == [True, False]
        assert waiting.done() and isinstance(waiting.exception(), Unavailable)
        assert not member._accepting_messages
        assert "cannot apply slot" in member.stopped_applying
    finally:
        member.end_streams()
        await member.stop()
