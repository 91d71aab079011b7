"""Reconciliation: summary bytes against a Merkle-tree repair model, one replica receiving 100,000
missing mutations through the reconciler (against a bare SQLite ingest of the same rows, and with
client write latency during the delivery against idle), and replication lag under steady QUORUM
writes with one replica dropping 10% of what it receives.

Workload (fixed):
- Model figures (``_reconcile_model``; no servers): a range of N ids written by 3 coordinators
  (one log each, HLC ticking), D of them missing on one replica, for N in {10k, 100k, 1M} and D in
  {0, 10, 1000}: the bytes Epochal's summaries and sketches exchange to learn the D, the median
  of 20 trials (1 with ``--quick``); and a model of classic repair for the same divergence — a
  depth-15 Merkle tree per replica over the range (Cassandra's serialization), every mismatching
  leaf's partitions streamed (100,000 partitions per range, 100-byte mutations, a partition's
  bytes the mutations it holds times 100).
- Delivery: 3 CMS members and 3 replicas on 127.0.0.1 (4 tokens each, 12 ranges), a tracked
  keyspace (RF 3) and a table ``kv(id text, payload text)``; 100,000 mutations (5,000 with
  ``--quick``) of one row each (10-byte id, 90-byte payload), loaded straight into replica1's and
  replica2's stopped databases through their storage layer (1,000 per transaction; not
  measured); replica3 holds none. Then one reconciler (``--batch 500``, rounds every 250 ms, its
  default ``--rate`` of 20,000 mutations a second,
  deliveries only: ``--slack-ms`` an hour, so nothing is fenced or collected) brings replica3 to
  the same set: ``deliver_100k_missing_s`` runs from its start to replica3 holding every id (its
  log polled every 50 ms). ``sqlite_ingest_100k_s``: the same mutations (cells and log entries,
  the replica's statements) into a fresh database with the replica's schema, WAL,
  synchronous=FULL, 500 per transaction. Client writes: 4 writers at QUORUM through the SDK, one
  small row each, for the whole delivery, and for as long before the reconciler starts:
  ``client_write_p99_ms_during_delivery`` and ``client_write_p99_ms_idle``.
- Replication lag: after that, one reconciler with rounds every ``reconcile_interval_ms`` (500 by
  default, ``--interval-ms``; the low bound advanced every 2 s: ``--advance-interval-ms 2000
  --write-timeout-ms 500 --slack-ms 1000``), replica3 refusing 10% of the writes coordinators
  send it (test hook); 8 writers at QUORUM for 30 s (10 s with ``--quick``). The lag of a write is
  from its acknowledgement to its row on every replica (every 10 ms, each acknowledged write's row
  looked up by primary key in each replica's database until found there);
  ``replication_lag_p99_ms`` over every acknowledged write (target: at most twice the interval).
  The reconciler's defaults otherwise (``--window-ids 5000``); it starts with the delivery's
  100,000 ids and the idle and delivery client writes above its bound, and collects them first.
  The lag's p99 per 5 s of the run is printed to stderr.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import _reconcile_model as model
import _report

from epochal.client import AsyncClient, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.mtrack import MutationId, make_hlc
from epochal.replica.codec import mutation_to_body, write_draft
from epochal.replica.data_store import store_mutations
from epochal.replica.ids import wall_ms
from epochal.replica.model import Mutation
from epochal.replica.mutations import partition_of, prepare_write
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.database import transaction
from epochal.tcm import ClusterMetadata
from epochal.tcm.keys import clustering_columns, encode_key
from epochal.wire.v1 import replica_pb2 as pb

PAYLOAD = "v" * 90
LOAD_BATCH = 1_000
LOADED_LOG = 999_999  # far above the logs node 1 opens as it coordinates (from 1 up)
DELIVERY_BATCH = 500
INTERVAL_MS = 500  # the lag run's round interval (--interval-ms to change it)
DELIVER_ONLY = ("--interval-ms", "250", "--batch", str(DELIVERY_BATCH),
                "--slack-ms", "3600000")  # fmt: skip
DROP_SHARE = 0.1
POLL_S = 0.05
LAG_POLL_S = 0.01
LAG_WINDOW_S = 5
ROW = (
    "SELECT 1 FROM cells WHERE table_id = ? AND token = ? AND pkey = ? AND ckey = ? "
    "AND col = 'note'"
)


def mutations(metadata: ClusterMetadata, count: int) -> Iterator[Mutation]:
    """The missing mutations as replicas store them: ids of a log of coordinator node 1 that it
    never opens itself (``LOADED_LOG``), HLCs a minute old (well within every clock check)."""
    base = make_hlc(wall_ms() - 60_000)
    for n in range(count):
        message = pb.Mutation(
            keyspace="bench",
            table="kv",
            partition_key=[pb.Value(text=f"k{n:09d}")],
            rows=[
                pb.RowWrite(cells=[pb.CellWrite(column="payload", value=pb.Value(text=PAYLOAD))])
            ],
        )
        prepared = prepare_write(
            metadata, write_draft(message), max_value_bytes=1 << 20, max_mutation_bytes=1 << 22
        )
        yield prepared.with_id(MutationId(node=1, log=LOADED_LOG, sequence=n + 1, hlc=base + n))


def load(db: Path, batch: list[tuple[Mutation, bytes]]) -> None:
    storage = ReplicaStorage(f"sqlite:///{db}")
    try:
        for start in range(0, len(batch), LOAD_BATCH):
            storage.data.write(batch[start : start + LOAD_BATCH])
    finally:
        storage.close()


def sqlite_ingest(db: Path, rows: list[tuple[Mutation, bytes]]) -> float:
    """Seconds to store ``rows`` (cells and log entries) in a fresh database with the replica's
    schema, ``DELIVERY_BATCH`` per durable transaction."""
    ReplicaStorage(f"sqlite:///{db}").close()  # the schema, by the replica's migrations
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        started = time.perf_counter()
        for start in range(0, len(rows), DELIVERY_BATCH):
            with transaction(connection) as cursor:
                store_mutations(cursor, rows[start : start + DELIVERY_BATCH])
        elapsed = time.perf_counter() - started
        (count,) = connection.execute("SELECT count(*) FROM mutations").fetchone()
    assert count == len(rows), count
    return elapsed


def log_count(cluster: LocalCluster, name: str) -> int:
    path = cluster.data_dir / name / "replica.db"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM mutations WHERE node = 1 AND log = ?", (LOADED_LOG,)
        ).fetchone()
    return int(count)


async def write_load(
    client: AsyncClient,
    writers: int,
    stop: asyncio.Event,
    table: str,
    acked: list[tuple[float, int]],
) -> list[float]:
    """QUORUM writes of one small row each until ``stop``: the latency of each (ms); appends
    (acknowledged at, seq) to ``acked``."""
    latencies: list[float] = []
    numbers = itertools.count()

    async def writer() -> None:
        while not stop.is_set():
            n = next(numbers)
            started = time.perf_counter()
            try:
                await client.write_rows(
                    "bench",
                    table,
                    [{"id": partition(n), "seq": n, "note": "x" * 20}],
                    consistency=Consistency.QUORUM,
                )
            except EpochalError:
                continue
            done = time.perf_counter()
            latencies.append((done - started) * 1000)
            acked.append((done, n))

    await asyncio.gather(*(writer() for _ in range(writers)))
    return latencies


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


async def delivery(
    cluster: LocalCluster, client: AsyncClient, count: int, root: Path
) -> dict[str, float]:
    async with CMSClient(cluster.cms.addresses) as cms:
        await client.refresh((await cms.describe()).epoch)
    rows = [(m, mutation_to_body(m)) for m in mutations(client.metadata, count)]
    for name in ("replica1", "replica2"):
        cluster.stop_replica(name)
        load(cluster.data_dir / name / "replica.db", rows)
        cluster.start_replica(name)
    await cluster.wait_ready()
    ingest_s = statistics.median(sqlite_ingest(root / f"bare-{n}.db", rows) for n in range(3))
    del rows
    # Idle: the client load alone, for about as long as the delivery will take (measured later
    # in the same run: first a guess of 30 s full, 8 s quick).
    stop = asyncio.Event()
    load_task = asyncio.ensure_future(write_load(client, 4, stop, "notes", []))
    await asyncio.sleep(8 if count < 50_000 else 30)
    stop.set()
    idle = await load_task
    # Delivery, with the same client load.
    cluster.reconciler_args = DELIVER_ONLY
    name = cluster.add_reconciler().name
    stop = asyncio.Event()
    load_task = asyncio.ensure_future(write_load(client, 4, stop, "notes", []))
    started = time.perf_counter()
    cluster.start_reconciler(name)
    while log_count(cluster, "replica3") < count:
        if time.perf_counter() - started > 1_800:
            raise TimeoutError(f"replica3 holds {log_count(cluster, 'replica3')} of {count}")
        await asyncio.sleep(POLL_S)
    deliver_s = time.perf_counter() - started
    stop.set()
    during = await load_task
    cluster.reconcilers[name].stop()
    return {
        "missing_mutations": count,
        "deliver_100k_missing_s": deliver_s,
        "sqlite_ingest_100k_s": ingest_s,
        "client_write_p99_ms_idle": p99(idle),
        "client_write_p99_ms_during_delivery": p99(during),
    }


def steady(interval_ms: int) -> tuple[str, ...]:
    return ("--interval-ms", str(interval_ms), "--advance-interval-ms", "2000",
            "--write-timeout-ms", "500", "--slack-ms", "1000")  # fmt: skip


async def lag(
    cluster: LocalCluster, client: AsyncClient, seconds: float, interval_ms: int
) -> dict[str, float]:
    await cluster.set_hooks("replica3", drop_write_share=DROP_SHARE)
    cluster.reconciler_args = steady(interval_ms)
    name = cluster.add_reconciler().name
    cluster.start_reconciler(name)
    await asyncio.sleep(2)  # its leases taken
    stop = asyncio.Event()
    acked: list[tuple[float, int]] = []
    load_task = asyncio.ensure_future(write_load(client, 8, stop, "lagged", acked))
    present: dict[int, float] = {}  # seq -> when on every replica
    table = client.table("bench", "lagged")
    connections = [
        sqlite3.connect(
            f"file:{cluster.data_dir / n / 'replica.db'}?mode=ro", uri=True, check_same_thread=False
        )
        for n in cluster.nodes
    ]
    keys: dict[int, tuple[int, bytes, bytes]] = {}  # seq -> its row's (token, pkey, ckey)
    held: list[set[int]] = [set() for _ in connections]  # per replica, the seqs found there
    polls: list[float] = []

    def key_of(seq: int) -> tuple[int, bytes, bytes]:
        if seq not in keys:
            pkey, token = partition_of(table, (partition(seq),))
            keys[seq] = (token, pkey, encode_key(clustering_columns(table), (seq,)))
        return keys[seq]

    def everywhere(waiting: list[int]) -> set[int]:
        """Which of ``waiting`` every replica holds now: each looked up by its primary key
        where it was not found yet, so a poll costs the writes in flight, not the table."""
        began = time.perf_counter()
        for db, found in zip(connections, held, strict=True):
            for seq in waiting:
                if seq not in found and db.execute(ROW, (table.id, *key_of(seq))).fetchone():
                    found.add(seq)
        polls.append(time.perf_counter() - began)
        return {seq for seq in waiting if all(seq in found for found in held)}

    started = time.perf_counter()
    waiting: set[int] = set()
    seen_acks = 0
    try:
        while True:
            if time.perf_counter() - started > seconds:
                stop.set()
            waiting.update(seq for _, seq in acked[seen_acks:])
            seen_acks = len(acked)
            found = await asyncio.to_thread(everywhere, sorted(waiting))
            now = time.perf_counter()
            for seq in found:
                present[seq] = now
            waiting -= found
            if stop.is_set() and load_task.done() and all(s in present for _, s in acked):
                break
            if now - started > seconds + 60:
                raise TimeoutError("acknowledged writes never reached every replica")
            await asyncio.sleep(LAG_POLL_S)
    finally:
        for db in connections:
            db.close()
    await load_task
    lags = [max(present[seq] - at, 0.0) * 1000 for at, seq in acked]
    windows: dict[int, list[float]] = {}
    for (at, _), one in zip(acked, lags, strict=True):
        windows.setdefault(int((at - started) // LAG_WINDOW_S), []).append(one)
    trend = " ".join(f"{p99(w):.0f}" for _, w in sorted(windows.items()))
    print(  # where in the run the lag was (a stall shows as one window), and what polling cost
        f"lag p99 per {LAG_WINDOW_S} s window (ms): {trend}; polls {len(polls)}, "
        f"p99 {p99(polls) * 1000:.1f} ms",
        file=sys.stderr,
    )
    await cluster.set_hooks("replica3", drop_write_share=0.0)
    return {
        "replication_lag_p99_ms": p99(lags),
        "replication_lag_p50_ms": statistics.median(lags),
        "reconcile_interval_ms": interval_ms,
        "lag_writes": len(lags),
    }


def partition(seq: int) -> str:
    return f"w{seq % 64}"


async def cluster_figures(count: int, lag_seconds: float, interval_ms: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-reconcile-") as tmp:
        root = Path(tmp)
        cluster = LocalCluster(root / "cluster", test_hooks=True, num_tokens=4)
        try:
            cluster.start()
            await cluster.wait_ready()
            await cluster.wait_joined()
            async with AsyncClient(cluster.addresses) as client:
                await client.create_keyspace("bench", replication_factor=3, tracked=True)
                await client.create_table(
                    "bench", "kv", {"id": "text", "payload": "text"}, partition_key=["id"]
                )
                for table in ("notes", "lagged"):
                    await client.create_table(
                        "bench",
                        table,
                        {"id": "text", "seq": "int", "note": "text"},
                        partition_key=["id"],
                        clustering_key=["seq"],
                    )
                figures = await delivery(cluster, client, count, root)
                figures.update(await lag(cluster, client, lag_seconds, interval_ms))
        finally:
            cluster.stop()
            cluster.close()
    return figures


KEYS_CLUSTER = (
    "missing_mutations",
    "deliver_100k_missing_s",
    "sqlite_ingest_100k_s",
    "client_write_p99_ms_idle",
    "client_write_p99_ms_during_delivery",
    "replication_lag_p50_ms",
    "replication_lag_p99_ms",
    "reconcile_interval_ms",
    "lag_writes",
)


def main() -> int:
    parser = _report.parser(__doc__)
    parser.add_argument(
        "--interval-ms", type=int, default=INTERVAL_MS, help="the lag run's round interval"
    )
    args = parser.parse_args()
    trials = 1 if args.quick else model.MIN_FULL_TRIALS
    count = 5_000 if args.quick else 100_000
    figures: dict[str, float] = dict(
        asyncio.run(cluster_figures(count, 10 if args.quick else 30, args.interval_ms))
    )
    started = time.perf_counter()
    figures.update(model.model_figures(quick=args.quick, trials=trials))
    print(f"model figures in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    workload = model.Workload()
    out = _report.write_result(
        "reconcile",
        {**figures, "model_trials": trials, "model_workload": workload.as_dict()},
        workload=(__doc__ or "").split("Workload (fixed):")[1].strip(),
        quick=args.quick,
    )
    model_keys = [
        f"{kind}_n{n}_d{d}"
        for kind in ("summary_bytes", "merkle_repair_bytes")
        for n in model.SIZES
        for d in model.DIFFERENCES
    ]
    _report.print_table(figures, [*model_keys, *KEYS_CLUSTER])
    worst = max(figures[f"summary_bytes_n{n}_d10"] for n in model.SIZES)
    print(
        f"\nworst summary_bytes_n*_d10 {worst:,.0f} (target <= 4,096); delivery "
        f"{figures['deliver_100k_missing_s']:.1f} s for {count:,} (target <= 30 s for 100k), "
        f"{figures['deliver_100k_missing_s'] / figures['sqlite_ingest_100k_s']:.1f}x the bare "
        f"SQLite ingest; client p99 {figures['client_write_p99_ms_during_delivery']:.1f} ms "
        f"during vs {figures['client_write_p99_ms_idle']:.1f} ms idle; lag p99 "
        f"{figures['replication_lag_p99_ms']:.0f} ms (target <= "
        f"{2 * figures['reconcile_interval_ms']:.0f} ms)"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
