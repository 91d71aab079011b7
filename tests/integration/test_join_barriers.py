"""Joins that run side by side, and joins gated by progress barriers across two datacenters, as
real processes on 127.0.0.1 (3 CMS members and the replicas).

Proves:

* Two joins whose locked ranges do not intersect run at the same time: on a ring of 8
  single-token replicas holding an RF 2 keyspace, two nodes bootstrap at once on opposite sides
  of the ring; both are held mid-stream together (so both PREPAREs commit before either FINISH),
  both finish, and every row written before is read back, the new nodes serving their share.
* A barrier waits for datacenters, not for every node. With a whole datacenter down and the
  minimum left at EACH_QUORUM, a join waits and says so (gauge, Status, log) until the
  datacenter is back, then finishes. With a node the join affects down, each barrier passes at
  EACH_QUORUM without it. With ``--barrier-min-level QUORUM`` on the joining node, the
  datacenter outage makes each barrier fall back to QUORUM, logged and counted, and the join
  finishes without that datacenter.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.tcm import ClusterMetadata, ReplicationParams
from tests.harness import (
    HOLD_MS,
    create_events,
    latest,
    read_group,
    read_seqs,
    run,
    start_ring,
    steps_since,
    until,
    until_logged,
)

pytestmark = pytest.mark.integration

UNIT = 2**60  # tokens are multiples of it: the ring is (-8 UNIT, 8 UNIT]
PARTITIONS = 100
JOIN_STEPS = ["prepare_join", "start", "mid", "finish"]
PASSED_EACH_QUORUM = 'epochal_progress_barriers_total{level="EACH_QUORUM",verdict="passed"}'
PASSED_QUORUM = 'epochal_progress_barriers_total{level="QUORUM",verdict="passed"}'
DOWNGRADED_TO_QUORUM = 'epochal_progress_barrier_relaxations_total{level="EACH_QUORUM",to="QUORUM"}'
WAITING = "epochal_progress_barrier_waiting"
BARRIERS_PER_JOIN = 3  # before START, MID and FINISH


async def write_partitions(client: AsyncClient, keyspace: str, partitions: int) -> None:
    """Create ``keyspace.events`` and write one row in each of ``partitions`` partitions, at ALL."""
    await create_events(client, keyspace)
    for p in range(partitions):
        row = {"id": f"p{p}", "seq": 0, "payload": f"written before the joins {p}"}
        await client.write(keyspace, "events", row, consistency=Consistency.ALL)


async def join_order(cluster: LocalCluster, names: Sequence[str]) -> list[tuple[str, str]]:
    """(name, step) of the sequences of ``names`` in the metadata log, in commit order."""
    by_id = {cluster.nodes[n].node_id: n for n in names}
    return [(by_id[node], step) for node, step in await steps_since(cluster, 0) if node in by_id]


# --------------------------------------------------------------------------- concurrent joins

RING_OF_8 = {f"replica{k + 1}": [(2 * k - 7) * UNIT] for k in range(8)}  # -7, -5, ..., 7 UNIT
# Opposite sides: replica9 between replica1 and replica2, replica10 between replica5 and
# replica6. At RF 2 each changes only the two ranges before its token.
JOINING_AT = {"replica9": -6 * UNIT, "replica10": 2 * UNIT}


def test_two_joins_on_opposite_sides_of_the_ring_run_at_once_and_lose_nothing(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path, replicas=8, test_hooks=True)

    async def scenario() -> None:
        await start_ring(cluster, tokens=RING_OF_8)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("ks", replication_factor=2)
            await write_partitions(client, "ks", PARTITIONS)
            joining = [cluster.add_replica(auto_join=False).name for _ in JOINING_AT]
            assert joining == list(JOINING_AT)
            for name in joining:
                cluster.start_replica(name)
            await cluster.wait_ready(joining)
            # Each joining node holds its stream after the first message it stores, until
            # released: both sequences are then past START and short of MID, at once.
            for name in joining:
                await cluster.set_hooks(name, stream_delay_ms=HOLD_MS)
            joins = asyncio.gather(
                *(cluster.bootstrap(name, tokens=[token]) for name, token in JOINING_AT.items())
            )

            async def both_held_mid_stream() -> bool:
                assert not joins.done(), joins
                states = [await cluster.status(name) for name in joining]
                return all(s.state == "streaming" and s.streamed_cells > 0 for s in states)

            await until("both joins streaming", both_held_mid_stream)
            metadata = await latest(cluster, client)
            locks = [metadata.sequences[cluster.nodes[n].node_id].locked for n in joining]
            assert not any(a.intersects(b) for a in locks[0] for b in locks[1]), locks
            for name in joining:
                await cluster.set_hooks(name, stream_delay_ms=0)
            finished = await joins
            assert [s.state for s in finished] == ["finished", "finished"], finished

            order = await join_order(cluster, joining)
            for name in joining:
                assert [step for n, step in order if n == name] == JOIN_STEPS, order
            prepares = [i for i, (_, step) in enumerate(order) if step == "prepare_join"]
            finishes = [i for i, (_, step) in enumerate(order) if step == "finish"]
            assert max(prepares) < min(finishes), order

            metadata = await latest(cluster, client)
            assert all(
                metadata.nodes[cluster.nodes[n].node_id].state.value == "joined" for n in joining
            )
            served = await read_every_partition(cluster, client, metadata, joining)
            assert all(served.values()), served

    run(cluster, scenario, timeout_s=300)


async def read_every_partition(
    cluster: LocalCluster, client: AsyncClient, metadata: ClusterMetadata, joined: Sequence[str]
) -> dict[str, int]:
    """Read each partition at QUORUM, and at ONE from each of ``joined`` that replicates it
    (it answers from its own storage: what it streamed); answers how many each served."""
    served = dict.fromkeys(joined, 0)
    for p in range(PARTITIONS):
        key = f"p{p}"
        assert await read_seqs(client, "ks", key, Consistency.QUORUM) == [0], key
        for name in joined:
            replica = cluster.nodes[name]
            if replica.node_id not in read_group(metadata, client, "ks", key):
                continue
            seqs = await read_seqs(client, "ks", key, Consistency.ONE, replica.address)
            assert seqs == [0], (name, key)
            served[name] += 1
    return served


# --------------------------------------------------------------------------- barriers over 2 DCs

DC1 = ["replica1", "replica2", "replica3"]
DC2 = ["replica4", "replica5", "replica6"]
# One rack per datacenter: within each, replicas are the next nodes of its own ring. The three
# nodes that join later (replica7..9) are in dc1.
LOCATIONS = [("dc1", "r1")] * 3 + [("dc2", "r1")] * 3 + [("dc1", "r1")] * 3
RING_ON_2_DCS = {
    "replica1": [-6 * UNIT],
    "replica2": [-2 * UNIT],
    "replica3": [2 * UNIT],
    "replica4": [-4 * UNIT],
    "replica5": [0],
    "replica6": [4 * UNIT],
}
# dc1 has the larger factor, so that with dc2 down a majority of every union is in dc1: QUORUM
# can be met, EACH_QUORUM cannot.
REPLICATION = ReplicationParams.network_topology({"dc1": 3, "dc2": 2})
SHORT_BARRIERS = ("--barrier-timeout-ms", "1000", "--barrier-backoff-ms", "100")
STILL_WAITING = re.compile(
    r"still waiting at EACH_QUORUM, the minimum \(--barrier-min-level\); "
    r"no acknowledgement from (.+)$",
    re.MULTILINE,
)
PASSED_AT_EACH_QUORUM = re.compile(r"passed at EACH_QUORUM \((\d+) of (\d+) nodes acknowledged\)")
FELL_BACK = re.compile(r"EACH_QUORUM timed out after .*; falling back to QUORUM$", re.MULTILINE)


def test_join_barriers_wait_for_each_datacenter_unless_the_minimum_allows_quorum(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path, replicas=6, locations=LOCATIONS, replica_args=SHORT_BARRIERS)

    async def scenario() -> None:
        await start_ring(cluster, tokens=RING_ON_2_DCS)
        async with AsyncClient([cluster.nodes[n].address for n in DC1]) as client:
            await client.create_keyspace("ks", replication=REPLICATION)
            await write_partitions(client, "ks", PARTITIONS)
        await a_datacenter_down_holds_the_join_at_each_quorum(cluster)
        await one_affected_node_down_does_not_hold_the_join(cluster)
        await with_minimum_quorum_the_join_goes_on_without_a_datacenter(cluster)

    run(cluster, scenario, timeout_s=300)


async def a_datacenter_down_holds_the_join_at_each_quorum(cluster: LocalCluster) -> None:
    """replica7 joins at 6 UNIT, in dc1, with all of dc2 down: it waits at EACH_QUORUM (the
    minimum) past the timeout, says so, and finishes once dc2 is back."""
    joining = cluster.add_replica(auto_join=False).name
    cluster.start_replica(joining)
    await cluster.wait_ready([joining])
    for name in DC2:
        cluster.kill_replica(name)  # an outage: SIGKILL, no graceful shutdown to wait for
    join = asyncio.ensure_future(cluster.bootstrap(joining, tokens=[6 * UNIT]))

    async def waiting() -> bool:
        return await cluster.metric(joining, WAITING) == 1

    await until("the barrier waits at its minimum", waiting)
    status = await cluster.status(joining)
    assert (status.state, status.step, status.barrier_level) == (
        "waiting_for_barrier",
        "prepare",
        "EACH_QUORUM",
    ), status
    still_waiting = await until_logged(STILL_WAITING, [cluster.nodes[joining]])
    silent = set(still_waiting.group(1).split(", "))
    assert silent and silent <= {cluster.nodes[n].node_id for n in DC2}, silent
    assert not join.done()

    for name in DC2:
        cluster.start_replica(name)
    await cluster.wait_ready(DC2)
    status = await join
    assert status.state == "finished", status
    assert await cluster.metric(joining, WAITING) == 0
    assert await cluster.metric(joining, PASSED_EACH_QUORUM) == BARRIERS_PER_JOIN
    assert await cluster.metric(joining, DOWNGRADED_TO_QUORUM) == 0


async def one_affected_node_down_does_not_hold_the_join(cluster: LocalCluster) -> None:
    """replica8 joins at -5 UNIT, between replica1 and replica2 on dc1's ring (replica1,
    replica8, replica2, replica3, replica7), with replica1 down. The join moves ranges away
    from replica3, replica7 and replica2 — its stream sources — while replica1 stays in the
    groups of the ranges it changes: an affected node that sends nothing, so the join can go on
    without it, and each barrier passes at EACH_QUORUM with replica1 silent."""
    joining = cluster.add_replica(auto_join=False).name
    cluster.start_replica(joining)
    await cluster.wait_ready([joining])
    cluster.kill_replica("replica1")
    status = await cluster.bootstrap(joining, tokens=[-5 * UNIT])
    assert status.state == "finished", status
    assert status.streamed_cells > 0, status
    assert await cluster.metric(joining, PASSED_EACH_QUORUM) == BARRIERS_PER_JOIN
    counts = PASSED_AT_EACH_QUORUM.findall(cluster.nodes[joining].log_path.read_text())
    assert len(counts) == BARRIERS_PER_JOIN, counts
    assert all(int(acked) < int(asked) for acked, asked in counts), counts
    # replica1 was affected: it shares a replica group with replica8, a range the join changed.
    async with AsyncClient([cluster.nodes[n].address for n in DC1[1:]]) as client:
        metadata = await latest(cluster, client)
    placement = metadata.placements[REPLICATION]
    pair = {cluster.nodes[n].node_id for n in ("replica1", joining)}
    assert any(pair <= group for group in placement.reads), placement
    cluster.start_replica("replica1")
    await cluster.wait_ready(["replica1"])


async def with_minimum_quorum_the_join_goes_on_without_a_datacenter(cluster: LocalCluster) -> None:
    """replica9, started with ``--barrier-min-level QUORUM``, joins at -1 UNIT with all of dc2
    down: each barrier times out at EACH_QUORUM, falls back to QUORUM (logged, counted), passes
    there, and the join finishes."""
    joining = cluster.add_replica(auto_join=False).name
    # Only the node that drives a sequence reads the minimum: this flag is for it alone.
    replica = cluster.nodes[joining]
    replica.start([*cluster.command(joining), "--barrier-min-level", "QUORUM"], cluster.env)
    await cluster.wait_ready([joining])
    for name in DC2:
        cluster.kill_replica(name)
    status = await cluster.bootstrap(joining, tokens=[-1 * UNIT])
    assert status.state == "finished", status
    assert status.streamed_cells > 0, status
    assert await cluster.metric(joining, DOWNGRADED_TO_QUORUM) == BARRIERS_PER_JOIN
    assert await cluster.metric(joining, PASSED_QUORUM) == BARRIERS_PER_JOIN
    assert await cluster.metric(joining, PASSED_EACH_QUORUM) == 0
    fell_back = FELL_BACK.findall(replica.log_path.read_text())
    assert len(fell_back) == BARRIERS_PER_JOIN, fell_back
