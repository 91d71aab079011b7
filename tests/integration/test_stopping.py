"""Stopping a server is bounded and clean, under load.

Proves: SIGTERM — or SIGINT, which a server treats alike — to a CMS member (the leader, or a
follower) while six clients commit, or to a replica while eight clients write and read at
QUORUM, and the process is gone within its grace period (--shutdown-grace-s, 5 s), having
logged exactly one line about it and no traceback, error or shutdown noise ("stream to member
cmsN broke: InvalidStateError", "CancelledError not handled"); and the clients lose nothing:
every commit, write and read succeeds (they retry elsewhere). A member signalled while it is
still starting stops as cleanly.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import grpc
import pytest

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.cms import LocalCMS
from epochal.errors import EpochalError
from tests.harness import (
    GRACE_S,
    Committers,
    assert_quiet,
    first_answer,
    signal_and_time_exit,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLIENTS = 8


def assert_stopped_cleanly(lines: list[str], name: str) -> None:
    """What the server logged from the signal on: one line saying it is shutting down."""
    assert_quiet(lines, name)
    assert len(lines) == 1 and "shutting down on SIG" in lines[0], "\n".join(lines)


@pytest.mark.parametrize(
    ("role", "signum"), [("leader", signal.SIGTERM), ("follower", signal.SIGINT)]
)
def test_a_cms_member_stops_within_its_grace_under_commit_load(
    cms: LocalCMS, role: str, signum: signal.Signals
) -> None:
    async def scenario() -> None:
        await cms.wait_serving()
        committers = Committers(cms.addresses)
        committers.start()
        try:
            await committers.progress(100)
            leader = await cms.leader()
            victim = leader if role == "leader" else next(m for m in cms.members if m != leader)
            member = cms.members[victim]
            exited = await signal_and_time_exit(member, signum, GRACE_S)
            await committers.progress(100)  # the others carry on
        finally:
            await committers.stop()
        assert member.process is not None and member.process.returncode == 0
        assert_stopped_cleanly(exited.logged, victim)
        assert not committers.failures, committers.failures[:10]
        assert grpc.StatusCode.UNKNOWN not in committers.failed_attempts()
        print(f"{victim} ({role}) stopped in {exited.seconds:.2f} s")

    asyncio.run(scenario())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_replica_stops_within_its_grace_under_write_and_read_load(
    tmp_path: Path, signum: signal.Signals
) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        cluster.start()
        asyncio.run(replica_under_load(cluster, signum))
    finally:
        cluster.close()


async def replica_under_load(cluster: LocalCluster, signum: signal.Signals) -> None:
    await cluster.wait_ready()
    await cluster.wait_joined()
    done = 0
    failures: list[str] = []
    stop = asyncio.Event()
    async with AsyncClient(cluster.addresses, consistency=Consistency.QUORUM) as client:
        await client.create_keyspace("ks", replication_factor=3, tracked=True)
        await client.create_table("ks", "kv", {"k": "text", "v": "int"}, partition_key=["k"])

        async def worker(index: int) -> None:
            nonlocal done
            step = 0
            while not stop.is_set():
                key = {"k": f"{index}-{step % 20}"}
                try:
                    await client.write("ks", "kv", {**key, "v": step})
                    rows = (await client.read("ks", "kv", key)).rows
                    assert rows == [{**key, "v": step}], rows
                    done += 1
                except EpochalError as error:
                    failures.append(f"{key}: {error!r}")
                step += 1

        workers = [asyncio.create_task(worker(i)) for i in range(CLIENTS)]
        try:
            await until("operations under way", lambda: done >= 200 or bool(failures))
            assert not failures, f"before the stop: {failures[:10]}"
            victim = cluster.nodes["replica2"]
            exited = await signal_and_time_exit(victim, signum, GRACE_S)
            carried_on = done + 200
            await until("operations after the stop", lambda: done >= carried_on)
        finally:
            stop.set()
            await asyncio.gather(*workers)
    assert victim.process is not None and victim.process.returncode == 0
    assert_stopped_cleanly(exited.logged, "replica2")
    assert not failures, failures[:10]
    print(f"replica2 stopped on {signum.name} in {exited.seconds:.2f} s; {done} writes and reads")


def test_a_member_signalled_while_it_starts_stops_within_its_grace(tmp_path: Path) -> None:
    starting = LocalCMS(tmp_path / "cms", size=1, extra_args=("--test-hold-start-ms", "30000"))

    async def scenario() -> None:
        member = starting.members["cms1"]
        refused = await first_answer(member.address, "/epochal.v1.CMS/Describe")
        assert refused is not None and "is starting" in refused.details(), refused
        exited = await signal_and_time_exit(member, signal.SIGTERM, GRACE_S)
        assert member.process is not None and member.process.returncode == 0
        assert_stopped_cleanly(exited.logged, "cms1")

    try:
        starting.start()
        asyncio.run(scenario())
    finally:
        starting.close()
