"""The SDK against real clusters: the sync client from 32 threads with a coordinator SIGSTOPped,
a stopped replica suspected until it answers again, fork safety, an ALL write's error naming
the replica that did not answer, a local datacenter's coordinators counted at the replicas, and
a custom retry policy's attempts."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import epochal
from epochal import Consistency, ExecutionProfile, TimedOut, Unavailable
from epochal.devcluster.cluster import LocalCluster
from epochal.policies import FailedAttempt, RetryDecision, RetryPolicy
from epochal.tcm import ReplicationParams
from tests.harness import EVENTS, block_until, paused, start_ring

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def events_cluster(
    tmp_path: Path, *, locations: tuple[tuple[str, str], ...] = (), **client: object
) -> Iterator[tuple[LocalCluster, epochal.Client]]:
    """A three-replica ring (or one per location) with the tracked table ``tks.events``
    (RF 3, or 2 per datacenter), and a sync client of it; everything stopped afterwards."""
    cluster = LocalCluster(tmp_path / "cluster", replicas=len(locations) or 3, locations=locations)
    try:
        asyncio.run(asyncio.wait_for(start_ring(cluster, num_tokens=4), 120))
        datacenters = sorted({dc for dc, _ in locations})
        replication = (
            ReplicationParams.network_topology(dict.fromkeys(datacenters, 2))
            if datacenters
            else ReplicationParams.simple(3)
        )
        with epochal.Client(cluster.addresses, **client) as sdk:  # type: ignore[arg-type]
            sdk.create_keyspace("tks", replication=replication, tracked=True)
            sdk.create_table("tks", "events", EVENTS, partition_key=["id"], clustering_key=["seq"])
            yield cluster, sdk
    finally:
        cluster.close()


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98]


# ---------------------------------------------------------------------- threads


def test_the_sync_client_serves_32_threads_and_a_stopped_coordinator_holds_up_only_its_own(
    tmp_path: Path,
) -> None:
    with events_cluster(tmp_path) as (cluster, client):
        stopped = cluster.nodes["replica3"]
        acknowledged: dict[tuple[str, int], str] = {}
        numbers = itertools.count()

        def writes(count: int) -> list[float]:
            latencies = []
            for _ in range(count):
                n = next(numbers)
                row = {"id": f"p{n % 40}", "seq": n, "payload": f"v{n}"}
                began = time.monotonic()
                client.write("tks", "events", row)
                latencies.append(time.monotonic() - began)
                acknowledged[row["id"], n] = row["payload"]  # type: ignore[index]
            return latencies

        def in_threads(threads: int, count: int) -> list[float]:
            results: list[list[float]] = [[] for _ in range(threads)]

            def one(k: int) -> None:
                results[k] = writes(count)

            workers = [threading.Thread(target=one, args=(k,)) for k in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            assert all(len(r) == count for r in results), "a writer thread failed"
            return [latency for r in results for latency in r]

        in_threads(28, 10)  # warm-up: connections, SQLite's WAL, the client's metadata
        baseline = in_threads(28, 40)
        with paused(cluster, "replica3"):
            # Four threads call the stopped coordinator, pinned to it, and wait.
            waiting: list[BaseException | None] = []

            def pinned(k: int) -> None:
                try:
                    client.write(
                        "tks",
                        "events",
                        {"id": f"pinned{k}", "seq": k, "payload": "x"},
                        coordinator=stopped.address,
                        timeout_s=120,
                    )
                    waiting.append(None)
                except BaseException as error:
                    waiting.append(error)

            stuck = [threading.Thread(target=pinned, args=(k,)) for k in range(4)]
            for thread in stuck:
                thread.start()
            block_until(
                "the client suspects the stopped replica",
                lambda: stopped.address in client.suspected(),
                timeout_s=30,
            )
            during = in_threads(28, 40)
            assert waiting == [] and all(t.is_alive() for t in stuck), waiting
        for thread in stuck:
            thread.join(timeout=60)
        assert waiting == [None] * 4, waiting  # answered once continued
        ratio = p99(during) / p99(baseline)
        print(
            f"28 threads' write p99: {p99(baseline) * 1000:.1f} ms with every replica up, "
            f"{p99(during) * 1000:.1f} ms while 4 threads wait on a SIGSTOPped coordinator "
            f"(x{ratio:.2f})"
        )
        assert ratio <= 3.0
        for (partition, seq), value in sorted(acknowledged.items()):
            rows = client.read(
                "tks",
                "events",
                {"id": partition},
                start={"seq": seq},
                end={"seq": seq},
                consistency="QUORUM",
            ).rows
            assert [row["payload"] for row in rows] == [value], (partition, seq)


def test_a_replica_that_stops_answering_stays_suspected_until_a_probe_hears_it_again(
    tmp_path: Path,
) -> None:
    with events_cluster(tmp_path) as (cluster, client):
        stopped = cluster.nodes["replica3"]
        retried: list[int] = []
        with paused(cluster, "replica3"):
            deadline = time.monotonic() + 8.0  # longer than the 5 s attempt timeout

            def writer(k: int) -> None:
                n = 0
                while time.monotonic() < deadline:
                    n += 1
                    written = client.write("tks", "events", {"id": f"w{k}", "seq": n})
                    retried.append(written.attempts - 1)

            threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert stopped.address in client.suspected()
        # Each thread met the silent coordinator at most once: after that it was tried last.
        print(f"{len(retried)} writes, {sum(retried)} retried after the stopped coordinator")
        assert len(retried) > 8 and sum(retried) <= 8, retried
        block_until(
            "a probe hears the continued replica",
            lambda: stopped.address not in client.suspected(),
            timeout_s=30,
        )


# ---------------------------------------------------------------------- fork


def test_a_client_used_before_a_fork_refuses_clearly_in_the_child_and_goes_on_in_the_parent(
    tmp_path: Path,
) -> None:
    with events_cluster(tmp_path) as (_, client):
        client.write("tks", "events", {"id": "f", "seq": 1, "payload": "before"})
        readable, writable = os.pipe()
        child = os.fork()
        if child == 0:  # the child: report what the client says, and leave at once
            try:
                client.read("tks", "events", {"id": "f"})
                said = "answered"
            except BaseException as error:
                said = f"{type(error).__name__}|{getattr(error, 'rule', '')}|{error}"
            os.write(writable, said.encode())
            os._exit(0)
        os.close(writable)
        _, status = os.waitpid(child, 0)
        with os.fdopen(readable) as pipe:
            kind, rule, message = pipe.read().split("|", 2)
        assert os.waitstatus_to_exitcode(status) == 0
        assert (kind, rule) == ("InvalidRequest", "forked"), message
        assert "create the client after the fork" in message
        assert client.read("tks", "events", {"id": "f"}).rows[0]["payload"] == "before"


# ---------------------------------------------------------------------- errors


def test_an_all_write_names_the_replica_that_did_not_answer_and_a_quorum_write_succeeds(
    tmp_path: Path,
) -> None:
    with events_cluster(tmp_path, timeout_s=15) as (cluster, client):
        stopped = cluster.nodes["replica3"]
        others = {cluster.nodes[n].node_id for n in ("replica1", "replica2")}
        with paused(cluster, "replica3"):
            assert client.write("tks", "events", {"id": "q", "seq": 1}, consistency="quorum")
            with pytest.raises((TimedOut, Unavailable)) as failed:
                client.write(
                    "tks",
                    "events",
                    {"id": "all", "seq": 1},
                    consistency=Consistency.ALL,
                    coordinator=cluster.nodes["replica1"].address,
                )
        error = failed.value
        outcome = error.replicas
        assert outcome is not None, error
        assert outcome.consistency == "ALL" and outcome.required == 3
        assert [node for node, _ in outcome.not_answering] == [stopped.node_id], outcome
        assert set(outcome.acknowledged) == others, outcome
        assert outcome.refused == (), outcome
        assert stopped.node_id in error.message.split("[")[0]  # the last group comes first
        assert len(error.attempts) >= 2
        for attempt in error.attempts:  # every attempt saw the same: no refusal hid it
            assert attempt.error.replicas is not None, attempt
            assert [n for n, _ in attempt.error.replicas.not_answering] == [stopped.node_id]


# ---------------------------------------------------------------------- datacenters


def coordinated(cluster: LocalCluster, name: str) -> float:
    metrics = asyncio.run(cluster.describe(name)).metrics
    return sum(
        value
        for key, value in metrics.items()
        if key.startswith(
            ("epochal_write_latency_seconds_count", "epochal_read_latency_seconds_count")
        )
    )


def test_with_a_local_datacenter_every_call_is_coordinated_there(tmp_path: Path) -> None:
    locations = (("dc1", "r1"), ("dc1", "r2"), ("dc2", "r1"), ("dc2", "r2"))
    with events_cluster(tmp_path, locations=locations, local_dc="dc1") as (cluster, client):
        names = list(cluster.nodes)
        before = {name: coordinated(cluster, name) for name in names}
        for n in range(500):
            client.write("tks", "events", {"id": f"k{n}", "seq": n}, consistency="LOCAL_QUORUM")
            client.read("tks", "events", {"id": f"k{n}"}, consistency="local_quorum")
        counted = {name: coordinated(cluster, name) - before[name] for name in names}
        print(f"calls coordinated per replica: {counted}")
        assert counted["replica3"] == counted["replica4"] == 0, counted
        assert counted["replica1"] + counted["replica2"] == 1000, counted
        assert min(counted["replica1"], counted["replica2"]) > 0, counted  # both take turns


# ---------------------------------------------------------------------- retry policies


class Counting(RetryPolicy):
    """Retries ``times`` times with the same id; records every attempt it was shown."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.shown: list[FailedAttempt] = []
        self._lock = threading.Lock()

    def on_failure(self, failed: FailedAttempt) -> RetryDecision:
        with self._lock:
            self.shown.append(failed)
        return RetryDecision.same_id(0.01) if failed.number <= self.times else RetryDecision.stop()


def test_a_custom_retry_policy_sees_each_attempt_and_is_obeyed(tmp_path: Path) -> None:
    twice, never = Counting(2), Counting(0)
    profiles = {
        "twice": ExecutionProfile(timeout_s=30, retry_policy=twice),
        "never": ExecutionProfile(timeout_s=30, retry_policy=never),
    }
    with (
        events_cluster(tmp_path, profiles=profiles) as (cluster, client),
        paused(cluster, "replica3"),
    ):
        for name, policy, attempts in (("twice", twice, 3), ("never", never, 1)):
            with pytest.raises((TimedOut, Unavailable)) as failed:
                client.write(
                    "tks", "events", {"id": name, "seq": 1}, consistency="ALL", profile=name
                )
            assert [f.number for f in policy.shown] == list(range(1, attempts + 1)), failed.value
            assert len(failed.value.attempts) == attempts
            reasons = [f.reason for f in policy.shown]
            # The coordinator timed out waiting for replica3 (or was replica3, and did not
            # answer the client at all).
            assert all(r.startswith(("UNAVAILABLE/", "DEADLINE_EXCEEDED/")) for r in reasons), (
                reasons
            )
            assert [len(f.earlier) for f in policy.shown] == list(range(attempts))
