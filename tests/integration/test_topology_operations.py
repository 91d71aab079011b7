"""The four topology operations back to back, as real processes on 127.0.0.1, under writes.

3 CMS members and 3 replicas hold a tracked and an untracked RF 3 keyspace (and an untracked
RF 2 one, so that a move on 3 nodes still moves data). A client writes at QUORUM all along,
recording every acknowledged write, while a 4th node bootstraps, a node decommissions, a node
is killed with SIGKILL and replaced by a 5th, and a node moves to new tokens. Afterwards:

* every acknowledged write is read at QUORUM through every quorum of its final read group,
  with the old owners (the decommissioned node, the killed one) stopped and the third final
  node stopped while each pair is read;
* after ``cleanup`` each replica holds exactly the ranges its placement gives it: no cell or
  log entry outside them, and every partition written (at ALL) before the first operation whose
  final read group names it;
* the metadata log shows each operation's four steps.

Replacing or removing a node that still answers is refused, naming it as alive.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path

import grpc
import pytest

from epochal.admin import (
    Bootstrap,
    Decommission,
    Move,
    OperationRequest,
    OperationStatus,
    Replace,
)
from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.replica.operations import owned_ranges
from epochal.status import code_of
from epochal.tcm import ClusterMetadata
from epochal.tcm.movements import movements
from tests.harness import (
    HOLD_MS,
    QuorumWriters,
    assert_every_quorum_reads_every_write,
    create_events,
    key_token,
    latest,
    read_group,
    replica_db,
    run,
    start_ring,
    steps_since,
    until,
)

pytestmark = pytest.mark.integration

KEYSPACES = {"tks": (3, True), "uks": (3, False), "u2ks": (2, False)}  # name: (RF, tracked)
PRELOADED = 40  # partitions per keyspace, written at ALL before the first operation
# Acknowledged writes of each keyspace before the first operation and after the last (once
# every replica has the final placements), besides those during the operations.
WRITES_BEFORE = 10
WRITES_AFTER = 10


Tokens = list[tuple[str, int]]


def stored(cluster: LocalCluster, name: str) -> tuple[Tokens, Tokens]:
    """(table id, token) of each cell and (keyspace, token) of each log entry a replica holds."""
    with replica_db(cluster, name) as db:
        cells = db.execute("SELECT DISTINCT table_id, token FROM cells").fetchall()
        logged = db.execute("SELECT DISTINCT keyspace, token FROM mutations").fetchall()
    return cells, logged


async def epochal_cli(*args: str) -> tuple[int, str, str]:
    """Run the ``epochal`` command line as a process; (exit status, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "epochal.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 120)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def preload(client: AsyncClient, payload_repeats: int) -> None:
    """Create the keyspaces and their ``events``; write PRELOADED partitions of one row (seq 0)
    into each, at ALL."""
    for keyspace, (rf, tracked) in KEYSPACES.items():
        await client.create_keyspace(keyspace, replication_factor=rf, tracked=tracked)
        await create_events(client, keyspace)
        for p in range(PRELOADED):
            row = {"id": f"p{p}", "seq": 0, "payload": f"preloaded {p}" * payload_repeats}
            await client.write(keyspace, "events", row, consistency=Consistency.ALL)


def inside(token: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(left < token <= right for left, right in ranges)


def held_partitions(
    cluster: LocalCluster, name: str, metadata: ClusterMetadata
) -> set[tuple[str, int]]:
    """(keyspace, token) of every partition the replica holds cells of."""
    keyspace_of = {t.id: k.name for k in metadata.keyspaces.values() for t in k.tables.values()}
    cells, _ = stored(cluster, name)
    return {(keyspace_of[t], token) for t, token in cells}


def assert_holds_only_its_ranges(
    cluster: LocalCluster, name: str, metadata: ClusterMetadata
) -> None:
    """No cell and no log entry on the replica lies outside the ranges it replicates."""
    node_id = cluster.nodes[name].node_id
    ranges = {o.keyspace: o.ranges for o in owned_ranges(metadata, node_id)}
    keyspace_of = {t.id: k.name for k in metadata.keyspaces.values() for t in k.tables.values()}
    cells, logged = stored(cluster, name)
    outside = [(t, token) for t, token in cells if not inside(token, ranges[keyspace_of[t]])]
    assert not outside, (name, outside[:5])
    outside = [(k, token) for k, token in logged if not inside(token, ranges[k])]
    assert not outside, (name, outside[:5])


def assert_holds_every_preloaded_partition_it_replicates(
    cluster: LocalCluster, name: str, metadata: ClusterMetadata, client: AsyncClient
) -> None:
    node_id = cluster.nodes[name].node_id
    held = held_partitions(cluster, name, metadata)
    for keyspace in KEYSPACES:
        for p in range(PRELOADED):
            key = f"p{p}"
            mine = node_id in read_group(metadata, client, keyspace, key)
            has = (keyspace, key_token(client, keyspace, key)) in held
            assert has == mine, (name, keyspace, key, mine)


def test_bootstrap_decommission_replace_and_move_under_quorum_writes_lose_nothing(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(
        tmp_path, replicas=5, replica_args=("--stream-message-bytes", "4096"), test_hooks=True
    )

    async def scenario() -> None:
        formed = await start_ring(cluster, ["replica1", "replica2", "replica3"], num_tokens=4)
        for name in ("replica4", "replica5"):  # registered, not joined
            cluster.start_replica(name)
        await cluster.wait_ready(["replica4", "replica5"])
        ids = {name: replica.node_id for name, replica in cluster.nodes.items()}

        seeds = [cluster.nodes[n].address for n in ("replica1", "replica4", "replica5")]
        async with AsyncClient([*seeds, cluster.nodes["replica2"].address]) as client:
            await preload(client, payload_repeats=1)
            writers = QuorumWriters(client, list(KEYSPACES), seq=1)
            order = writers.acknowledged  # acknowledged writes, in order

            async def under_writes(name: str, request: OperationRequest) -> OperationStatus:
                """Run the operation with every stream held until writes into the ranges it
                moves were acknowledged between its START and its FINISH, then let it go."""
                method = type(request).__name__
                live = [n for n, r in cluster.nodes.items() if r.running]
                for node in live:
                    await cluster.set_hooks(node, stream_delay_ms=HOLD_MS)
                running = asyncio.ensure_future(cluster.operation(name, request, timeout_s=240))

                async def streaming() -> OperationStatus | None:
                    status = await cluster.status(name)
                    assert status.state == "streaming" or not running.done(), (method, status)
                    return status if status.state == "streaming" else None

                status = await until(f"{method} streaming", streaming)
                metadata = await latest(cluster, client)
                moved = movements(metadata, metadata.sequences[status.node_id])
                since = len(order)

                def writes_into_moved() -> int:
                    return sum(
                        1
                        for keyspace, key in order[since:]
                        if any(
                            m.params == metadata.keyspaces[keyspace].replication
                            and m.range.contains(key_token(client, keyspace, key))
                            for m in moved
                        )
                    )

                await until(
                    f"5 writes into the ranges {method} moves", lambda: writes_into_moved() >= 5
                )
                for node in live:
                    await cluster.set_hooks(node, stream_delay_ms=0)
                status = await running
                assert status.state == "finished", (method, status)
                return status

            writers.start()
            try:
                await writers.more(WRITES_BEFORE)
                await under_writes("replica4", Bootstrap(num_tokens=4))
                left = await under_writes("replica2", Decommission())
                assert left.streamed_cells > 0, left  # the receivers pulled from it
                cluster.stop_replica("replica2")

                with pytest.raises(EpochalError) as alive:  # replace is for the dead
                    await cluster.operation("replica5", Replace(replaced=ids["replica3"]))
                assert code_of(alive.value) == grpc.StatusCode.FAILED_PRECONDITION
                assert f"{ids['replica3']} is alive" in alive.value.message
                cluster.kill_replica("replica3")  # SIGKILL
                replaced = await under_writes("replica5", Replace(replaced=ids["replica3"]))
                assert replaced.streamed_cells > 0, replaced

                metadata = await latest(cluster, client)
                old = metadata.tokens.owners[ids["replica1"]]
                rng = random.Random(5)
                owned = {t for tokens in metadata.tokens.owners.values() for t in tokens}
                new = set()
                while len(new) < len(old):
                    token = rng.randrange(-(2**62), 2**62)
                    if token not in owned:
                        new.add(token)
                await under_writes("replica1", Move(tokens=tuple(sorted(new))))
                # Writes under the final placements too: acknowledged once every replica has them.
                await cluster.wait_for_epoch((await latest(cluster, client)).epoch)
                await writers.more(WRITES_AFTER)
            finally:
                await writers.stop()
            acked = {(k, f"p{p}"): 0 for k in KEYSPACES for p in range(PRELOADED)}
            acked |= dict.fromkeys(order, 1)

            # The log shows each operation's four steps, in order, and nothing else.
            assert await steps_since(cluster, formed) == [
                (ids[node], step)
                for node, kind in (
                    ("replica4", "join"),
                    ("replica2", "leave"),
                    ("replica5", "replace"),
                    ("replica1", "move"),
                )
                for step in (f"prepare_{kind}", "start", "mid", "finish")
            ]
            metadata = await latest(cluster, client)
            final = ["replica1", "replica4", "replica5"]
            assert {n.node_id for n in metadata.nodes.values() if n.state.value == "joined"} == {
                ids[n] for n in final
            }
            assert metadata.tokens.owners[ids["replica1"]] == tuple(sorted(new))
            written_during = sum(1 for (_, key) in acked if key.startswith("w"))
            assert written_during > 50, written_during

            # Every acknowledged write through every quorum of its final read group: the old
            # owners are stopped, and so is the third final node while a pair is read.
            await assert_every_quorum_reads_every_write(cluster, client, metadata, final, acked)

            # Cleanup: each replica then holds exactly the ranges its placement gives it.
            removed = 0
            for name in final:
                removed += (await cluster.cleanup(name)).removed
            assert removed > 0  # the moves left data behind that cleanup deleted
            metadata = await latest(cluster, client)
            for name in final:
                assert_holds_only_its_ranges(cluster, name, metadata)
                assert_holds_every_preloaded_partition_it_replicates(
                    cluster, name, metadata, client
                )

    run(cluster, scenario, timeout_s=900)


def test_decommission_abort_undoes_it_and_a_dead_node_is_removed_by_another(
    tmp_path: Path,
) -> None:
    """A decommission held mid-stream is aborted: its steps are undone one epoch each, the node
    is JOINED again with the placements it had, and the nodes that had pulled part of its
    ranges hold nothing outside their own. Then a node is killed and removed by another: the
    survivors stream its ranges from each other, and every partition is on every replica of
    its final group."""
    cluster = LocalCluster(
        tmp_path, replicas=4, replica_args=("--stream-message-bytes", "4096"), test_hooks=True
    )

    async def scenario() -> None:
        formed = await start_ring(cluster, num_tokens=4)
        ids = {name: replica.node_id for name, replica in cluster.nodes.items()}
        async with AsyncClient([r.address for r in cluster.nodes.values()]) as client:
            await preload(client, payload_repeats=20)
            before = (await latest(cluster, client)).placements

            # Decommission, held mid-stream, then aborted.
            for name in cluster.nodes:
                await cluster.set_hooks(name, stream_delay_ms=HOLD_MS)
            leaving = asyncio.ensure_future(cluster.operation("replica4", Decommission()))
            others = ["replica1", "replica2", "replica3"]

            async def pulled() -> bool:
                return (
                    sum(
                        [
                            await cluster.metric(n, "epochal_stream_received_cells_total")
                            for n in others
                        ]
                    )
                    > 0
                )

            await until("a receiver pulls part of replica4's ranges", pulled)
            # The command line shows it in progress, then aborts it.
            seed = ("--cluster", cluster.nodes["replica1"].address)
            rc, out, err = await epochal_cli("operations", "-o", "json", *seed)
            assert rc == 0, (rc, out, err)
            [shown] = json.loads(out)["in_progress"]
            assert (shown["node"], shown["kind"], shown["driver"]) == (
                ids["replica4"],
                "leave",
                ids["replica4"],
            ), shown
            assert shown["progress"]["state"] == "streaming", shown
            rc, out, err = await epochal_cli("decommission", ids["replica4"], "--abort", *seed)
            assert rc == 0, (rc, out, err)
            assert "operation   leave (step" in out and "aborted)" in out, out
            with pytest.raises(EpochalError) as stopped:
                await leaving
            assert code_of(stopped.value) == grpc.StatusCode.ABORTED
            for name in cluster.nodes:
                await cluster.set_hooks(name, stream_delay_ms=0)
            metadata = await latest(cluster, client)
            assert metadata.nodes[ids["replica4"]].state.value == "joined"
            assert not metadata.sequences
            assert metadata.placements == before
            assert [s for n, s in await steps_since(cluster, formed)] == [
                "prepare_leave",
                "start",
                "cancel",
                "cancel",
            ]
            assert (
                sum([await cluster.metric(n, "epochal_cleanup_removed_total") for n in others]) > 0
            )
            for name in cluster.nodes:
                assert_holds_only_its_ranges(cluster, name, metadata)

            # Remove a dead node from another one, through the command line.
            address = cluster.nodes["replica1"].address
            via = ("--cluster", address, "--via", address)
            rc, out, err = await epochal_cli("removenode", ids["replica1"], *via)
            assert rc == 1, (rc, out, err)
            assert "FAILED_PRECONDITION" in err and "decommission" in err, err
            rc, out, err = await epochal_cli("removenode", ids["replica3"], *via)
            assert rc == 1, (rc, out, err)  # it is alive: remove is for dead nodes
            assert f"{ids['replica3']} is alive" in err and "decommission" in err, err
            cluster.kill_replica("replica3")
            rc, out, err = await epochal_cli("removenode", ids["replica3"], *via)
            assert rc == 0, (rc, out, err)
            assert "remove (step finish, finished)" in out, out
            removed = await cluster.status("replica1")
            assert removed.state == "finished", removed
            assert removed.node_id == ids["replica3"] and removed.kind == "remove", removed
            assert removed.streamed_cells > 0, removed
            metadata = await latest(cluster, client)
            assert metadata.nodes[ids["replica3"]].state.value == "left"
            steps = [s for n, s in await steps_since(cluster, formed) if n == ids["replica3"]]
            assert steps == ["prepare_leave", "start", "mid", "finish"]
            for name in ("replica1", "replica2", "replica4"):
                assert_holds_every_preloaded_partition_it_replicates(
                    cluster, name, metadata, client
                )

    run(cluster, scenario, timeout_s=400)
