"""Two reconcilers as real processes sharing the ranges of a tracked keyspace through leases, with
3 CMS members and 3 replicas on 127.0.0.1, while QUORUM writes go on.

Proves: no range is worked by both at once — asserted from the rounds both persisted (no two
rounds that ended in success on intersecting ranges overlap in time, each under the token of the
grant in force) and from the replicas' persisted lease tokens (each the newest grant's); a
reconciler SIGSTOPped past its lease is replaced — the other takes its ranges by new grants and
claims the replicas — and after SIGCONT everything it tries is refused (the replicas count
refused lease tokens) and it steps back (it holds nothing, and its rounds after the pause ended
in a refusal); a reconciler SIGKILLed has its ranges taken by the other.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from epochal.client import AsyncClient
from epochal.devcluster.cluster import LocalCluster
from epochal.tcm import ClusterMetadata
from epochal.tcm.leases import LeaseGrant
from epochal.tcm.tokens import TokenRange
from tests.harness import run, start_ring, until
from tests.harness.ring import QuorumWriters, create_events, latest, replica_db

pytestmark = pytest.mark.integration

LEASE_MS = 2_000
FLAGS = (
    "--interval-ms", "200", "--advance-interval-ms", "400",
    "--write-timeout-ms", "500", "--slack-ms", "500",
    "--lease-ms", str(LEASE_MS), "--lease-margin-ms", "500",
)  # fmt: skip
SUCCESS = ("advanced", "delivered")
NUM_TOKENS = 4  # 3 replicas: 12 ranges


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        yield cluster
    finally:
        for reconciler in cluster.reconcilers.values():
            if reconciler.pid is not None and reconciler.running:
                os.kill(reconciler.pid, signal.SIGCONT)  # a stopped one could not stop
        cluster.stop()
        cluster.close()


def rounds(cluster: LocalCluster, name: str) -> list[tuple[TokenRange, int, int, int, int, str]]:
    """(range, lease token, started, acted until, ended (Unix ms), outcome) of every round
    ``name`` recorded; "acted until": when the replicas last accepted one of its calls."""
    path = cluster.data_dir / name / "reconciler.db"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT range_left, range_right, lease_token, started_unix_ms, acted_unix_ms, "
            "ended_unix_ms, outcome FROM rounds WHERE keyspace = 'tks'"
        ).fetchall()
    return [(TokenRange(left, right), *rest) for left, right, *rest in rows]


def replica_tokens(cluster: LocalCluster, name: str) -> dict[TokenRange, int]:
    with replica_db(cluster, name) as db:
        rows = db.execute(
            "SELECT range_left, range_right, mark FROM reconcile_marks "
            "WHERE keyspace = 'tks' AND kind = 'lease'"
        ).fetchall()
    return {TokenRange(left, right): mark for left, right, mark in rows}


def grants(metadata: ClusterMetadata) -> list[LeaseGrant]:
    return [g for g in metadata.reconcile_leases if g.keyspace == "tks"]


def ranges_of(metadata: ClusterMetadata) -> list[TokenRange]:
    placement = metadata.placements[metadata.keyspaces["tks"].replication]
    return [token_range for token_range, _, _ in placement.ranges()]


def owners(metadata: ClusterMetadata) -> dict[TokenRange, str]:
    found = {}
    for token_range in ranges_of(metadata):
        grant = metadata.lease_of("tks", token_range)
        found[token_range] = grant.holder if grant is not None else ""
    return found


def assert_never_both_at_once(cluster: LocalCluster) -> int:
    """No two rounds of different reconcilers on intersecting ranges worked at once: from a
    round's start to the last call of it a replica accepted (every round that acted, whatever
    its outcome), under different tokens; how many rounds that acted were compared."""
    worked = {name: [r for r in rounds(cluster, name) if r[3]] for name in cluster.reconcilers}
    for a, b in itertools.combinations(sorted(worked), 2):
        for range_a, token_a, start_a, acted_a, _, _ in worked[a]:
            for range_b, token_b, start_b, acted_b, _, _ in worked[b]:
                if range_a.intersects(range_b):
                    assert token_a != token_b, (range_a, range_b, token_a)
                    assert acted_a < start_b or acted_b < start_a, (
                        f"{a} worked {range_a} under token {token_a} in [{start_a}, {acted_a}] "
                        f"and {b} worked {range_b} under token {token_b} in [{start_b}, {acted_b}]"
                    )
    return sum(len(v) for v in worked.values())


def replicas_hold_the_newest_tokens(cluster: LocalCluster, metadata: ClusterMetadata) -> bool:
    """Every replica persisted, with a fence or a bound, the token of the newest grant of every
    range (and none newer)."""
    for name in cluster.nodes:
        tokens = replica_tokens(cluster, name)
        for token_range in ranges_of(metadata):
            grant = metadata.lease_of("tks", token_range)
            assert grant is not None
            seen = max((t for r, t in tokens.items() if r.intersects(token_range)), default=0)
            assert seen <= grant.epoch, (name, token_range, seen, grant)
            if seen != grant.epoch:
                return False
    return True


def test_two_reconcilers_share_ranges_a_paused_one_is_refused_and_a_killed_one_replaced(
    cluster: LocalCluster,
) -> None:
    async def scenario() -> None:
        await start_ring(cluster, num_tokens=NUM_TOKENS)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await create_events(client, "tks")
            writers = QuorumWriters(client, ["tks"])
            writers.start()
            metadata = await latest(cluster, client)
            half = len(ranges_of(metadata)) // 2
            cluster.reconciler_args = (*FLAGS, "--max-ranges", str(half))
            for _ in range(2):
                cluster.start_reconciler(cluster.add_reconciler().name)

            async def shared() -> bool:
                found = owners(await latest(cluster, client))
                return sorted(set(found.values())) == ["reconciler1", "reconciler2"]

            await until("both reconcilers hold ranges", shared, 30)
            await writers.more(50)
            await until(
                "both reconcilers ran successful rounds",
                lambda: all(
                    any(r[5] in SUCCESS for r in rounds(cluster, n)) for n in cluster.reconcilers
                ),
                30,
            )

            # SIGSTOP reconciler1 past its lease: reconciler2 takes its ranges.
            first = cluster.reconcilers["reconciler1"]
            assert first.pid is not None
            os.kill(first.pid, signal.SIGSTOP)
            paused_ms = time.time_ns() // 1_000_000

            async def taken_over() -> bool:
                found = owners(await latest(cluster, client))
                return set(found.values()) == {"reconciler2"}

            await until("reconciler2 took every range", taken_over, 30)
            taken_ms = time.time_ns() // 1_000_000
            await writers.more(50)
            await until(
                "reconciler2 ran successful rounds on its new ranges",
                lambda: (
                    sum(
                        1
                        for r in rounds(cluster, "reconciler2")
                        if r[5] in SUCCESS and r[2] > taken_ms
                    )
                    >= len(ranges_of(metadata))
                ),
                30,
            )
            refused_before = sum(
                [
                    await cluster.metric(n, "epochal_reconcile_lease_refusals_total")
                    for n in cluster.nodes
                ]
            )
            os.kill(first.pid, signal.SIGCONT)
            resumed_ms = time.time_ns() // 1_000_000

            async def stepped_back() -> bool:
                after = [r for r in rounds(cluster, "reconciler1") if r[4] >= resumed_ms]
                return bool(after)

            await until("reconciler1 ended the round it was in", stepped_back, 30)
            await writers.more(50)
            after = [r for r in rounds(cluster, "reconciler1") if r[4] >= resumed_ms]
            assert all(r[5] not in SUCCESS for r in after), after  # nothing it tried held
            assert all(r[3] < paused_ms + LEASE_MS for r in after), after  # nor acted after
            assert owners(await latest(cluster, client)) == dict.fromkeys(
                ranges_of(metadata), "reconciler2"
            )
            refused = sum(
                [
                    await cluster.metric(n, "epochal_reconcile_lease_refusals_total")
                    for n in cluster.nodes
                ]
            )
            print(
                f"paused at {paused_ms}, taken over after {taken_ms - paused_ms} ms; after the "
                f"resume reconciler1 ended {len(after)} rounds ({sorted({r[5] for r in after})}); "
                f"replicas refused {refused - refused_before} calls for a stale token"
            )
            assert refused > refused_before  # its calls reached the replicas and were refused

            # SIGKILL reconciler2: reconciler1 takes every range.
            cluster.reconcilers["reconciler2"].kill()
            killed_ms = time.time_ns() // 1_000_000

            async def replaced() -> bool:
                found = owners(await latest(cluster, client))
                return set(found.values()) == {"reconciler1"}

            await until("reconciler1 took every range back", replaced, 30)
            await until(
                "reconciler1 ran successful rounds again",
                lambda: any(
                    r[5] in SUCCESS and r[2] > killed_ms for r in rounds(cluster, "reconciler1")
                ),
                30,
            )
            metadata = await latest(cluster, client)
            await until(
                "every replica persisted the newest grant's token of every range",
                lambda: replicas_hold_the_newest_tokens(cluster, metadata),
                30,
            )
            await writers.stop()
            compared = assert_never_both_at_once(cluster)
            assert compared >= 2 * len(ranges_of(metadata))
            print(f"{compared} successful rounds compared; grants {len(grants(metadata))}")

    run(cluster, scenario, timeout_s=240)
