"""CMS members restarted under commit load, and a member's starting window.

Proves: SIGKILL-and-start and SIGTERM-and-start of the leader and of a follower, while six
clients commit through CMSClient, cost no commit: every status an attempt failed with is one
the retry table retries with the same entry id — never UNKNOWN — every commit is
acknowledged, and each entry id is in the log exactly once, at the epoch it was acknowledged
with. While a member is starting, every CMS and CMSPeer method answers UNAVAILABLE with the
reason (never UNKNOWN, never a method running against state it has not loaded), and a client
that asks it first commits through another member.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

import grpc
import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.status import Operation, Retry, retry_for
from epochal.wire.log import LogRecord
from epochal.wire.v1 import cms_pb2
from tests.harness import (
    GRACE_S,
    Committers,
    assert_quiet,
    call_each_method,
    first_answer,
    keyspace,
    log_entries,
    signal_and_time_exit,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HOLD_START_MS = 5000


async def whole_log(cms: LocalCMS, up_to: int) -> list[LogRecord]:
    """Every entry up to epoch ``up_to`` at least, past the snapshots, from a member that holds
    the whole log once it has applied that far (a member that was restarted last may still be
    catching up)."""

    async def complete_member() -> str | None:
        for member_id in cms.members:
            described = await cms.describe(member_id)
            if described.log_complete and described.epoch >= up_to:
                return member_id
        return None

    member_id = await until(f"a member with the log up to {up_to}", complete_member, 30, 0.05)
    return await log_entries(cms, member=list(cms.members).index(member_id))


def test_restarting_members_under_commit_load_loses_no_commit(cms: LocalCMS) -> None:
    asyncio.run(restarts_under_load(cms))


async def restarts_under_load(cms: LocalCMS) -> None:
    await cms.wait_serving()
    committers = Committers(cms.addresses)
    committers.start()
    stopped_in: dict[str, float] = {}
    try:
        await committers.progress(50)
        for how, role in (
            ("SIGKILL", "leader"),
            ("SIGTERM", "leader"),
            ("SIGKILL", "follower"),
            ("SIGTERM", "follower"),
        ):
            leader = await cms.leader()
            victim = leader if role == "leader" else next(m for m in cms.members if m != leader)
            member = cms.members[victim]
            if how == "SIGKILL":
                cms.kill(victim)
            else:
                exited = await signal_and_time_exit(member, signal.SIGTERM, GRACE_S)
                stopped_in[f"{victim} ({role})"] = exited.seconds
                assert_quiet(exited.logged, victim)
            await committers.progress(20)  # the others carry on without it
            cms.start(victim)
            await cms.wait_serving(victim)
            await committers.progress(50)
    finally:
        await committers.stop()

    assert not committers.failures, committers.failures[:10]
    seen = committers.failed_attempts()
    assert grpc.StatusCode.UNKNOWN not in seen, seen
    for code in seen:
        assert retry_for(Operation.COMMIT, code) is Retry.SAME, (code, seen)
    assert sum(seen.values()) > 0, "the restarts never failed an attempt: they missed the load"

    entries = await whole_log(cms, max(c.epoch for c in committers.acknowledged.values()))
    assert [e.epoch for e in entries] == list(range(1, len(entries) + 1))
    logged = Counter(e.entry_id for e in entries)
    repeated = [entry_id for entry_id, times in logged.items() if times > 1]
    assert not repeated, repeated[:10]
    epoch_of = {e.entry_id: e.epoch for e in entries}
    for entry_id, committed in committers.acknowledged.items():
        assert epoch_of.get(entry_id) == committed.epoch, (entry_id, committed)
    print(f"{len(committers.acknowledged)} commits; failed attempts {dict(seen)}; {stopped_in}")


def test_a_starting_member_answers_unavailable_with_the_reason(cms: LocalCMS) -> None:
    asyncio.run(starting_window(cms))


async def starting_window(cms: LocalCMS) -> None:
    await cms.wait_serving()
    async with CMSClient(cms.addresses) as client:
        for n in range(5):
            await client.commit(keyspace(f"before{n}"))
    cms.stop("cms2")
    member = cms.members["cms2"]
    member.start([*cms.command("cms2"), "--test-hold-start-ms", str(HOLD_START_MS)])

    refused = await first_answer(member.address, "/epochal.v1.CMS/Describe")
    assert refused is not None, "cms2 answered Describe before it loaded its state"
    reason = "cms2 is starting: loading its state; try another member"
    assert (refused.code(), refused.details()) == (grpc.StatusCode.UNAVAILABLE, reason)
    for name in ("CMS", "CMSPeer"):
        service = cms_pb2.DESCRIPTOR.services_by_name[name]
        for method, error in (await call_each_method(member.address, service)).items():
            assert error is not None, f"{name}.{method} answered while cms2 was starting"
            assert (error.code(), error.details()) == (grpc.StatusCode.UNAVAILABLE, reason), (
                method,
                error,
            )
    # A client that asks the starting member first commits through the next one.
    async with CMSClient(cms.addresses, first_member=1) as client:
        committed = await client.commit(keyspace("while_cms2_starts"))
    assert committed.failed_attempts == (grpc.StatusCode.UNAVAILABLE,), committed
    # All of the above ran while cms2 was starting: it still is.
    still = await first_answer(member.address, "/epochal.v1.CMS/Describe")
    assert still is not None and still.details() == reason, "the checks outlasted the hold"

    await cms.wait_serving("cms2")
    async with CMSClient([member.address]) as client:
        assert (await client.commit(keyspace("after"))).failed_attempts == ()
