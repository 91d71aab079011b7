"""A cluster that forms and grows by itself: replicas started one by one with nothing but their
command line (the join setting is on by default; no ``bootstrap`` call, no script committing
joins), as real processes on 127.0.0.1.

Proves: the first three form the ring (the first with nothing to stream); a fourth and a fifth
started at the same moment both join, one waiting for the other's range lock (logged, never a
failure) and both streaming the rows written before; a QUORUM write and read succeed through
every node; a restarted node that joined does not join again (one PREPARE for it in the log);
a node killed while its join waits at a barrier resumes the join on restart and finishes it
(still one PREPARE); a node started with ``--no-auto-join`` stays out of the ring.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from tests.harness import create_events, paused, run, steps_of, until, until_logged

pytestmark = pytest.mark.integration

JOIN_STEPS = ["prepare_join", "start", "mid", "finish"]
ROWS = 40
WAITED = re.compile(r"auto-join: waiting: ranges .* are locked by the join of (node-\d+)")


def test_replicas_started_one_by_one_form_and_grow_the_ring_by_themselves(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, replicas=6, num_tokens=8, test_hooks=True)

    async def scenario() -> None:
        cluster.cms.start()
        await cluster.cms.wait_serving()
        # The first three, one by one: each joins by itself before the next starts.
        for name in ("replica1", "replica2", "replica3"):
            cluster.start_replica(name)
            await cluster.wait_ready([name])
            await cluster.wait_joined([name])
        first = cluster.nodes["replica1"].log_path.read_text()
        assert "owns no tokens (no node owns tokens yet: nothing to stream)" in first
        for name in ("replica1", "replica2", "replica3"):
            assert await steps_of(cluster, cluster.nodes[name].node_id) == JOIN_STEPS
        founders = [cluster.nodes[n].address for n in ("replica1", "replica2", "replica3")]
        async with AsyncClient(founders) as client:
            await client.create_keyspace("ks", replication_factor=3, tracked=True)
            await create_events(client, "ks")
            for n in range(ROWS):
                row = {"id": f"k{n}", "seq": n, "payload": f"before the joins {n}"}
                await client.write("ks", "events", row, consistency=Consistency.ALL)

        # Two more at the same moment: the log orders their PREPAREs; the second waits for the
        # first's lock over the ranges both change, then joins too. Two owners are paused
        # meanwhile, so that the first join holds its lock at a barrier (a join with little to
        # stream could otherwise finish before the second node has even registered).
        with paused(cluster, "replica2", "replica3"):
            cluster.start_replica("replica4")
            cluster.start_replica("replica5")
            await until_logged(WAITED, [cluster.nodes["replica4"], cluster.nodes["replica5"]])
        await cluster.wait_ready(["replica4", "replica5"])
        await cluster.wait_joined(["replica4", "replica5"])
        logs = {n: cluster.nodes[n].log_path.read_text() for n in ("replica4", "replica5")}
        waited = {n: WAITED.findall(text) for n, text in logs.items()}
        waiter = next(n for n, found in waited.items() if found)
        holder = "replica5" if waiter == "replica4" else "replica4"
        assert not waited[holder], waited
        assert set(waited[waiter]) == {cluster.nodes[holder].node_id}, waited
        for name in ("replica4", "replica5"):
            assert await steps_of(cluster, cluster.nodes[name].node_id) == JOIN_STEPS
            assert "bootstrapping with streaming" in logs[name]
            status = await cluster.status(name)
            assert (status.kind, status.state) == ("join", "finished"), status
            assert status.streamed_cells > 0, status
            assert "Traceback" not in logs[name]

        everyone = [cluster.nodes[f"replica{i}"].address for i in range(1, 6)]
        async with AsyncClient(everyone) as client:
            for coordinator in everyone:
                await client.write(
                    "ks",
                    "events",
                    {"id": "after", "seq": 0, "payload": coordinator},
                    consistency=Consistency.QUORUM,
                    coordinator=coordinator,
                )
                result = await client.read(
                    "ks", "events", {"id": "after"}, consistency=Consistency.QUORUM
                )
                assert [r["payload"] for r in result.rows] == [coordinator]
            for n in range(ROWS):  # streamed to the new owners: every quorum has them
                result = await client.read(
                    "ks", "events", {"id": f"k{n}"}, consistency=Consistency.QUORUM
                )
                assert [r["payload"] for r in result.rows] == [f"before the joins {n}"]

        # A restart of a node that joined does not join again.
        cluster.stop_replica("replica4")
        cluster.start_replica("replica4")
        await cluster.wait_ready(["replica4"])
        node4 = cluster.nodes["replica4"].node_id
        await until_logged(
            re.compile(rf"auto-join: nothing to do: {node4} is joined with 8 tokens"),
            [cluster.nodes["replica4"]],
        )
        assert await steps_of(cluster, node4) == JOIN_STEPS

        # A node killed mid-join resumes it: two owners paused, its barrier waits for them.
        with paused(cluster, "replica1", "replica2"):
            cluster.start_replica("replica6")
            await cluster.wait_ready(["replica6"])
            node6 = cluster.nodes["replica6"].node_id

            async def held_at_a_barrier() -> bool:
                status = await cluster.status("replica6")
                return status.kind == "join" and status.state == "waiting_for_barrier"

            await until("replica6's join waiting at a barrier", held_at_a_barrier, 60)
            assert (await steps_of(cluster, node6))[0] == "prepare_join"
            cluster.kill_replica("replica6")
        cluster.start_replica("replica6")
        await cluster.wait_ready(["replica6"])
        await cluster.wait_joined(["replica6"])
        assert "resuming the join" in cluster.nodes["replica6"].log_path.read_text()
        assert await steps_of(cluster, node6) == JOIN_STEPS
        everything = Counter(step for step in await steps_of_all(cluster))
        assert everything["prepare_join"] == 6, everything

    run(cluster, scenario, timeout_s=300)


async def steps_of_all(cluster: LocalCluster) -> list[str]:
    steps = []
    for replica in cluster.nodes.values():
        steps += await steps_of(cluster, replica.node_id)
    return steps


def test_a_node_started_with_no_auto_join_stays_out_of_the_ring(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, replicas=2)
    cluster.nodes["replica2"].auto_join = False

    async def scenario() -> None:
        cluster.start()
        await cluster.wait_ready()
        await cluster.wait_joined(["replica1"])
        await until_logged(
            re.compile(
                r"auto-join is off \(--no-auto-join\): join with `epochal bootstrap node-\d+`"
            ),
            [cluster.nodes["replica2"]],
        )
        described = await cluster.describe("replica2")
        assert described.state == "registered", described
        assert await steps_of(cluster, described.node_id) == []
        status = await cluster.bootstrap("replica2", num_tokens=4)  # the operator's join
        assert status.state == "finished", status
        assert (await cluster.describe("replica2")).state == "joined"

    run(cluster, scenario, timeout_s=120)
