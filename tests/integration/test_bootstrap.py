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
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from epochal.admin import BootstrapAbort, BootstrapResume
from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.status import code_of
from tests.harness import (
    QuorumWriters,
    assert_every_quorum_reads_every_write,
    create_events,
    key_token,
    latest,
    read_group,
    read_seqs,
    replica_db,
    run,
    start_ring,
    steps_of,
    until,
)

pytestmark = pytest.mark.integration

KEYSPACES = ("tks", "uks")  # tracked, untracked
JOIN_STEPS = ["prepare_join", "start", "mid", "finish"]
# Acknowledged writes of each keyspace before the join and after it (once every replica has the
# final placements), besides those during it.
WRITES_BEFORE = 10
WRITES_AFTER = 10


@contextlib.asynccontextmanager
async def ring_with_data(cluster: LocalCluster, partitions: int) -> AsyncIterator[AsyncClient]:
    """Start the 3 first replicas as a ring, create both keyspaces, write ``partitions``
    partitions of 3 rows into each; then start the 4th replica (registered, not joined)."""
    joining = cluster.add_replica()
    founders = [name for name in cluster.nodes if name != joining.name]
    await start_ring(cluster, founders, num_tokens=4)
    async with AsyncClient([cluster.nodes[n].address for n in founders]) as client:
        for keyspace in KEYSPACES:
            await client.create_keyspace(keyspace, replication_factor=3, tracked=keyspace == "tks")
            await create_events(client, keyspace)
            for p in range(partitions):
                rows = [{"id": f"p{p}", "seq": s, "payload": f"v{p}.{s}" * 8} for s in range(3)]
                await client.write_rows(keyspace, "events", rows, consistency=Consistency.ALL)
        cluster.start_replica(joining.name)
        await cluster.wait_ready([joining.name])
        yield client


# --------------------------------------------------------------------------- join under writes


def test_a_node_joins_under_quorum_writes_and_every_quorum_of_the_new_groups_has_every_write(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path, replicas=3)

    async def scenario() -> None:
        async with ring_with_data(cluster, partitions=60) as client:
            writers = QuorumWriters(client, KEYSPACES, seq=0)
            writers.start()
            await writers.more(WRITES_BEFORE)
            status = await cluster.bootstrap("replica4", num_tokens=4)
            assert status.state == "finished", status
            # Writes under the final placements too: acknowledged once every replica has them.
            await cluster.wait_for_epoch((await latest(cluster, client)).epoch)
            await writers.more(WRITES_AFTER)
            await writers.stop()
            acked = {(k, f"p{p}"): 2 for k in KEYSPACES for p in range(60)}
            acked |= dict.fromkeys(writers.acknowledged, 0)
            joined = cluster.nodes["replica4"].node_id
            assert await steps_of(cluster, joined) == JOIN_STEPS
            assert await cluster.metric("replica4", "epochal_stream_received_cells_total") > 0
            # the tracked keyspace's log came as ids with the cells (reconciled by difference)
            assert await cluster.metric("replica4", "epochal_stream_received_ids_total") > 0
            passed = 'epochal_progress_barriers_total{level="EACH_QUORUM",verdict="passed"}'
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
                    seqs = await read_seqs(client, keyspace, key, Consistency.ONE, address)
                    assert seqs == [0, 1, 2], (keyspace, key)
                    streamed += 1
            assert streamed > 0

            # Every acknowledged write, through every quorum (2 of 3) of its final read
            # group: the two other replicas are stopped while a pair is read.
            final = list(cluster.nodes)
            await assert_every_quorum_reads_every_write(cluster, client, metadata, final, acked)

    run(cluster, scenario, timeout_s=420)


# --------------------------------------------------------------------------- resume and abort


def stored_mutations(cluster: LocalCluster, name: str) -> int:
    with replica_db(cluster, name) as db:
        return db.execute("SELECT count(*) FROM mutations").fetchone()[0]


async def streaming_started(cluster: LocalCluster, name: str) -> int:
    """Until the node has stored some streamed cells; returns how many."""

    async def streamed_cells() -> int:
        return (await cluster.status(name)).streamed_cells

    return await until(f"{name} streams", streamed_cells)


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
            with pytest.raises(EpochalError):
                await joining
            cluster.start_replica("replica4")
            await cluster.wait_ready(["replica4"])
            status = await cluster.status("replica4")
            assert status.state == "interrupted" and status.step == "start", status
            status = await cluster.operation("replica4", BootstrapResume())
            assert status.state == "finished", status
            assert 0 < at_kill < status.streamed_cells, (at_kill, status.streamed_cells)
            # Each mutation was stored once: the streams' own counts (kept with the data they
            # stored) add up to exactly what the node holds — nothing was streamed twice.
            assert status.streamed_mutations > 0
            assert stored_mutations(cluster, "replica4") == status.streamed_mutations
            joined = cluster.nodes["replica4"].node_id
            assert await steps_of(cluster, joined) == JOIN_STEPS

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
            fifth = cluster.add_replica(auto_join=False)
            cluster.start_replica(fifth.name)
            await cluster.wait_ready([fifth.name])
            await cluster.set_hooks("replica4", stream_delay_ms=100)
            joining = asyncio.ensure_future(cluster.bootstrap("replica4", num_tokens=4))
            await streaming_started(cluster, "replica4")
            first = cluster.nodes["replica4"].node_id
            # A second join whose ranges overlap (RF 3 of 3 nodes: all of them) is refused,
            # naming the first.
            with pytest.raises(EpochalError) as refused:
                await cluster.bootstrap(fifth.name, num_tokens=4)
            assert code_of(refused.value) == grpc.StatusCode.FAILED_PRECONDITION
            assert first in refused.value.message, refused.value.message

            status = await cluster.operation("replica4", BootstrapAbort())
            assert status.state == "aborted", status
            with pytest.raises(EpochalError) as stopped:
                await joining
            assert code_of(stopped.value) == grpc.StatusCode.ABORTED
            assert await steps_of(cluster, first) == ["prepare_join", "start", "cancel", "cancel"]
            metadata = await latest(cluster, client)
            assert metadata.nodes[first].state.value == "left"
            assert not metadata.sequences
            assert metadata.placements == before
            assert stored_mutations(cluster, "replica4") == 0
            # Nothing is left to resume: a clear refusal.
            with pytest.raises(EpochalError) as nothing:
                await cluster.operation("replica4", BootstrapResume())
            assert code_of(nothing.value) == grpc.StatusCode.FAILED_PRECONDITION
            assert "no topology operation in progress" in nothing.value.message
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
        founders = ["replica1", "replica2", "replica3"]
        await start_ring(cluster, founders, tokens=tokens)
        # The range's fallback sources are ordered by node id: X is streamed from.
        x, y = sorted(("replica1", "replica2"), key=lambda n: cluster.nodes[n].node_id)
        async with AsyncClient([cluster.nodes[n].address for n in founders]) as client:
            for keyspace in KEYSPACES:
                await client.create_keyspace(
                    keyspace, replication_factor=3, tracked=keyspace == "tks"
                )
                await create_events(client, keyspace)
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
                if 6 * 10**18 < key_token(client, "tks", key) <= joining_at:
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
            assert await cluster.metric(
                "replica4", "epochal_join_reconciled_mutations_total"
            ) >= len(missed)

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
                    seqs = await read_seqs(client, keyspace, key, Consistency.QUORUM, coordinator)
                    found[keyspace] += len(seqs)
            assert found == {"tks": len(missed), "uks": 0}, (found, len(missed))

    run(cluster, scenario, timeout_s=300)
