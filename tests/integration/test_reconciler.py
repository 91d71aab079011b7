"""The reconciler as a real process with 3 CMS members and 3 replicas on 127.0.0.1 (RF 3, a tracked
keyspace), driven through the SDK.

Proves: a replica stopped while tracked QUORUM writes land is brought, by the reconciler alone
(no read touches it), to the same mutation set as the others — asserted id by id against every
acknowledged write's id — then the low bound advances on all three replicas and every replica's
log shrinks below a stated bound, and a read at ONE through the restarted replica sees every
acknowledged write. The size is ``EPOCHAL_RECONCILE_WRITES`` (CI: a short form; the issue's
50,000 on demand: ``EPOCHAL_RECONCILE_WRITES=50000``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.mtrack import MutationId
from epochal.tcm.keys import clustering_columns, decode_key
from tests.harness import run, start_ring, until
from tests.harness.ring import replica_db

pytestmark = pytest.mark.integration

WRITES = int(os.environ.get("EPOCHAL_RECONCILE_WRITES", "3000"))
PARTITIONS = 100
WRITERS = 32
# After the reconciler's rounds advanced the low bound past every write, a replica's log holds at
# most this share of the writes (the ids above the last bound: none are written then).
LOG_LEFT_SHARE = 0.01
# The stated bound on convergence: the reconciler delivers the missing writes within this.
CONVERGE_S = 60 + WRITES / 500
# Windows of 100 ids, fewer than a range's share of the writes (12 ranges): the missing ids older
# than the recent window are found only by the backlog walk, and a low bound reaches the writes'
# end only through several advances, each stopped at a window's end.
WINDOW = ("--window-ids", "100")
# Fast rounds for a test: a round a quarter-second, t a second behind the replicas' clocks.
FAST = (
    "--interval-ms", "250", "--advance-interval-ms", "500",
    "--write-timeout-ms", "500", "--slack-ms", "500", *WINDOW,
)  # fmt: skip
# Deliveries only: t stays an hour behind the writes, so no write's id is collected.
DELIVER_ONLY = ("--interval-ms", "250", "--slack-ms", "3600000", *WINDOW)


def log_ids(cluster: LocalCluster, name: str) -> set[MutationId]:
    with replica_db(cluster, name) as db:
        rows = db.execute(
            "SELECT node, log, seq, hlc FROM mutations WHERE keyspace = 'tks'"
        ).fetchall()
    return {MutationId(node=n, log=g, sequence=s, hlc=h) for n, g, s, h in rows}


def low_bounds(cluster: LocalCluster, name: str) -> list[int]:
    with replica_db(cluster, name) as db:
        return [
            int(mark)
            for (mark,) in db.execute(
                "SELECT mark FROM reconcile_marks WHERE keyspace = 'tks' AND kind = 'low_bound'"
            )
        ]


def stored_seqs(cluster: LocalCluster, name: str, client: AsyncClient) -> set[int]:
    """The ``seq`` of every row of ``tks.events`` whose column ``a`` the replica stores."""
    columns = clustering_columns(client.table("tks", "events"))
    with replica_db(cluster, name) as db:
        rows = db.execute("SELECT DISTINCT ckey FROM cells WHERE col = 'a'").fetchall()
    return {int(decode_key(columns, bytes(ckey))[0]) for (ckey,) in rows}  # type: ignore[arg-type]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster", test_hooks=True)
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.close()


async def write_all(
    client: AsyncClient, writes: int, partitions: int = PARTITIONS, coordinator: str | None = None
) -> dict[int, MutationId]:
    """``writes`` tracked QUORUM writes, ``WRITERS`` at a time, over ``partitions`` partitions:
    seq -> the acknowledged id."""
    acknowledged: dict[int, MutationId] = {}
    numbers = itertools.count()

    async def writer() -> None:
        for n in iter(lambda: next(numbers), None):
            if n >= writes:
                return
            row = {"id": f"p{n % partitions}", "seq": n, "a": f"v{n}", "b": n}
            try:
                written = await client.write_rows(
                    "tks", "events", [row], consistency=Consistency.QUORUM, coordinator=coordinator
                )
            except EpochalError:
                continue  # not acknowledged: nothing promised
            acknowledged[n] = written.mutation_id

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    return acknowledged


def test_a_replica_stopped_during_writes_is_reconciled_then_the_low_bound_advances(
    cluster: LocalCluster,
) -> None:
    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await client.create_table(
                "tks",
                "events",
                {"id": "text", "seq": "int", "a": "text", "b": "bigint"},
                partition_key=["id"],
                clustering_key=["seq"],
            )
            cluster.stop_replica("replica3")
            started = time.monotonic()
            acknowledged = await write_all(client, WRITES)
            print(f"{len(acknowledged)} writes acknowledged in {time.monotonic() - started:.1f} s")
            assert len(acknowledged) >= WRITES * 0.99
            cluster.start_replica("replica3")
            await cluster.wait_ready(["replica3"])
            missing_before = len(log_ids(cluster, "replica1") - log_ids(cluster, "replica3"))
            assert missing_before >= len(acknowledged) * 0.9  # it missed what was written

            # 1. deliveries only: replica3 gets the same mutation set, id by id.
            cluster.reconciler_args = DELIVER_ONLY
            cluster.add_reconciler()
            cluster.start_reconciler("reconciler1")
            started = time.monotonic()

            def same_sets() -> bool:
                sets = [log_ids(cluster, name) for name in cluster.nodes]
                return all(s == sets[0] for s in sets)

            await until("the three logs hold the same ids", same_sets, CONVERGE_S)
            converged_s = time.monotonic() - started
            print(f"replica3 received {missing_before} mutations in {converged_s:.1f} s")
            ids = log_ids(cluster, "replica3")
            for seq, mutation_id in acknowledged.items():
                assert mutation_id in ids, f"write {seq} ({mutation_id}) is not on replica3"
            oldest = min(i.hlc for i in acknowledged.values())
            for name in cluster.nodes:  # nothing collected: every bound is an hour back
                assert all(bound < oldest for bound in low_bounds(cluster, name)), name

            # 2. the same reconciler, restarted with fast rounds: bounds advance, logs shrink.
            cluster.reconcilers["reconciler1"].stop()
            cluster.reconciler_args = FAST
            cluster.start_reconciler("reconciler1")
            ceiling = int(len(acknowledged) * LOG_LEFT_SHARE)

            def collected() -> bool:
                return all(
                    low_bounds(cluster, n) and len(log_ids(cluster, n)) <= ceiling
                    for n in cluster.nodes
                )

            await until("every log collected below the low bound", collected, CONVERGE_S)
            for name in cluster.nodes:
                assert stored_seqs(cluster, name, client) >= set(acknowledged), name

            # 3. a read at ONE through replica3 sees every acknowledged write.
            seen: set[int] = set()
            for p in range(PARTITIONS):
                result = await client.read(
                    "tks",
                    "events",
                    {"id": f"p{p}"},
                    consistency=Consistency.ONE,
                    coordinator=cluster.nodes["replica3"].address,
                )
                seen |= {row["seq"] for row in result.rows}
            assert seen >= set(acknowledged)

    run(cluster, scenario, timeout_s=300 + WRITES / 100)


async def create_events(client: AsyncClient) -> None:
    await client.create_keyspace("tks", replication_factor=3, tracked=True)
    await client.create_table(
        "tks",
        "events",
        {"id": "text", "seq": "int", "a": "text", "b": "bigint"},
        partition_key=["id"],
        clustering_key=["seq"],
    )


# Fences right behind the replicas' clocks (t 2 ms behind the lowest, a round every 20 ms) while one
# coordinator's ids come from a clock 300 ms behind: its writes race the fences (a slack below the
# skew is never safe in production; here it makes the race happen on every round).
RACING = (
    "--interval-ms", "20", "--advance-interval-ms", "20", "--write-timeout-ms", "1",
    "--slack-ms", "1",
)  # fmt: skip
BEHIND_MS = 300
MISSED_SHARE = 0.3
RACE_WRITES = 3000


def test_writes_racing_the_fences_are_retried_and_none_is_lost(cluster: LocalCluster) -> None:
    async def scenario() -> None:
        await start_ring(cluster, num_tokens=1)
        async with AsyncClient(cluster.addresses) as client:
            await create_events(client)
            await cluster.set_hooks("replica3", id_clock_behind_ms=BEHIND_MS)
            # replica1 misses a share of the writes: only the reconciler brings them to it, so
            # a write lost at the fences (admitted below one, never delivered) would show there.
            await cluster.set_hooks("replica1", drop_write_share=MISSED_SHARE)
            cluster.reconciler_args = RACING
            cluster.start_reconciler(cluster.add_reconciler().name)
            # The writes race rounds only once rounds run: a reconciler slow to start (a loaded
            # machine) would otherwise find them all written.
            await until(
                "the reconciler's rounds reach every replica",
                lambda: all(low_bounds(cluster, name) for name in cluster.nodes),
                60,
            )
            acknowledged = await write_all(
                client, RACE_WRITES, partitions=4, coordinator=cluster.nodes["replica3"].address
            )
            fenced = sum(
                [await cluster.metric(n, "epochal_writes_fenced_total") for n in cluster.nodes]
            )
            print(f"{len(acknowledged)} writes acknowledged; {fenced:.0f} attempts were fenced")
            assert len(acknowledged) >= RACE_WRITES * 0.99
            assert fenced > 0  # the writes did race the fences

            missed = len(set(acknowledged) - stored_seqs(cluster, "replica1", client))
            assert missed > 0  # replica1 did miss writes

            def reconciled() -> bool:
                return all(
                    stored_seqs(cluster, name, client) >= set(acknowledged)
                    and low_bounds(cluster, name)
                    for name in cluster.nodes
                )

            await until("every acknowledged write on every replica", reconciled, 60)
            seen: set[int] = set()
            for p in range(4):  # and a read at ONE through replica1 sees each of them
                result = await client.read(
                    "tks",
                    "events",
                    {"id": f"p{p}"},
                    consistency=Consistency.ONE,
                    coordinator=cluster.nodes["replica1"].address,
                )
                seen |= {row["seq"] for row in result.rows}
            assert seen >= set(acknowledged)
            highest = max(max(low_bounds(cluster, n)) for n in cluster.nodes)
            assert highest > min(i.hlc for i in acknowledged.values())  # rounds did advance

    run(cluster, scenario, timeout_s=240)
