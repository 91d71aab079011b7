"""A CMS member that meets a log it cannot read — a chosen slot holding a transformation of a
newer version, or its own stored log damaged — neither skips it nor crash-loops on it: it stays
up at the epoch it reached, says why (a CRITICAL line, NOT_SERVING, commits answered
UNAVAILABLE with the reason), and serves what it has (DESIGN.md principle 7 and "a node that
meets an unknown kind stops applying and says so")."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import delete

from epochal.cms import tables
from epochal.cms_client import CMSClient
from epochal.cmscore.state_machine import ProposalItem, digest_of
from epochal.devcluster.cms import LocalCMS
from epochal.errors import Unavailable
from epochal.wire.channels import channel as open_channel
from epochal.wire.proposal import encode_item
from tests.harness import (
    commit_then_stop,
    converge,
    keyspace,
    local_cms,
    plant_accepted_slot,
    run,
    storage_of,
    until,
    until_logged,
)

pytestmark = pytest.mark.integration

# A Transformation message whose only field is one this version does not know (field 99): what
# a member of a newer version could propose.
UNKNOWN_KIND = b"\x9a\x06\x02\x08\x01"
CANNOT_APPLY = re.compile(r"CRITICAL .*cannot apply (slot \d+|its stored log)")


async def not_serving(cms: LocalCMS, member_id: str) -> bool:
    """Whether the member answers its health check, with NOT_SERVING."""
    async with open_channel(cms.members[member_id].address) as channel:
        try:
            answer = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1.0
            )
        except grpc.aio.AioRpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.NOT_SERVING


def test_a_chosen_slot_of_an_unknown_kind_stops_the_members_without_a_crash(
    tmp_path: Path,
) -> None:
    with local_cms(tmp_path / "cms") as cms:
        epoch = run(cms, lambda: commit_then_stop(cms, {"known": keyspace("known")}), 60)
        newer = ProposalItem(None, UNKNOWN_KIND, "newer", digest_of(UNKNOWN_KIND))  # type: ignore[arg-type]
        plant_accepted_slot(cms, (encode_item(newer),))

        async def restarted() -> None:
            cms.start()
            # The members that learn the slot is chosen stop there (those two are a quorum:
            # the third cannot learn it, nor commit anything without them).
            stopped = []
            for member_id, member in cms.members.items():
                with contextlib.suppress(TimeoutError):
                    await until_logged(CANNOT_APPLY, [member], timeout_s=10)
                    stopped.append(member_id)
            assert len(stopped) >= 2, stopped
            assert all(member.running for member in cms.members.values()), "a member exited"
            for member_id in stopped:
                await until(f"{member_id} NOT_SERVING", lambda m=member_id: not_serving(cms, m))
                described = await cms.describe(member_id)
                assert described.epoch == epoch and not described.ready
                async with CMSClient([cms.members[member_id].address], total_timeout_s=2) as one:
                    with pytest.raises(Unavailable, match="cannot apply slot"):
                        await one.commit(keyspace("refused"), entry_id="refused")
            assert all(member.running for member in cms.members.values()), "a member exited"

        run(cms, restarted, 90)


def test_a_member_whose_stored_log_is_damaged_stays_up_and_says_so(tmp_path: Path) -> None:
    """An entry missing in the middle of one member's stored log: it stays up, NOT_SERVING,
    with the epoch it could replay to; the two others go on committing."""
    with local_cms(tmp_path / "cms", extra_args=("--snapshot-frequency", "1000")) as cms:
        commits = {f"k{index}": keyspace(f"k{index}") for index in range(5)}
        epoch = run(cms, lambda: commit_then_stop(cms, commits), 60)
        storage = storage_of(cms, "cms3")
        try:
            with storage.engine.begin() as conn:
                conn.execute(delete(tables.log_entries).where(tables.log_entries.c.epoch == 3))
        finally:
            storage.close()

        async def restarted() -> None:
            cms.start()
            await until_logged(CANNOT_APPLY, [cms.members["cms3"]], timeout_s=30)
            await cms.wait_serving("cms1")
            await cms.wait_serving("cms2")
            assert cms.members["cms3"].running
            assert await not_serving(cms, "cms3")
            assert (await cms.describe("cms3")).epoch == 2
            async with CMSClient([cms.members["cms1"].address]) as client:
                committed = await client.commit(keyspace("after"), entry_id="after")
            assert committed.epoch == epoch + 1
            await converge(cms, members=("cms1", "cms2"))

        run(cms, restarted, 90)
