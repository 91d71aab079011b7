"""Replica data path: QUORUM write and read latency and throughput, epoch propagation, catch-up,
summary sizes and data reads per QUORUM read, against a bare grpcio echo baseline.

Workload (fixed):
- Data path: 3 CMS members and 3 replicas on 127.0.0.1, default durability (SQLite WAL,
  synchronous=FULL, every write fsynced before it is acknowledged), a tracked keyspace with RF 3
  (SimpleStrategy, 16 tokens per node), table ``kv(id text, payload text)`` with ~300-byte rows
  (an id of ~10 bytes and a 280-byte payload), each write a new partition. Clients are asyncio
  tasks in this one process using the SDK (``epochal.client.AsyncClient``: token-aware routing, no
  retries needed): sequential QUORUM writes then reads of written keys for the latency
  percentiles, then 16 concurrent tasks for the throughput of each. Then, in the same run and
  process, the sync client (``epochal.Client``, over its own background event loop) writes from
  16 threads for as long: ``writes_per_s_c16_sync``, and ``sync_over_async_c16`` its ratio to
  the 16 tasks' ``writes_per_s_c16`` (the sync client's overhead), which is the mean of a
  throughput run before the threads' and one after, so that drift favours neither.
- Baseline, in the same run: a bare grpc.aio unary echo in another process on loopback, 300
  bytes; sequential p50 latency and calls/s with 16 concurrent callers.
- Epoch propagation: 3 CMS members and 10 replicas; one commit (an AlterTable of an option)
  every 20 ms, 200 commits; for each, the time from the client's acknowledgement to its
  application on the last of the 10 replicas (each records when it applied every epoch, on the
  same machine's clock).
- Catch-up: one of those replicas stops following (a test hook holds its pushes and pulls)
  while 10,000 epochs are committed (tables created and dropped in a pool of 100 names), then
  follows again: the time until it has applied the last. Once with the CMS's default snapshots
  (every 100 epochs: it receives a snapshot and a short tail) and once with a CMS whose
  snapshots are off (it replays all 10,000 entries).
- Summaries: two replicas' id sets of 100,000 mutations from 3 coordinators, the range split in
  the middle of the run, 10 mutations missing on one side; bytes both sides send to find them
  (epochal.mtrack's two rounds), the median over 5 seeds.
- Data reads: replicas' ``row_data_reads`` counters over the read phase, per QUORUM read.

The cost of TLS (``_security``): the data path is measured with mutual TLS — the default
deployment, its figures under the keys above — and in plain text (``--insecure``), ``--runs``
times each (default 3; ``--quick``: 1), alternating which goes first; each figure is the median
over the runs, the plain-text one under ``<key>_plain``, with ``<key>_tls_over_plain`` for the
write and read p50 and throughputs. The rest runs once, with TLS.

Result keys: echo_p50_ms, echo_calls_per_s_c16, write_quorum_p50_ms, write_quorum_p99_ms,
read_quorum_p50_ms, read_quorum_p99_ms, writes_per_s_c16, writes_per_s_c16_sync,
sync_over_async_c16, reads_per_s_c16,
epoch_propagation_p50_ms, epoch_propagation_p99_ms, catchup_10k_epochs_s,
catchup_10k_epochs_replay_s, summary_bytes_n100k_d10, data_replicas_read_per_quorum_read;
write_quorum_p50_ms_plain, … (every data-path key also ``_plain``),
write_quorum_p50_ms_tls_over_plain, writes_per_s_c16_tls_over_plain,
read_quorum_p50_ms_tls_over_plain, reads_per_s_c16_tls_over_plain, runs.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import _report
import _security
from _echo import echo_server, measure_echo

import epochal
from epochal.client import AsyncClient
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.pki import DevPki
from epochal.mtrack import MutationId, reconcile
from epochal.tcm import AlterTable, Column, ColumnType, CreateTable, DropTable
from epochal.wire.channels import channel as open_channel
from epochal.wire.v1 import replica_pb2, replica_pb2_grpc

CONCURRENCY = 16
PAYLOAD = "p" * 280


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


# ---------------------------------------------------------------- writes and reads


async def timed(calls: int, one: object) -> list[float]:
    latencies = []
    for n in range(calls):
        started = time.perf_counter()
        await one(n)  # type: ignore[operator]
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def throughput(seconds: float, one: object) -> float:
    done = 0
    stop_at = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await one(next(counter))  # type: ignore[operator]
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done / (time.perf_counter() - started)


def sync_throughput(addresses: list[str], seconds: float, keys: list[str]) -> float:
    """Writes per second of the sync client (``epochal.Client``) from CONCURRENCY threads, as
    ``throughput`` measures the async one's from as many tasks."""
    with epochal.Client(addresses) as client:
        client.refresh()  # the table, created by the async client
        lock = threading.Lock()
        done = 0
        stop_at = time.perf_counter() + seconds

        def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                with lock:
                    key = f"k{len(keys):08d}"
                    keys.append(key)
                client.write("bench", "kv", {"id": key, "payload": PAYLOAD})
                with lock:
                    done += 1

        started = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return done / (time.perf_counter() - started)


async def measure_data_path(
    data_dir: Path, calls: int, seconds: float, pki: DevPki | None
) -> dict[str, float]:
    """The data path's figures on a cluster with mutual TLS (``pki``), or in plain text."""
    cluster = LocalCluster(data_dir, pki=pki, insecure=pki is None)
    try:
        cluster.start()
        await cluster.wait_ready()
        await cluster.wait_joined()
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("bench", replication_factor=3, tracked=True)
            await client.create_table(
                "bench", "kv", {"id": "text", "payload": "text"}, partition_key=["id"]
            )
            keys: list[str] = []

            async def write(n: int) -> None:
                key = f"k{len(keys):08d}"
                keys.append(key)
                await client.write("bench", "kv", {"id": key, "payload": PAYLOAD})

            async def read(n: int) -> None:
                key = keys[random.randrange(len(keys))]
                result = await client.read("bench", "kv", {"id": key})
                assert len(result.rows) == 1

            # Warm-up: until the replicas' SQLite write-ahead logs have grown to their working
            # size (a log still growing costs more per fsync: the file's size changes too).
            await throughput(3.0 if calls < 1000 else 10.0, write)
            writes = await timed(calls, write)
            # The async tasks before and after the sync threads: drift over the run (the
            # databases growing) favours neither.
            before_sync = await throughput(seconds, write)
            sync_writes_per_s = await asyncio.to_thread(
                sync_throughput, cluster.addresses, seconds, keys
            )
            writes_per_s = (before_sync + await throughput(seconds, write)) / 2
            await timed(200, read)
            before = await data_reads(cluster)
            reads = await timed(calls, read)
            data_replicas = (await data_reads(cluster) - before) / calls
            reads_per_s = await throughput(seconds, read)
        return {
            "write_quorum_p50_ms": statistics.median(writes),
            "write_quorum_p99_ms": percentile(writes, 0.99),
            "read_quorum_p50_ms": statistics.median(reads),
            "read_quorum_p99_ms": percentile(reads, 0.99),
            "writes_per_s_c16": writes_per_s,
            "writes_per_s_c16_sync": sync_writes_per_s,
            "sync_over_async_c16": sync_writes_per_s / writes_per_s,
            "reads_per_s_c16": reads_per_s,
            "data_replicas_read_per_quorum_read": data_replicas,
        }
    finally:
        cluster.stop()


async def data_reads(cluster: LocalCluster) -> float:
    return sum(
        [await cluster.metric(name, "epochal_row_data_reads_total") for name in cluster.nodes]
    )


# ---------------------------------------------------------------- epochs


async def applied_times(address: str, since: int) -> dict[int, int]:
    async with open_channel(address) as channel:
        stub = replica_pb2_grpc.ReplicaStub(channel)
        answer = await stub.AppliedEpochs(
            replica_pb2.AppliedEpochsRequest(since_epoch=since), timeout=30
        )
    return {e.epoch: e.applied_unix_ns for e in answer.epochs}


async def measure_propagation(cluster: LocalCluster, commits: int) -> dict[str, float]:
    async with AsyncClient(cluster.addresses[:1]) as client:
        await client.create_keyspace("prop", replication_factor=3)
        await client.create_table("prop", "t", {"id": "text"}, partition_key=["id"])
        since = client.epoch
    acknowledged: dict[int, int] = {}
    async with CMSClient(cluster.cms.addresses) as cms:
        next_at = time.perf_counter()
        for n in range(commits):
            next_at += 0.020
            change = AlterTable(keyspace="prop", name="t", options=(("n", str(n)),))
            committed = await cms.commit(change)
            acknowledged[committed.epoch] = time.time_ns()
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    last = max(acknowledged)
    await cluster.wait_for_epoch(last)
    applied = [await applied_times(r.address, since) for r in cluster.nodes.values()]
    lags = [
        max(0, max(times[epoch] for times in applied) - acked) / 1e6
        for epoch, acked in acknowledged.items()
    ]
    return {
        "epoch_propagation_p50_ms": statistics.median(lags),
        "epoch_propagation_p99_ms": percentile(lags, 0.99),
    }


async def commit_churn(cms_addresses: list[str], epochs: int, keyspace: str) -> int:
    """``epochs`` commits creating and dropping tables of a pool of 100 names; the last epoch."""
    columns = (Column("id", ColumnType.TEXT), Column("v", ColumnType.TEXT))
    clients = 16
    per_client = epochs // clients
    last = 0
    async with CMSClient(cms_addresses) as cms:

        async def churn(task: int) -> None:
            nonlocal last
            for n in range(per_client):
                name = f"t{task}_{n // 2 % 100}"
                change = (
                    CreateTable(
                        keyspace=keyspace, name=name, columns=columns, partition_key=("id",)
                    )
                    if n % 2 == 0
                    else DropTable(keyspace=keyspace, name=name)
                )
                last = max(last, (await cms.commit(change, entry_id=uuid.uuid4().hex)).epoch)

        await asyncio.gather(*(churn(t) for t in range(clients)))
    return last


async def measure_catch_up(cluster: LocalCluster, name: str, epochs: int) -> float:
    """Seconds for replica ``name`` to apply ``epochs`` epochs it missed while held back."""
    async with AsyncClient(cluster.addresses[:1]) as client:
        await client.create_keyspace("churn", replication_factor=3)
    await cluster.set_hooks(name, hold_metadata_pushes=True)
    last = await commit_churn(cluster.cms.addresses, epochs, "churn")
    held_at = (await cluster.describe(name)).epoch
    assert last - held_at >= epochs * 0.99, (last, held_at)
    released = time.time_ns()
    await cluster.set_hooks(name)
    await cluster.wait_for_epoch(last, [name], timeout_s=120)
    seen = time.time_ns()
    applied = await applied_times(cluster.nodes[name].address, last - 1)
    if last not in applied:
        # it got there by installing a snapshot at or past ``last``, which records no time per
        # epoch: the moment the wait saw it there (later by at most the wait's polling)
        print(f"  {name} reached epoch {last} by a snapshot: timed by the wait", flush=True)
        return (seen - released) / 1e9
    return (applied[last] - released) / 1e9


async def measure_epochs(data_dir: Path, commits: int, epochs: int) -> dict[str, float]:
    cluster = LocalCluster(data_dir / "ten", replicas=10, test_hooks=True)
    try:
        cluster.start()
        await cluster.wait_ready(timeout_s=180)
        await cluster.wait_joined()
        results = await measure_propagation(cluster, commits)
        results["catchup_10k_epochs_s"] = await measure_catch_up(cluster, "replica10", epochs)
    finally:
        cluster.stop()
    replay = LocalCluster(
        data_dir / "replay",
        replicas=1,
        test_hooks=True,
        cms_args=(
            "--election-timeout-ms",
            "400",
            "--heartbeat-interval-ms",
            "50",
            "--snapshot-frequency",
            "1000000",
        ),
    )
    try:
        replay.start()
        await replay.wait_ready()
        results["catchup_10k_epochs_replay_s"] = await measure_catch_up(replay, "replica1", epochs)
    finally:
        replay.stop()
    return results


# ---------------------------------------------------------------- summaries


def summary_case(seed: int, mutations: int = 100_000, missing: int = 10) -> int:
    """Bytes two replicas send to find ``missing`` ids, per half of a range split mid-run."""
    rng = random.Random(seed)
    halves: list[set[MutationId]] = [set(), set()]
    split = 0
    sequences = {(node, log): 0 for node in (1, 2, 3) for log in (1, 2, 3)}
    for n in range(mutations):
        node = rng.choice((1, 2, 3))
        token = rng.getrandbits(64) - (1 << 63)
        half = 0 if token < split else 1
        log = 1 if n < mutations // 2 else 2 + half  # sealed at the split; one log per half
        sequences[node, log] += 1
        mid = MutationId(node=node, log=log, sequence=sequences[node, log], hlc=n + 1)
        halves[half].add(mid)
    lost = set(rng.sample(sorted(halves[0] | halves[1]), missing))
    total = 0
    for ids in halves:
        found, sent, _ = reconcile(ids, ids - lost)
        assert found.only_a == ids & lost and not found.only_b
        total += sent
    return total


# ---------------------------------------------------------------- the run


RATIOS = ("write_quorum_p50_ms", "writes_per_s_c16", "read_quorum_p50_ms", "reads_per_s_c16")


async def main_async(quick: bool, runs: int) -> dict[str, float]:
    seconds = 3.0 if quick else 10.0
    calls = 300 if quick else 2000
    with echo_server() as port:
        echo_p50, echo_calls = await measure_echo(port, seconds, calls, CONCURRENCY)
    results = {"echo_p50_ms": echo_p50, "echo_calls_per_s_c16": echo_calls}
    with tempfile.TemporaryDirectory(prefix="bench-data-") as data_dir:

        async def measure(pki: DevPki | None, folder: Path) -> dict[str, float]:
            return await measure_data_path(folder, calls, seconds, pki)

        modes = await _security.both_modes(measure, Path(data_dir) / "data", runs)
        results.update(_security.medians(modes, RATIOS))
        results.update(
            await measure_epochs(Path(data_dir), 50 if quick else 200, 2_000 if quick else 10_000)
        )
    sizes = [summary_case(seed) for seed in range(2 if quick else 5)]
    results["summary_bytes_n100k_d10"] = int(statistics.median(sizes))
    return results


KEYS = (
    "echo_p50_ms",
    "echo_calls_per_s_c16",
    "write_quorum_p50_ms",
    "write_quorum_p99_ms",
    "read_quorum_p50_ms",
    "read_quorum_p99_ms",
    "writes_per_s_c16",
    "writes_per_s_c16_sync",
    "sync_over_async_c16",
    "reads_per_s_c16",
    "epoch_propagation_p50_ms",
    "epoch_propagation_p99_ms",
    "catchup_10k_epochs_s",
    "catchup_10k_epochs_replay_s",
    "summary_bytes_n100k_d10",
    "data_replicas_read_per_quorum_read",
    "write_quorum_p50_ms_plain",
    "writes_per_s_c16_plain",
    "read_quorum_p50_ms_plain",
    "reads_per_s_c16_plain",
    *(f"{key}_tls_over_plain" for key in RATIOS),
)


def main() -> int:
    parser = _report.parser(__doc__)
    _security.add_runs_flag(parser)
    args = parser.parse_args()
    figures = asyncio.run(main_async(args.quick, 1 if args.quick else args.runs))
    out = _report.write_result(
        "data_path",
        figures,
        workload="3 CMS + 3 replicas, SQLite WAL synchronous=FULL, tracked RF 3, 16 tokens per "
        "node, ~300-byte rows, a new partition per write; SDK clients in one process, "
        "sequential then 16 concurrent; propagation: 10 replicas, a commit every 20 ms x 200; "
        "catch-up: 10,000 epochs of table create/drop, with default snapshots and with none; "
        "summaries: 100,000 ids from 3 coordinators, split mid-run, 10 missing; the data path "
        "with mutual TLS and in plain text, alternating, medians over the runs",
        quick=args.quick,
    )
    _report.print_table(figures, KEYS)
    f = figures
    echo_p50, echo_c16 = f["echo_p50_ms"], f["echo_calls_per_s_c16"]
    print(
        f"\nwrite p50 / echo p50 = {f['write_quorum_p50_ms'] / echo_p50:.2f} (target <= 4); "
        f"writes/s c16 / echo calls/s c16 = {f['writes_per_s_c16'] / echo_c16:.2f} (target >= 0.2)"
        f"; propagation p99 {f['epoch_propagation_p99_ms']:.1f} ms (target <= 50); catch-up "
        f"{f['catchup_10k_epochs_s']:.2f} s (<= 1) and by replay "
        f"{f['catchup_10k_epochs_replay_s']:.2f} s (<= 3); summaries "
        f"{f['summary_bytes_n100k_d10']} bytes (<= 4096)"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
