"""Replica-driven bootstrap as real processes on 127.0.0.1: 3 CMS members, 3 replicas, and a
4th that joins by driving its own sequence (barriers, streaming).

Proves: while a client writes at QUORUM into a tracked and an untracked RF 3 keyspace, a node
joins; afterwards every acknowledged write is read back at QUORUM through every quorum of its
final replica group (the other nodes stopped), and the log shows the join's four steps. A
joining node killed mid-stream resumes with ``bootstrap resume`` and stores every mutation once;
``bootstrap abort`` undoes the steps one epoch each, releases the lock (a second join is
rejected naming the first while it holds it) and deletes what was streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from epochal.client import Client, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.tcm import AdvanceSequence, CancelSequence, ClusterMetadata, PrepareJoin
from epochal.tcm.keys import partition_columns, partition_token
from epochal.wire.metadata import transformation_from_proto

pytestmark = pytest.mark.integration

EVENTS = {"id": "text", "seq": "int", "payload": "text"}
KEYSPACES = ("tks", "uks")  # tracked, untracked


def run(cluster: LocalCluster, scenario: Callable[[], Awaitable[None]], timeout_s: float) -> None:
    try:
        asyncio.run(asyncio.wait_for(scenario(), timeout_s))
    finally:
        cluster.close()


@contextlib.asynccontextmanager
async def ring_with_data(cluster: LocalCluster, partitions: int) -> AsyncIterator[Client]:
    """Start the 3 first replicas as a ring, create both keyspaces, write ``partitions``
    partitions of 3 rows into each; then start the 4th replica (registered, not joined)."""
    joining = cluster.add_replica()
    cluster.cms.start()
    for name in list(cluster.nodes)[:3]:
        cluster.start_replica(name)
    await cluster.wait_ready(list(cluster.nodes)[:3])
    founders = {n: r for n, r in cluster.nodes.items() if n != joining.name}
    saved, cluster.nodes = cluster.nodes, founders
    await cluster.form_ring(num_tokens=4)
    cluster.nodes = saved
    async with Client([r.address for r in founders.values()]) as client:
        for keyspace in KEYSPACES:
            await client.create_keyspace(keyspace, replication_factor=3, tracked=keyspace == "tks")
            await client.create_table(
                keyspace, "events", EVENTS, partition_key=["id"], clustering_key=["seq"]
            )
            for p in range(partitions):
                rows = [{"id": f"p{p}", "seq": s, "payload": f"v{p}.{s}" * 8} for s in range(3)]
                await client.write_rows(keyspace, "events", rows, consistency=Consistency.ALL)
        cluster.start_replica(joining.name)
        await cluster.wait_ready([joining.name])
        yield client


def read_group(
    metadata: ClusterMetadata, client: Client, keyspace: str, key: str
) -> frozenset[str]:
    token = partition_token(partition_columns(client.table(keyspace, "events")), (key,))
    placement = metadata.placements[metadata.keyspaces[keyspace].replication]
    return placement.reads[placement.index_of(token)]


async def join_steps(cluster: LocalCluster, node_id: str) -> list[str]:
    """The topology transformations of ``node_id`` in the CMS log, in order."""
    steps = []
    entries = []
    async with CMSClient(cluster.cms.addresses) as cms:
        page = await cms.fetch_log(0)
        entries.extend(page.entries)
        while page.has_more:
            page = await cms.fetch_log(entries[-1].epoch)
            entries.extend(page.entries)
    for entry in entries:
        transformation = transformation_from_proto(entry.transformation)
        if getattr(transformation, "node_id", None) != node_id:
            continue
        if isinstance(transformation, PrepareJoin):
            steps.append("prepare")
        elif isinstance(transformation, AdvanceSequence):
            steps.append(transformation.step.value)
        elif isinstance(transformation, CancelSequence):
            steps.append("cancel")
    return steps


async def latest(cluster: LocalCluster, client: Client) -> ClusterMetadata:
    """The client's metadata, brought to the CMS's current epoch."""
    async with CMSClient(cluster.cms.addresses) as cms:
        epoch = (await cms.describe()).epoch
    await client.refresh(epoch)
    return client.metadata


# --------------------------------------------------------------------------- join under writes


def test_a_node_joins_under_quorum_writes_and_every_quorum_of_the_new_groups_has_every_write(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path, replicas=3)

    async def scenario() -> None:
        async with ring_with_data(cluster, partitions=60) as client:
            acked: dict[tuple[str, str], int] = {
                (k, f"p{p}"): 2 for k in KEYSPACES for p in range(60)
            }
            stop = asyncio.Event()

            async def writer(keyspace: str) -> None:
                for n in itertools.count():
                    if stop.is_set():
                        return
                    key = f"w{n}"
                    try:
                        await client.write(
                            keyspace,
                            "events",
                            {"id": key, "seq": 0, "payload": f"written {n}"},
                            consistency=Consistency.QUORUM,
                        )
                    except EpochalError:
                        continue  # not acknowledged: not promised
                    acked[(keyspace, key)] = 0

            writers = [asyncio.ensure_future(writer(k)) for k in KEYSPACES]
            await asyncio.sleep(0.5)
            status = await cluster.bootstrap("replica4", num_tokens=4)
            assert status.state == "finished", status
            await asyncio.sleep(0.5)  # writes under the final placements too
            stop.set()
            await asyncio.gather(*writers)
            joined = cluster.nodes["replica4"].node_id
            assert await join_steps(cluster, joined) == ["prepare", "start", "mid", "finish"]
            assert await cluster.metric("replica4", "streamed_in_cells_total") > 0
            assert await cluster.metric("replica4", "streamed_in_mutations_total") > 0
            passed = 'progress_barriers_total{level="EACH_QUORUM",verdict="passed"}'
            assert await cluster.metric("replica4", passed) >= 3
            metadata = await latest(cluster, client)
            assert metadata.nodes[joined].state.value == "joined"
            written_during = sum(1 for (_, key) in acked if key.startswith("w"))
            assert written_during > 20, written_during

            # What was written (at ALL) before the join reached the new node by streaming
            # alone: it answers a ONE read of every such partition it now replicates from its
            # own storage.
            address = cluster.nodes["replica4"].address
            streamed = 0
            for keyspace, key in sorted(acked):
                if key.startswith("p") and joined in read_group(metadata, client, keyspace, key):
                    result = await client.read(
                        keyspace,
                        "events",
                        {"id": key},
                        consistency=Consistency.ONE,
                        coordinator=address,
                    )
                    assert [row["seq"] for row in result.rows] == [0, 1, 2], (keyspace, key)
                    streamed += 1
            assert streamed > 0

            # Every acknowledged write, through every quorum (2 of 3) of its final read
            # group: the two other replicas are stopped while a pair is read.
            names = {r.node_id: n for n, r in cluster.nodes.items()}
            for pair in itertools.combinations(sorted(names), 2):
                others = [names[n] for n in names if n not in pair]
                for name in others:
                    cluster.stop_replica(name)
                coordinator = cluster.nodes[names[pair[0]]].address
                checked = 0
                for (keyspace, key), last_seq in sorted(acked.items()):
                    if not set(pair) <= read_group(metadata, client, keyspace, key):
                        continue
                    result = await client.read(
                        keyspace,
                        "events",
                        {"id": key},
                        consistency=Consistency.QUORUM,
                        coordinator=coordinator,
                    )
                    seqs = [row["seq"] for row in result.rows]
                    assert last_seq in seqs, (keyspace, key, pair, seqs)
                    checked += 1
                assert checked > 0, pair
                for name in others:
                    cluster.start_replica(name)
                await cluster.wait_ready(others)

    run(cluster, scenario, timeout_s=420)


# --------------------------------------------------------------------------- resume and abort


def stored_mutations(cluster: LocalCluster, name: str) -> int:
    path = cluster.data_dir / name / "replica.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute("SELECT count(*) FROM mutations").fetchone()[0]


async def streaming_started(cluster: LocalCluster, name: str) -> int:
    """Until the node has stored some streamed cells; returns how many."""
    for _ in range(3000):
        status = await cluster.operation(name, "Status")
        if status.streamed_cells > 0:
            return status.streamed_cells
        await asyncio.sleep(0.01)
    raise AssertionError("streaming did not start")


def test_a_join_killed_mid_stream_resumes_without_duplicating_a_mutation(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path, replicas=3, replica_args=("--stream-message-bytes", "4096"), test_hooks=True
    )

    async def scenario() -> None:
        async with ring_with_data(cluster, partitions=150):
            await cluster.set_hooks("replica4", stream_delay_ms=100)
            joining = asyncio.ensure_future(cluster.bootstrap("replica4", num_tokens=4))
            at_kill = await streaming_started(cluster, "replica4")
            cluster.kill_replica("replica4")
            with pytest.raises(grpc.aio.AioRpcError):
                await joining
            cluster.start_replica("replica4")
            await cluster.wait_ready(["replica4"])
            status = await cluster.operation("replica4", "Status")
            assert status.state == "interrupted" and status.step == "start", status
            status = await cluster.operation("replica4", "BootstrapResume")
            assert status.state == "finished", status
            assert 0 < at_kill < status.streamed_cells, (at_kill, status.streamed_cells)
            # Each mutation was stored once: the streams' own counts (kept with the data they
            # stored) add up to exactly what the node holds — nothing was streamed twice.
            assert status.streamed_mutations > 0
            assert stored_mutations(cluster, "replica4") == status.streamed_mutations
            joined = cluster.nodes["replica4"].node_id
            assert await join_steps(cluster, joined) == ["prepare", "start", "mid", "finish"]

    run(cluster, scenario, timeout_s=300)


def test_bootstrap_abort_undoes_each_step_releases_the_lock_and_drops_streamed_data(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(
        tmp_path, replicas=3, replica_args=("--stream-message-bytes", "4096"), test_hooks=True
    )

    async def scenario() -> None:
        async with ring_with_data(cluster, partitions=100) as client:
            before = client.metadata.placements
            fifth = cluster.add_replica()
            cluster.start_replica(fifth.name)
            await cluster.wait_ready([fifth.name])
            await cluster.set_hooks("replica4", stream_delay_ms=100)
            joining = asyncio.ensure_future(cluster.bootstrap("replica4", num_tokens=4))
            await streaming_started(cluster, "replica4")
            first = cluster.nodes["replica4"].node_id
            # A second join whose ranges overlap (RF 3 of 3 nodes: all of them) is refused,
            # naming the first.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await cluster.bootstrap(fifth.name, num_tokens=4)
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert first in (refused.value.details() or ""), refused.value.details()

            status = await cluster.operation("replica4", "BootstrapAbort")
            assert status.state == "aborted", status
            with pytest.raises(grpc.aio.AioRpcError) as stopped:
                await joining
            assert stopped.value.code() == grpc.StatusCode.ABORTED
            assert await join_steps(cluster, first) == ["prepare", "start", "cancel", "cancel"]
            metadata = await latest(cluster, client)
            assert metadata.nodes[first].state.value == "left"
            assert not metadata.sequences
            assert metadata.placements == before
            assert stored_mutations(cluster, "replica4") == 0
            # Nothing is left to resume: a clear refusal.
            with pytest.raises(grpc.aio.AioRpcError) as nothing:
                await cluster.operation("replica4", "BootstrapResume")
            assert nothing.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "no topology operation in progress" in (nothing.value.details() or "")
            # The lock is released: the other node now joins.
            status = await cluster.bootstrap(fifth.name, num_tokens=4)
            assert status.state == "finished", status

    run(cluster, scenario, timeout_s=300)


# --------------------------------------------------------------------------- reconciliation


def test_a_tracked_join_reconciles_the_writes_its_stream_source_missed(tmp_path: Path) -> None:
    """A ring of three single-token nodes A, B, C (RF 3); replica4 (D) joins between C and A,
    taking (C, D] over from C. X, one of A and B, is down while partitions are written at
    QUORUM (the other, Y, and C hold them) and comes back without them; then C dies. With
    ``--stream-sources nearest`` the join streams (C, D] from X, the first of the range's other
    replicas, and D's final group for it is {D, A, B}: the quorum {D, X} must still read every
    write. For the tracked keyspace the join's partial reconciliation brought them from Y; the
    untracked keyspace, which has none, shows what is at stake: that quorum misses them."""
    cluster = LocalCluster(tmp_path, replicas=4, replica_args=("--stream-sources", "nearest"))
    tokens = {"replica1": [-(6 * 10**18)], "replica2": [0], "replica3": [6 * 10**18]}
    joining_at = 8 * 10**18

    async def scenario() -> None:
        cluster.cms.start()
        founders = ["replica1", "replica2", "replica3"]
        for name in founders:
            cluster.start_replica(name)
        await cluster.wait_ready(founders)
        everyone, cluster.nodes = cluster.nodes, {n: cluster.nodes[n] for n in founders}
        await cluster.form_ring(tokens=tokens)
        cluster.nodes = everyone
        # The range's fallback sources are ordered by node id: X is streamed from.
        x, y = sorted(("replica1", "replica2"), key=lambda n: cluster.nodes[n].node_id)
        async with Client([cluster.nodes[n].address for n in founders]) as client:
            for keyspace in KEYSPACES:
                await client.create_keyspace(
                    keyspace, replication_factor=3, tracked=keyspace == "tks"
                )
                await client.create_table(
                    keyspace, "events", EVENTS, partition_key=["id"], clustering_key=["seq"]
                )
            await latest(cluster, client)
            cluster.stop_replica(x)
            missed = []
            for p in range(200):
                key = f"m{p}"
                for keyspace in KEYSPACES:
                    await client.write(
                        keyspace,
                        "events",
                        {"id": key, "seq": 0, "payload": f"while {x} was down {p}"},
                        consistency=Consistency.QUORUM,
                    )
                token = partition_token(partition_columns(client.table("tks", "events")), (key,))
                if 6 * 10**18 < token <= joining_at:
                    missed.append(key)
            assert missed  # some of them fall into the range that moves
            cluster.start_replica(x)
            await cluster.wait_ready([x])
            cluster.kill_replica("replica3")
            cluster.start_replica("replica4")
            await cluster.wait_ready(["replica4"])
            status = await cluster.bootstrap("replica4", tokens=[joining_at])
            assert status.state == "finished", status
            assert status.reconciled_mutations >= len(missed), status
            assert await cluster.metric("replica4", "reconciled_mutations_total") >= len(missed)

            metadata = await latest(cluster, client)
            pair = {cluster.nodes[n].node_id for n in (x, "replica4")}
            for key in missed:
                assert pair < read_group(metadata, client, "tks", key), key
            cluster.stop_replica(y)
            coordinator = cluster.nodes["replica4"].address
            found = {}
            for keyspace in KEYSPACES:
                found[keyspace] = 0
                for key in missed:
                    result = await client.read(
                        keyspace,
                        "events",
                        {"id": key},
                        consistency=Consistency.QUORUM,
                        coordinator=coordinator,
                    )
                    found[keyspace] += len(result.rows)
            assert found == {"tks": len(missed), "uks": 0}, (found, len(missed))

    run(cluster, scenario, timeout_s=300)
