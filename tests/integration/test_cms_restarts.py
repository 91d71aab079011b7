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
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.status import Operation, Retry, retry_for
from epochal.wire.v1 import cms_pb2

from .lifecycle import (
    NOISE,
    Committers,
    call_each_method,
    first_answer,
    keyspace,
    local_cms,
    log_size,
    logged_since,
    signal_and_time_exit,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GRACE_S = 5.0  # the members' default --shutdown-grace-s
HOLD_START_MS = 5000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCMS]:
    with local_cms(tmp_path / "cms") as started:
        yield started


async def whole_log(cluster: LocalCMS, up_to: int) -> list[cms_pb2.LogEntry]:
    """Every entry up to epoch ``up_to`` at least, read page by page with entries_only (so
    past the snapshots), from a member that holds the whole log once it has applied that far
    (a member that was restarted last may still be catching up)."""
    deadline = time.monotonic() + 30
    async with CMSClient(cluster.addresses) as client:
        index = None
        while index is None:
            for candidate in range(len(cluster.addresses)):
                described = await client.describe(candidate)
                if described.log_complete and described.epoch >= up_to:
                    index = candidate
                    break
            else:
                assert time.monotonic() < deadline, f"no member holds the log up to {up_to}"
                await asyncio.sleep(0.05)
        entries: list[cms_pb2.LogEntry] = []
        while True:
            since = entries[-1].epoch if entries else 0
            page = await client.fetch_log(since, member=index, entries_only=True)
            entries.extend(page.entries)
            if not page.has_more:
                return entries


def test_restarting_members_under_commit_load_loses_no_commit(cluster: LocalCMS) -> None:
    asyncio.run(restarts_under_load(cluster))


async def restarts_under_load(cluster: LocalCMS) -> None:
    await cluster.wait_serving()
    committers = Committers(cluster.addresses)
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
            leader = await cluster.leader()
            victim = leader if role == "leader" else next(m for m in cluster.members if m != leader)
            member = cluster.members[victim]
            if how == "SIGKILL":
                cluster.kill(victim)
            else:
                offset = log_size(member)
                took = await signal_and_time_exit(member, signal.SIGTERM, GRACE_S)
                stopped_in[f"{victim} ({role})"] = took
                noise = [line for line in logged_since(member, offset) if NOISE.search(line)]
                assert not noise, f"{victim} logged at shutdown:\n" + "\n".join(noise)
            await committers.progress(20)  # the others carry on without it
            cluster.start(victim)
            await cluster.wait_serving(victim)
            await committers.progress(50)
    finally:
        await committers.stop()

    assert not committers.failures, committers.failures[:10]
    seen = committers.failed_attempts()
    assert grpc.StatusCode.UNKNOWN not in seen, seen
    for code in seen:
        assert retry_for(Operation.COMMIT, code) is Retry.SAME, (code, seen)
    assert sum(seen.values()) > 0, "the restarts never failed an attempt: they missed the load"

    entries = await whole_log(cluster, max(c.epoch for c in committers.acknowledged.values()))
    assert [e.epoch for e in entries] == list(range(1, len(entries) + 1))
    logged = Counter(e.entry_id for e in entries)
    repeated = [entry_id for entry_id, times in logged.items() if times > 1]
    assert not repeated, repeated[:10]
    epoch_of = {e.entry_id: e.epoch for e in entries}
    for entry_id, committed in committers.acknowledged.items():
        assert epoch_of.get(entry_id) == committed.epoch, (entry_id, committed)
    print(f"{len(committers.acknowledged)} commits; failed attempts {dict(seen)}; {stopped_in}")


def test_a_starting_member_answers_unavailable_with_the_reason(cluster: LocalCMS) -> None:
    asyncio.run(starting_window(cluster))


async def starting_window(cluster: LocalCMS) -> None:
    await cluster.wait_serving()
    async with CMSClient(cluster.addresses) as client:
        for n in range(5):
            await client.commit(keyspace(f"before{n}"))
    cluster.stop("cms2")
    member = cluster.members["cms2"]
    member.start([*cluster.command("cms2"), "--test-hold-start-ms", str(HOLD_START_MS)])
    started = time.monotonic()

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
    async with CMSClient(cluster.addresses, first_member=1) as client:
        committed = await client.commit(keyspace("while_cms2_starts"))
    assert committed.failed_attempts == (grpc.StatusCode.UNAVAILABLE,), committed
    assert time.monotonic() - started < HOLD_START_MS / 1000, "the checks outlasted the hold"

    await cluster.wait_serving("cms2")
    async with CMSClient([member.address]) as client:
        assert (await client.commit(keyspace("after"))).failed_attempts == ()
