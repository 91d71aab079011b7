"""CMS reconfiguration with real processes on 127.0.0.1: the voters go from 1 to 3 to 5 and back
to 3 while clients keep committing; an interrupted add is resumed, another cancelled, and a
removed member added again; at 5 voters two of the original members are SIGKILLed and commits
continue; afterwards every acknowledged commit is in the log of every surviving member, once,
at its acknowledged epoch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from epochal.cms_admin import add_voter, remove_voter
from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.errors import Unavailable
from epochal.tcm import StartAddToCMS

from .test_cms_cluster import converge, keyspace, read_log

pytestmark = pytest.mark.integration

CLIENTS = 4
MEMBERS = ("cms1", "cms2", "cms3", "cms4", "cms5")


async def until(what: str, check: Callable[[], Awaitable[bool]], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.05)


async def roles(cluster: LocalCMS, member_id: str, since_epoch: int = 0) -> dict[str, str]:
    """The roles in ``member_id``'s view once it has applied ``since_epoch``: a change is
    acknowledged by one member before every other member has applied it."""
    deadline = time.monotonic() + 30.0
    while (described := await cluster.describe(member_id)).epoch < since_epoch:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{member_id} is at epoch {described.epoch}, not {since_epoch}")
        await asyncio.sleep(0.05)
    return {m.member_id: m.role for m in described.members}


async def voters(cluster: LocalCMS, member_id: str, since_epoch: int = 0) -> set[str]:
    view = await roles(cluster, member_id, since_epoch)
    return {m for m, role in view.items() if role == "voter"}


def test_voters_go_1_3_5_3_under_load_with_two_originals_killed_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    cluster = LocalCMS(
        tmp_path / "cms",
        size=len(MEMBERS),
        initial=1,
        extra_args=("--election-timeout-ms", "400", "--heartbeat-interval-ms", "50"),
    )
    acknowledged: list[tuple[str, int]] = []  # (entry id, epoch)
    failures: list[str] = []
    stop = asyncio.Event()

    async def client(index: int) -> None:
        async with CMSClient(
            cluster.addresses, first_member=index, attempt_timeout_s=2.0, total_timeout_s=30.0
        ) as sdk:
            step = 0
            while not stop.is_set():
                entry_id = f"client{index}-{step}"
                try:
                    committed = await sdk.commit(keyspace(f"k{index}_{step}"), entry_id=entry_id)
                except Unavailable as error:  # counted; the scenario bounds how many
                    failures.append(f"{entry_id}: {error}")
                    continue
                acknowledged.append((entry_id, committed.epoch))
                step += 1

    async def commits_continue(count: int) -> None:
        target = len(acknowledged) + count
        await until(f"{count} more commits", _true_when(lambda: len(acknowledged) >= target))

    async def scenario() -> dict[str, object]:
        cluster.start("cms1")
        await cluster.wait_serving("cms1")
        for member in MEMBERS[1:]:
            cluster.start(member)
        await until(
            "four candidates registered",
            lambda: _all_known(cluster),
        )
        assert await roles(cluster, "cms1") == {
            "cms1": "voter",
            "cms2": "learner",
            "cms3": "learner",
            "cms4": "learner",
            "cms5": "learner",
        }
        loads = [asyncio.create_task(client(i)) for i in range(CLIENTS)]
        seen: dict[str, object] = {}
        try:
            await commits_continue(50)
            async with CMSClient(cluster.addresses, total_timeout_s=30.0) as admin:
                # Each step passes on the epoch of the one before, and each view is read at it.
                # An add interrupted after its first step is resumed by the next add_voter.
                epoch = (await admin.commit(StartAddToCMS("cms2"))).epoch
                assert (await roles(cluster, "cms1", epoch))["cms2"] == "joining"
                for member in ("cms2", "cms3"):
                    address = cluster.members[member].address
                    epoch = await add_voter(admin, member, address, since_epoch=epoch)
                    await commits_continue(20)
                assert await voters(cluster, "cms1", epoch) == {"cms1", "cms2", "cms3"}
                # ... and one cancelled after its first step goes back to being a learner.
                epoch = (await admin.commit(StartAddToCMS("cms5"))).epoch
                epoch = await remove_voter(admin, "cms5", since_epoch=epoch)
                assert (await roles(cluster, "cms1", epoch))["cms5"] == "learner"
                for member in ("cms4", "cms5"):
                    address = cluster.members[member].address
                    epoch = await add_voter(admin, member, address, since_epoch=epoch)
                    await commits_continue(20)
                assert await voters(cluster, "cms3", epoch) == set(MEMBERS)
                # Two of the original three voters die; three of five still make a quorum.
                cluster.kill("cms1")
                cluster.kill("cms2")
                seen["acknowledged_at_kill"] = len(acknowledged)
                await commits_continue(100)
                for member in ("cms1", "cms2"):
                    epoch = await remove_voter(admin, member, since_epoch=epoch)
                    await commits_continue(20)
                # A member removed and added again really becomes a voter again.
                epoch = await remove_voter(admin, "cms5", since_epoch=epoch)
                address = cluster.members["cms5"].address
                epoch = await add_voter(admin, "cms5", address, since_epoch=epoch)
                await commits_continue(20)
                seen["final_voters"] = await voters(cluster, "cms4", epoch)
                seen["final_roles"] = await roles(cluster, "cms5", epoch)
            await commits_continue(50)
        finally:
            stop.set()
            await asyncio.gather(*loads)
        seen["epoch"] = await converge(cluster, members=("cms3", "cms4", "cms5"))
        return seen

    try:
        seen = asyncio.run(asyncio.wait_for(scenario(), timeout=240))
        cluster.stop()  # graceful: flushes every member's lazy writes before the logs are read
        logs = {member: read_log(cluster, member) for member in ("cms3", "cms4", "cms5")}
    finally:
        cluster.close()

    print(
        f"\n{len(acknowledged)} commits acknowledged ({seen['acknowledged_at_kill']} before the"
        f" kills), {len(failures)} gave up, final epoch {seen['epoch']}"
    )
    assert seen["final_voters"] == {"cms3", "cms4", "cms5"}
    assert seen["final_roles"] == {
        "cms1": "learner",
        "cms2": "learner",
        "cms3": "voter",
        "cms4": "voter",
        "cms5": "voter",
    }
    assert len(acknowledged) >= int(seen["acknowledged_at_kill"]) + 100  # type: ignore[call-overload]
    # Only commits caught in the seconds after the kills may have run out of retries.
    assert len(failures) <= CLIENTS, failures
    reference = [(row.epoch, row.entry_id, row.transformation) for row in logs["cms3"]]
    for member, rows in logs.items():
        assert [(r.epoch, r.entry_id, r.transformation) for r in rows] == reference, member
    assert [epoch for epoch, _, _ in reference] == list(range(1, len(reference) + 1))
    at = {entry_id: epoch for epoch, entry_id, _ in reference}
    assert len(at) == len(reference)  # no entry id twice
    for entry_id, epoch in acknowledged:
        assert at.get(entry_id) == epoch, (entry_id, epoch, at.get(entry_id))
    assert len({epoch for _, epoch in acknowledged}) == len(acknowledged)
    kinds = [row.kind for row in logs["cms3"]]
    assert kinds.count("add_cms_candidate") == 4
    assert kinds.count("start_add_to_cms") == 6  # one of them cancelled, cms5 added twice
    assert kinds.count("finish_add_to_cms") == 5
    assert kinds.count("remove_from_cms") == 4  # the cancel, the two dead originals, cms5


def _true_when(condition: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return condition()

    return check


async def _all_known(cluster: LocalCMS) -> bool:
    return len(await roles(cluster, "cms1")) == len(MEMBERS)
