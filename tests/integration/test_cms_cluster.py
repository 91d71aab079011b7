"""A real 3-member CMS on 127.0.0.1, on SQLite and on PostgreSQL.

Proves: commits survive SIGKILLs of the leader exactly once, with gap-free identical epochs on
every member; a member stopped for 500 epochs catches up from a snapshot; bad input is refused
with a clear status while the log stays unchanged.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from epochal.cms_client import CMSClient, Committed
from epochal.devcluster.cms import LocalCMS
from epochal.errors import InvalidRequest, Rejected
from epochal.tcm import (
    Column,
    ColumnType,
    CreateTable,
    DropTable,
)
from epochal.telemetry import attributes as attr
from epochal.wire.channels import channel as open_channel
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc, metadata_pb2
from tests.harness import converge, keyspace, local_cms, read_log, until

pytestmark = pytest.mark.integration

CLIENTS = 8
COMMITS = 2000


@pytest.fixture(params=["sqlite", "postgres"])
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCMS]:
    db_urls: dict[str, str] = {}
    schemas: dict[str, str] = {}
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        make_schema = request.getfixturevalue("pg_schema")
        for index in range(1, 4):
            db_urls[f"cms{index}"] = url
            schemas[f"cms{index}"] = make_schema()
    with local_cms(tmp_path / "cms", db_urls=db_urls, db_schemas=schemas) as started:
        yield started


def create_table(keyspace: str, name: str) -> CreateTable:
    return CreateTable(
        keyspace=keyspace,
        name=name,
        columns=(Column("id", ColumnType.TEXT), Column("value", ColumnType.BLOB)),
        partition_key=("id",),
        clustering_key=(),
    )


@dataclass
class Acknowledged:
    entry_id: str
    committed: Committed


@dataclass(frozen=True)
class Orphan:
    """A commit the leader made after its client had given up waiting for the answer."""

    request: cms_pb2.CommitRequest
    epoch: int


async def commit_without_the_answer(address: str, name: str) -> Orphan:
    """Commit at the leader with a deadline too short to see the answer, until one such commit
    is in the leader's log anyway (a commit cancelled before it was proposed is dropped, which
    is also at-most-once, so it tries again with a longer deadline)."""
    async with open_channel(address) as channel:
        stub = cms_pb2_grpc.CMSStub(channel)
        deadline_s = 0.001
        for attempt in range(60):
            since = (await stub.Describe(cms_pb2.DescribeRequest(), timeout=5)).epoch
            request = cms_pb2.CommitRequest(
                transformation=transformation_to_proto(
                    create_table("orphans", f"{name}_{attempt}")
                ),
                entry_id=f"orphan-{name}-{attempt}",
            )
            try:
                await stub.Commit(request, timeout=deadline_s)
                deadline_s /= 2  # answered in time: an ordinary commit; aim shorter
                continue
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error
            epoch = await logged_epoch(stub, since, request.entry_id)
            if epoch is not None:
                return Orphan(request, epoch)
            deadline_s *= 1.5
    raise AssertionError("no commit outlived its client's deadline in 60 attempts")


async def logged_epoch(stub: cms_pb2_grpc.CMSStub, since: int, entry_id: str) -> int | None:
    """The epoch of ``entry_id`` in the member's log after ``since``, waiting up to 1 s."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        page = await stub.FetchLog(cms_pb2.FetchLogRequest(since_epoch=since), timeout=5)
        for entry in page.entries:
            if entry.entry_id == entry_id:
                return entry.epoch
        await asyncio.sleep(0.02)
    return None


async def load(cluster: LocalCMS, total: int, kills: int) -> dict[str, object]:
    """8 clients spread over the members commit at least `total` transformations; the leader
    is SIGKILLed `kills` times while commits are in flight, and restarted. Clients keep going
    past their share until the last kill is done, so every kill lands mid-load. Before each
    kill the leader also commits one transformation whose client stopped waiting; after the
    kill that client retries it through the other members, which must answer the first epoch."""
    acknowledged: list[Acknowledged] = []
    in_flight = 0
    per_client = total // CLIENTS
    kill_at = [int(total * (k + 1) / (kills + 1)) for k in range(kills)]
    kills_left = kills
    kills_with_commits_in_flight = 0
    ballots: list[int] = []
    orphans: list[tuple[Orphan, Committed]] = []
    pauses = random.Random(20261122)

    async with CMSClient(cluster.addresses) as setup:
        await setup.commit(keyspace("orphans"))
        for client_index in range(CLIENTS):
            await setup.commit(keyspace(f"load_{client_index}"))
        ballots.append((await setup.describe()).ballot.round)

    async def client(index: int) -> None:
        nonlocal in_flight
        async with CMSClient(
            cluster.addresses, first_member=index, attempt_timeout_s=3.0, total_timeout_s=60.0
        ) as sdk:
            live: str | None = None
            step = 0
            while step < per_client or kills_left > 0:
                name = f"t{step % 10}"
                transformation = (
                    create_table(f"load_{index}", name)
                    if live is None
                    else DropTable(keyspace=f"load_{index}", name=live)
                )
                entry_id = f"client{index}-{step}"
                in_flight += 1
                try:
                    committed = await sdk.commit(transformation, entry_id=entry_id)
                finally:
                    in_flight -= 1
                acknowledged.append(Acknowledged(entry_id, committed))
                live = name if live is None else None
                step += 1

    async def acknowledged_reach(count: int) -> None:
        await until(f"{count} commits acknowledged", lambda: len(acknowledged) >= count, 300)

    async def killer() -> None:
        nonlocal kills_with_commits_in_flight, kills_left
        for target in kill_at:
            await acknowledged_reach(target)
            leader = await cluster.leader()
            orphan = await commit_without_the_answer(
                cluster.members[leader].address, f"kill{kills - kills_left}"
            )
            if in_flight > 0:
                kills_with_commits_in_flight += 1
            cluster.kill(leader)
            others = [m.address for m in cluster.members.values() if m.member_id != leader]
            async with CMSClient(others, total_timeout_s=30.0) as retry:
                orphans.append((orphan, await retry.commit_request(orphan.request)))
            await asyncio.sleep(pauses.uniform(0.5, 1.0))
            cluster.start(leader)
            await cluster.wait_serving(leader)
            kills_left -= 1

    await asyncio.gather(killer(), *(client(i) for i in range(CLIENTS)))
    async with CMSClient(cluster.addresses) as sdk:
        ballots.append((await sdk.describe()).ballot.round)
    return {
        "acknowledged": acknowledged,
        "kills_with_commits_in_flight": kills_with_commits_in_flight,
        "ballots": ballots,
        "orphans": orphans,
    }


def test_commits_survive_leader_kills_exactly_once(cluster: LocalCMS) -> None:
    async def scenario() -> dict[str, object]:
        await cluster.wait_serving()
        result = await load(cluster, COMMITS, kills=2)
        result["epoch"] = await converge(cluster)
        return result

    result = asyncio.run(scenario())
    cluster.stop()  # graceful: flushes every member's lazy writes
    acknowledged: list[Acknowledged] = result["acknowledged"]  # type: ignore[assignment]
    assert len(acknowledged) >= COMMITS

    logs = {m: read_log(cluster, m) for m in cluster.members}
    reference = logs["cms1"]
    assert [r.epoch for r in reference] == list(range(1, len(reference) + 1)), "epochs have gaps"
    for member, rows in logs.items():
        assert [(r.epoch, r.entry_id, r.transformation) for r in rows] == [
            (r.epoch, r.entry_id, r.transformation) for r in reference
        ], f"{member}'s log differs from cms1's"
    assert reference[-1].epoch == result["epoch"]

    epoch_of = {r.entry_id: r.epoch for r in reference}
    occurrences = Counter(r.entry_id for r in reference)
    acknowledged_epochs: Counter[int] = Counter()
    for ack in acknowledged:
        assert occurrences[ack.entry_id] == 1, (
            f"{ack.entry_id} is in the log {occurrences[ack.entry_id]} times"
        )
        assert epoch_of[ack.entry_id] == ack.committed.epoch, (
            f"{ack.entry_id} acknowledged at epoch {ack.committed.epoch}, "
            f"logged at {epoch_of[ack.entry_id]}"
        )
        acknowledged_epochs[ack.committed.epoch] += 1
    assert max(acknowledged_epochs.values()) == 1, "an epoch was acknowledged to two commits"

    # A commit whose client gave up before a leader was killed is answered, when retried
    # through the other members, from its first attempt: the epoch it was in the log at before
    # the retry was sent, and it is in the log once. (``duplicate`` is true when the member
    # that took the retry had applied the first attempt already, false when it learned the
    # outcome while the retry waited; either way there is one commit.)
    orphans: list[tuple[Orphan, Committed]] = result["orphans"]  # type: ignore[assignment]
    assert len(orphans) == 2
    for orphan, retried in orphans:
        assert retried.epoch == orphan.epoch, (orphan.request.entry_id, orphan.epoch, retried)
        assert occurrences[orphan.request.entry_id] == 1
        assert epoch_of[orphan.request.entry_id] == orphan.epoch

    # The test bit: kills landed mid-flight, retries were answered from their first attempt,
    # and leadership really changed.
    assert result["kills_with_commits_in_flight"] == 2
    duplicates = [a for a in acknowledged if a.committed.duplicate]
    print(
        f"\n{len(duplicates)} load retries and {len(orphans)} orphan retries answered from "
        f"their first attempt; ballots {result['ballots']}"
    )
    first_ballot, last_ballot = result["ballots"]  # type: ignore[misc]
    assert last_ballot > first_ballot


def test_member_stopped_for_500_epochs_catches_up_from_a_snapshot(cluster: LocalCMS) -> None:
    async def scenario() -> None:
        await cluster.wait_serving()
        leader = await cluster.leader()
        lagging = next(m for m in cluster.members if m != leader)
        async with CMSClient(cluster.addresses) as sdk:
            await sdk.commit(keyspace("lag"))
            cluster.stop(lagging)
            start = (await sdk.describe(member=list(cluster.members).index(leader))).epoch
            for step in range(250):
                await sdk.commit(create_table("lag", f"t{step}"))
                await sdk.commit(DropTable(keyspace="lag", name=f"t{step}"))
            end = (await sdk.describe(member=list(cluster.members).index(leader))).epoch
            assert end - start >= 500
        cluster.start(lagging)
        await cluster.wait_serving(lagging)
        described = await cluster.describe(lagging)
        assert described.epoch >= end
        assert described.snapshots_installed >= 1, "the lagging member did not receive a snapshot"
        assert await converge(cluster) >= end

    asyncio.run(scenario())


async def raw_commit(address: str, payload: bytes) -> grpc.aio.AioRpcError | bytes:
    async with open_channel(address) as channel:
        call = channel.unary_unary("/epochal.v1.CMS/Commit")
        try:
            return await call(payload, timeout=10)
        except grpc.aio.AioRpcError as error:
            return error


def test_bad_input_is_refused_clearly_and_changes_nothing(cluster: LocalCMS) -> None:
    async def scenario() -> None:
        await cluster.wait_serving()
        address = cluster.addresses[1]
        async with CMSClient(cluster.addresses) as sdk:
            await sdk.commit(keyspace("bad"), entry_id="bad-keyspace")
            before = await converge(cluster)

            cases = {
                "unknown kind": cms_pb2.CommitRequest(
                    transformation=metadata_pb2.Transformation(), entry_id="e1"
                ).SerializeToString(),
                "missing fields": cms_pb2.CommitRequest(
                    transformation=transformation_to_proto(create_table("bad", "ok")).__class__(
                        create_table=metadata_pb2.CreateTable()
                    ),
                    entry_id="e2",
                ).SerializeToString(),
                "no entry id": cms_pb2.CommitRequest(
                    transformation=transformation_to_proto(create_table("bad", "x"))
                ).SerializeToString(),
                "garbage bytes": b"\xff\xfe\x00garbage\x12\x99",
            }
            for label, payload in cases.items():
                outcome = await raw_commit(address, payload)
                assert isinstance(outcome, grpc.aio.AioRpcError), f"{label}: accepted"
                assert outcome.code() == grpc.StatusCode.INVALID_ARGUMENT, (label, outcome)
                assert len(outcome.details()) > 15, (label, outcome.details())

            huge = CreateTable(
                keyspace="bad",
                name="huge",
                columns=(Column("id", ColumnType.TEXT),),
                partition_key=("id",),
                options=(("comment", "x" * 2_000_000),),
            )
            with pytest.raises(InvalidRequest, match="limit"):
                await sdk.commit(huge)

            await sdk.commit(create_table("bad", "t"), entry_id="reused")
            with pytest.raises(Rejected) as reused:
                await sdk.commit(create_table("bad", "other"), entry_id="reused")
            assert reused.value.rule == "entry_id_reused"
            assert "different transformation" in reused.value.message

            with pytest.raises(Rejected) as missing:
                await sdk.commit(create_table("no_such_keyspace", "t"))
            assert missing.value.rule == "keyspace_not_found"

            # Only the valid create_table("bad", "t") took an epoch; every member still serves.
            assert await converge(cluster) == before + 1

    asyncio.run(scenario())


def test_watch_fetch_log_and_spans(tmp_path: Path) -> None:
    """Watch pushes the backlog then live entries; FetchLog answers snapshot + tail to a far
    caller; spans for commits and Paxos rounds are written as OTLP-JSON lines."""
    trace_dir = tmp_path / "spans"
    local = LocalCMS(
        tmp_path / "cms",
        extra_args=("--snapshot-frequency", "20"),
        env={"EPOCHAL_TRACE_DIR": str(trace_dir)},
    )

    async def scenario() -> None:
        await local.wait_serving()
        async with CMSClient(local.addresses) as sdk:
            await sdk.commit(keyspace("watched"))
            seen: list[int] = []

            async def watch() -> None:
                async for event in sdk.watch(since_epoch=0, member=1):
                    seen.extend(e.epoch for e in event.records)
                    if seen and seen[-1] >= 12:
                        return

            watcher = asyncio.create_task(watch())
            for step in range(5):
                await sdk.commit(create_table("watched", f"t{step}"))
                await sdk.commit(DropTable(keyspace="watched", name=f"t{step}"))
            await asyncio.wait_for(watcher, 30)
            assert seen == list(range(1, seen[-1] + 1)), "watch skipped or repeated an epoch"

            for step in range(15):
                await sdk.commit(create_table("watched", f"u{step}"))
            latest = await converge(local)
            far = await sdk.fetch_log(since_epoch=0)
            assert far.snapshot is not None, "a caller 20+ epochs behind should get a snapshot"
            snapshot_epoch = far.snapshot.epoch
            assert 0 < snapshot_epoch <= latest
            assert [e.epoch for e in far.records] == list(range(snapshot_epoch + 1, latest + 1))
            near = await sdk.fetch_log(since_epoch=latest - 3)
            assert near.snapshot is None
            assert [e.epoch for e in near.records] == [latest - 2, latest - 1, latest]
            described = await sdk.describe()
            assert snapshot_epoch in described.snapshot_epochs

    try:
        local.start()
        asyncio.run(scenario())
    finally:
        local.stop()
        local.close()
    spans = []
    for path in trace_dir.glob("cms-*.jsonl"):
        for line in path.read_text().splitlines():
            for resource in json.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    spans.extend(scope["spans"])
    names = {s["name"] for s in spans}
    assert {attr.CMS_COMMIT, attr.PAXOS_ROUND} <= names
    commit = next(
        s for s in spans if s["name"] == attr.CMS_COMMIT and attr.BATCH_SIZE in _attributes(s)
    )
    assert {attr.EPOCH, attr.BATCH_SIZE, attr.BALLOT, attr.OUTCOME} <= set(_attributes(commit))
    paxos_round = next(s for s in spans if s["name"] == attr.PAXOS_ROUND)
    assert attr.BATCH_SIZE in _attributes(paxos_round)


def _attributes(span: dict) -> dict[str, object]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}
