"""Streaming: a joining replica streams ~200 MB of 1 KiB rows from another, against the same rows
ingested into a bare SQLite database and the same bytes sent over a bare grpc.aio server
stream, all in one run; and the time of a bootstrap that receives 100,000 rows.

Workload (fixed; MB is 2**20 bytes):
- Rows: table ``kv(id text, payload text)`` in an untracked keyspace, one row per partition, a
  10-byte id and a 1,014-byte payload: 1 KiB of row data per row, stored as two cells (the row
  marker and the payload). 200 MB is 204,800 rows.
- Streaming: 3 CMS members and one replica on 127.0.0.1 that owns the whole ring (16 tokens);
  the keyspace has RF 2, so a second node, when it joins, takes a copy of every range. The rows
  are loaded straight into the stopped first replica's database through its storage layer
  (``DataStore.write``, 1,000 mutations per transaction; not measured). The second replica
  then bootstraps (16 tokens): after the START barrier it pulls every range from the first
  (``--stream-sources strict``), each table range in messages of ~64 KiB (the default
  ``--stream-message-bytes``), each message stored in one durable transaction (SQLite WAL,
  synchronous=FULL) with its stream cursor. Throughput is the row data (rows x 1 KiB) over the
  streaming phase: from the first streamed byte the receiver reports to the last (its Status
  polled every 20 ms).
- Bare SQLite ingest: the same cells (same rows, timestamps and writers), in the order a stream
  sends them (by key), upserted with the replica's statement into a fresh database holding the
  replica's ``cells`` table (same primary key, WITHOUT ROWID), WAL, synchronous=FULL, one
  transaction per ~64 KiB by the stream's own size accounting. The median of 3 runs. (In key
  order, not in the rows' order: inserts in random token order touch more pages per
  transaction and would flatter the stream.)
- Bare gRPC stream: a grpc.aio server in another process sends as many bytes in 64 KiB messages
  over one server stream; the client counts them. The median of 3 runs.
- Bootstrap of 100,000 rows: the same setup with 100,000 rows; the time from the Bootstrap call
  to its answer (PREPARE, three barriers, streaming, MID, FINISH committed).

Result keys: stream_mb_per_s, sqlite_ingest_mb_per_s, raw_grpc_stream_mb_per_s, stream_ratio,
bootstrap_100k_rows_s (plus rows_streamed and stream_wire_mb_per_s: the bytes of the messages,
framing included, over the same phase).
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import astuple
from pathlib import Path
from typing import Any

import _report
from _echo import echo_server, measure_stream
from sqlalchemy import create_engine

from epochal.client import AsyncClient
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.mtrack import MutationId
from epochal.replica.codec import write_draft
from epochal.replica.data_store import UPSERT_CELL
from epochal.replica.model import Mutation
from epochal.replica.mutations import prepare_write
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_source import CELL_OVERHEAD_BYTES
from epochal.replica.tables import cells as cells_table
from epochal.tcm import ClusterMetadata
from epochal.wire.v1 import replica_pb2 as pb

ROW_BYTES = 1024
ID_FORMAT = "k{:09d}"  # 10 bytes
PAYLOAD = "v" * (ROW_BYTES - 10)
MESSAGE_BYTES = 64 << 10
LOAD_BATCH = 1_000
HLC_BASE = 1 << 40
POLL_S = 0.02
BASELINE_RUNS = 3


# --------------------------------------------------------------------------- the rows


def rows_for(megabytes: float) -> int:
    return int(megabytes * 2**20) // ROW_BYTES


def mutations(metadata: ClusterMetadata, rows: int) -> Iterator[Mutation]:
    """The benchmark's rows as the replica stores them, through its own write preparation."""
    for n in range(rows):
        message = pb.Mutation(
            keyspace="bench",
            table="kv",
            partition_key=[pb.Value(text=ID_FORMAT.format(n))],
            rows=[
                pb.RowWrite(cells=[pb.CellWrite(column="payload", value=pb.Value(text=PAYLOAD))])
            ],
        )
        prepared = prepare_write(
            metadata, write_draft(message), max_value_bytes=1 << 20, max_mutation_bytes=1 << 22
        )
        yield prepared.with_id(MutationId(node=1, log=1, sequence=n + 1, hlc=HLC_BASE + n))


def load(db: Path, metadata: ClusterMetadata, rows: int) -> None:
    """Write the rows into a stopped replica's database, ``LOAD_BATCH`` per transaction."""
    storage = ReplicaStorage(f"sqlite:///{db}")
    try:
        batch: list[tuple[Mutation, bytes]] = []
        for mutation in mutations(metadata, rows):
            batch.append((mutation, b""))  # untracked: no log entry, no body
            if len(batch) == LOAD_BATCH:
                storage.data.write(batch)
                batch.clear()
        if batch:
            storage.data.write(batch)
    finally:
        storage.close()


# --------------------------------------------------------------------------- baselines


def cell_batches(metadata: ClusterMetadata, rows: int) -> list[list[tuple[Any, ...]]]:
    """The rows' cells as ``cells`` rows in the order a stream sends them (by key: token,
    partition key, clustering, column), in batches of ~64 KiB by the stream's accounting."""
    cells = sorted(
        (m.table_id, m.token, m.partition_key, *astuple(c))
        for m in mutations(metadata, rows)
        for c in m.cells()
    )
    batches: list[list[tuple[Any, ...]]] = []
    batch: list[tuple[Any, ...]] = []
    size = 0
    for cell in cells:
        _, _, pkey, ckey, column, value, *_ = cell
        batch.append(cell)
        size += len(pkey) + len(ckey) + len(column) + len(value or b"") + CELL_OVERHEAD_BYTES
        if size >= MESSAGE_BYTES:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


def sqlite_ingest(db: Path, batches: Sequence[list[tuple[Any, ...]]]) -> float:
    """Seconds to upsert the batches, one durable transaction each, into a fresh database."""
    engine = create_engine(f"sqlite:///{db}")
    cells_table.create(engine)
    engine.dispose()
    connection = sqlite3.connect(db)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        started = time.perf_counter()
        for batch in batches:
            connection.executemany(UPSERT_CELL, batch)
            connection.commit()
        elapsed = time.perf_counter() - started
        (count,) = connection.execute("SELECT count(*) FROM cells").fetchone()
    finally:
        connection.close()
    assert count == sum(len(b) for b in batches), count
    return elapsed


# --------------------------------------------------------------------------- the cluster


@asynccontextmanager
async def loaded_cluster(
    data_dir: Path, rows: int
) -> AsyncIterator[tuple[LocalCluster, ClusterMetadata]]:
    """3 CMS members, replica1 owning the ring with ``rows`` rows in ``bench.kv`` (RF 2), and
    replica2 started and registered, not yet joined; with the metadata the rows were made with.
    Every process is killed on the way out."""
    cluster = LocalCluster(data_dir, replicas=1)
    try:
        cluster.start()
        await cluster.wait_ready()
        await cluster.wait_joined()
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("bench", replication_factor=2)
            await client.create_table(
                "bench", "kv", {"id": "text", "payload": "text"}, partition_key=["id"]
            )
            async with CMSClient(cluster.cms.addresses) as cms:
                await client.refresh((await cms.describe()).epoch)
            metadata = client.metadata
        cluster.stop_replica("replica1")
        load(data_dir / "replica1" / "replica.db", metadata, rows)
        cluster.start_replica("replica1")
        joining = cluster.add_replica(auto_join=False).name
        cluster.start_replica(joining)
        await cluster.wait_ready()
        yield cluster, metadata
    finally:
        cluster.close()


async def bootstrap(cluster: LocalCluster, rows: int) -> tuple[float, float | None, int]:
    """Bootstrap replica2; answers (seconds from call to answer, seconds of the streaming phase
    or None when it fell between two polls, bytes streamed)."""
    started = time.perf_counter()
    join = asyncio.ensure_future(cluster.bootstrap("replica2", timeout_s=3_600.0))
    first: float | None = None  # when streamed bytes were first seen
    last = (0.0, 0)  # when the streamed bytes last changed, and to what
    while not join.done():
        status = await cluster.status("replica2")
        now = time.perf_counter()
        if status.streamed_bytes and first is None:
            first = now
        if status.streamed_bytes != last[1]:
            last = (now, status.streamed_bytes)
        await asyncio.wait({join}, timeout=POLL_S)
    status = await join
    elapsed = time.perf_counter() - started
    if status.state != "finished":
        raise RuntimeError(f"the bootstrap did not finish: {status}")
    if status.streamed_cells != 2 * rows:
        raise RuntimeError(f"streamed {status.streamed_cells} cells, expected {2 * rows}")
    if first is None or last[1] != status.streamed_bytes or last[0] == first:
        return elapsed, None, status.streamed_bytes  # too short to see
    return elapsed, last[0] - first, status.streamed_bytes


# --------------------------------------------------------------------------- the run


async def main_async(megabytes: float, bootstrap_rows: int, runs: int) -> dict[str, float]:
    rows = rows_for(megabytes)
    data_mb = rows * ROW_BYTES / 2**20
    with tempfile.TemporaryDirectory(prefix="bench-streaming-") as tmp:
        root = Path(tmp)
        async with loaded_cluster(root / "stream", rows) as (cluster, metadata):
            _, stream_s, wire_bytes = await bootstrap(cluster, rows)
        if stream_s is None:
            raise RuntimeError(f"streaming {rows} rows took less than two polls: stream more")
        # The same cells, by the same table id and tokens, for the bare SQLite ingest.
        batches = cell_batches(metadata, rows)
        ingest = [sqlite_ingest(root / f"bare-{n}.db", batches) for n in range(runs)]
        del batches
        with echo_server() as port:
            grpc_mb_per_s = [
                await measure_stream(port, rows * ROW_BYTES, MESSAGE_BYTES) for _ in range(runs)
            ]
        async with loaded_cluster(root / "bootstrap", bootstrap_rows) as (cluster, _):
            total_s, _, _ = await bootstrap(cluster, bootstrap_rows)
    stream = data_mb / stream_s
    sqlite = data_mb / statistics.median(ingest)
    return {
        "rows_streamed": rows,
        "stream_mb_per_s": stream,
        "stream_wire_mb_per_s": wire_bytes / 2**20 / stream_s,
        "sqlite_ingest_mb_per_s": sqlite,
        "raw_grpc_stream_mb_per_s": statistics.median(grpc_mb_per_s),
        "stream_ratio": stream / sqlite,
        "bootstrap_100k_rows_s": total_s,
    }


KEYS = (
    "rows_streamed",
    "stream_mb_per_s",
    "stream_wire_mb_per_s",
    "sqlite_ingest_mb_per_s",
    "raw_grpc_stream_mb_per_s",
    "stream_ratio",
    "bootstrap_100k_rows_s",
)


def main() -> int:
    parser = _report.parser(__doc__)
    parser.add_argument("--mb", type=float, default=200.0, help="MB of rows to stream")
    parser.add_argument(
        "--bootstrap-rows", type=int, default=100_000, help="rows the timed bootstrap receives"
    )
    args = parser.parse_args()
    megabytes = 20.0 if args.quick else args.mb
    bootstrap_rows = 10_000 if args.quick else args.bootstrap_rows
    runs = 1 if args.quick else BASELINE_RUNS
    figures = asyncio.run(main_async(megabytes, bootstrap_rows, runs))
    out = _report.write_result(
        "streaming",
        figures,
        workload=f"{figures['rows_streamed']} rows of 1 KiB (10-byte id, 1,014-byte payload, "
        "one row per partition, untracked RF 2) streamed by a bootstrap from the one replica "
        "that held them, 3 CMS members, 64 KiB messages, SQLite WAL synchronous=FULL on both "
        "sides; baselines: the same cells into a bare SQLite table in ~64 KiB transactions, the "
        "same bytes over a bare grpc.aio server stream in 64 KiB messages; bootstrap of "
        f"{bootstrap_rows} rows timed from the call to FINISH",
        quick=args.quick,
    )
    _report.print_table(figures, KEYS)
    print(
        f"\nstream / bare SQLite ingest = {figures['stream_ratio']:.2f} (target >= 0.5); "
        f"bootstrap of {bootstrap_rows} rows {figures['bootstrap_100k_rows_s']:.1f} s"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
