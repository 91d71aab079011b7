"""CMS reconfiguration with real processes on 127.0.0.1: the voters go from 1 to 3 to 5 and back
to 3 while clients keep committing; an interrupted add is resumed, another cancelled, and a
removed member added again; at 5 voters two of the original members are SIGKILLed and commits
continue; afterwards every acknowledged commit is in the log of every surviving member, once,
at its acknowledged epoch."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.cms.storage import LogEntryRow
from epochal.cms_admin import add_voter, remove_voter
from epochal.cms_client import CMSClient, CMSView
from epochal.devcluster.cms import LocalCMS
from epochal.tcm import StartAddToCMS
from tests.harness import FAST_ELECTIONS, Committers, converge, read_log, run, until

pytestmark = pytest.mark.integration

CLIENTS = 4
MEMBERS = ("cms1", "cms2", "cms3", "cms4", "cms5")


async def roles(cluster: LocalCMS, member_id: str, since_epoch: int = 0) -> dict[str, str]:
    """The roles in ``member_id``'s view once it has applied ``since_epoch``: a change is
    acknowledged by one member before every other member has applied it."""

    async def applied() -> CMSView | None:
        described = await cluster.describe(member_id)
        return described if described.epoch >= since_epoch else None

    described = await until(f"{member_id} at epoch {since_epoch}", applied, 30.0, 0.05)
    return {m.member_id: m.role for m in described.members}


async def voters(cluster: LocalCMS, member_id: str, since_epoch: int = 0) -> set[str]:
    view = await roles(cluster, member_id, since_epoch)
    return {m for m, role in view.items() if role == "voter"}


def test_voters_go_1_3_5_3_under_load_with_two_originals_killed_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    cluster = LocalCMS(tmp_path / "cms", size=len(MEMBERS), initial=1, extra_args=FAST_ELECTIONS)
    committers = Committers(
        cluster.addresses, count=CLIENTS, attempt_timeout_s=2.0, total_timeout_s=30.0
    )

    async def scenario() -> dict[str, object]:
        cluster.start("cms1")
        await cluster.wait_serving("cms1")
        for member in MEMBERS[1:]:
            cluster.start(member)
        await until("four candidates registered", lambda: _all_known(cluster))
        assert await roles(cluster, "cms1") == {
            "cms1": "voter",
            "cms2": "learner",
            "cms3": "learner",
            "cms4": "learner",
            "cms5": "learner",
        }
        committers.start()
        seen: dict[str, object] = {}
        try:
            await committers.progress(50)
            async with CMSClient(cluster.addresses, total_timeout_s=30.0) as admin:
                # Each step passes on the epoch of the one before, and each view is read at it.
                # An add interrupted after its first step is resumed by the next add_voter.
                epoch = (await admin.commit(StartAddToCMS("cms2"))).epoch
                assert (await roles(cluster, "cms1", epoch))["cms2"] == "joining"
                for member in ("cms2", "cms3"):
                    address = cluster.members[member].address
                    epoch = await add_voter(admin, member, address, since_epoch=epoch)
                    await committers.progress(20)
                assert await voters(cluster, "cms1", epoch) == {"cms1", "cms2", "cms3"}
                # ... and one cancelled after its first step goes back to being a learner.
                epoch = (await admin.commit(StartAddToCMS("cms5"))).epoch
                epoch = await remove_voter(admin, "cms5", since_epoch=epoch)
                assert (await roles(cluster, "cms1", epoch))["cms5"] == "learner"
                for member in ("cms4", "cms5"):
                    address = cluster.members[member].address
                    epoch = await add_voter(admin, member, address, since_epoch=epoch)
                    await committers.progress(20)
                assert await voters(cluster, "cms3", epoch) == set(MEMBERS)
                # Two of the original three voters die; three of five still make a quorum.
                cluster.kill("cms1")
                cluster.kill("cms2")
                seen["acknowledged_at_kill"] = len(committers.acknowledged)
                await committers.progress(100)
                for member in ("cms1", "cms2"):
                    epoch = await remove_voter(admin, member, since_epoch=epoch)
                    await committers.progress(20)
                # A member removed and added again really becomes a voter again.
                epoch = await remove_voter(admin, "cms5", since_epoch=epoch)
                address = cluster.members["cms5"].address
                epoch = await add_voter(admin, "cms5", address, since_epoch=epoch)
                await committers.progress(20)
                seen["final_voters"] = await voters(cluster, "cms4", epoch)
                seen["final_roles"] = await roles(cluster, "cms5", epoch)
            await committers.progress(50)
        finally:
            await committers.stop()
        seen["epoch"] = await converge(cluster, members=("cms3", "cms4", "cms5"))
        cluster.stop()  # graceful: flushes every member's lazy writes before the logs are read
        seen["logs"] = {member: read_log(cluster, member) for member in ("cms3", "cms4", "cms5")}
        return seen

    seen = run(cluster, scenario, 240)
    acknowledged = committers.acknowledged
    failures = committers.failures
    logs: dict[str, list[LogEntryRow]] = seen["logs"]  # type: ignore[assignment]
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
    for entry_id, committed in acknowledged.items():
        assert at.get(entry_id) == committed.epoch, (entry_id, committed, at.get(entry_id))
    assert len({c.epoch for c in acknowledged.values()}) == len(acknowledged)
    kinds = [row.kind for row in logs["cms3"]]
    assert kinds.count("add_cms_candidate") == 4
    assert kinds.count("start_add_to_cms") == 6  # one of them cancelled, cms5 added twice
    assert kinds.count("finish_add_to_cms") == 5
    assert kinds.count("remove_from_cms") == 4  # the cancel, the two dead originals, cms5


async def _all_known(cluster: LocalCMS) -> bool:
    return len(await roles(cluster, "cms1")) == len(MEMBERS)
