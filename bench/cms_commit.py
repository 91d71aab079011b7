"""CMS commit latency and throughput on 3 local members, against a bare grpcio echo baseline.

Workload (fixed): 3 CMS members on 127.0.0.1, SQLite in WAL mode with synchronous=FULL, default
snapshot frequency (100). Each client task owns a keyspace and alternately creates and drops
tables from a pool of 100 names in it, so the metadata stays bounded and every commit is valid;
transformations are CreateTable (~300 bytes encoded) and DropTable. Clients are N asyncio tasks
in this one process, task i talking to member i mod 3 (so two thirds of commits are forwarded),
calling the raw Commit RPC without retries: every non-OK answer is counted.

Baseline, measured in the same run: a bare grpc.aio unary echo server in another process on
loopback; sequential p50 latency and calls/s with 32 concurrent callers.

The cost of TLS (``_security``): the CMS measured with mutual TLS — the default deployment,
its figures under the keys below — and in plain text (``--insecure``), ``--runs`` times each
(default 3; ``--quick``: 1), alternating which goes first; every figure is the median over the
runs, the plain-text one under ``<key>_plain``, with ``commit_p50_ms_tls_over_plain`` and
``commits_per_s_c32_tls_over_plain``.

Result keys: echo_p50_ms, echo_calls_per_s_c32, commit_p50_ms, commit_p99_ms, commits_per_s_c1,
commits_per_s_c8, commits_per_s_c32, commits_per_s_c64, commits_per_s_c128, failed_commits_c128
(each also ``_plain``), commit_p50_ms_tls_over_plain, commits_per_s_c32_tls_over_plain, runs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import _report
import _security
import grpc
from _echo import echo_server, measure_echo

from epochal.devcluster.cms import LocalCMS
from epochal.devcluster.pki import DevPki
from epochal.tcm import (
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropTable,
    ReplicationParams,
    ReplicationType,
)
from epochal.wire.channels import channel as open_channel
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

CONCURRENCY = (1, 8, 32, 64, 128)
POOL = 100


# ---------------------------------------------------------------- commit workload


class Workload:
    """Per task: its keyspace, a pool of table names, and whether the next op creates or drops.
    Transformations are built once per name, so the client spends its CPU on calls."""

    def __init__(self, task: int) -> None:
        self.keyspace = f"bench_{task}"
        self.next_name = 0
        self.live: str | None = None
        self._creates = [self._create(f"table_{i}") for i in range(POOL)]
        self._drops = {
            f"table_{i}": transformation_to_proto(
                DropTable(keyspace=self.keyspace, name=f"table_{i}")
            )
            for i in range(POOL)
        }

    def _create(self, name: str) -> object:
        return transformation_to_proto(
            CreateTable(
                keyspace=self.keyspace,
                name=name,
                columns=tuple(
                    [Column("id", ColumnType.TEXT), Column("at_ms", ColumnType.BIGINT)]
                    + [Column(f"attribute_{i:02d}", ColumnType.TEXT) for i in range(12)]
                ),
                partition_key=("id",),
                clustering_key=("at_ms",),
            )
        )

    def next_request(self) -> cms_pb2.CommitRequest:
        if self.live is None:
            transformation = self._creates[self.next_name % POOL]
            self.next_name += 1
        else:
            transformation = self._drops[self.live]
        return cms_pb2.CommitRequest(transformation=transformation, entry_id=uuid.uuid4().hex)

    def committed(self, request: cms_pb2.CommitRequest) -> None:
        kind = request.transformation.WhichOneof("kind")
        self.live = getattr(request.transformation, kind).name if self.live is None else None


async def setup_keyspaces(stub: cms_pb2_grpc.CMSStub, tasks: int) -> None:
    for task in range(tasks):
        transformation = CreateKeyspace(
            name=f"bench_{task}",
            replication=ReplicationParams.simple(3),
            replication_type=ReplicationType.UNTRACKED,
        )
        await stub.Commit(
            cms_pb2.CommitRequest(
                transformation=transformation_to_proto(transformation), entry_id=uuid.uuid4().hex
            ),
            timeout=30,
        )


async def run_clients(
    stubs: list[cms_pb2_grpc.CMSStub], workloads: list[Workload], seconds: float
) -> tuple[int, Counter[str], list[float]]:
    ok = 0
    failures: Counter[str] = Counter()
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def client(index: int) -> None:
        nonlocal ok
        stub = stubs[index % len(stubs)]
        workload = workloads[index]
        while time.perf_counter() < stop_at:
            request = workload.next_request()
            started = time.perf_counter()
            try:
                await stub.Commit(request, timeout=30)
            except grpc.aio.AioRpcError as error:
                failures[f"{error.code().name}: {error.details()[:80]}"] += 1
                continue
            latencies.append(time.perf_counter() - started)
            workload.committed(request)
            ok += 1

    await asyncio.gather(*(client(i) for i in range(len(workloads))))
    return ok, failures, latencies


async def measure_cms(
    cluster: LocalCMS, seconds: float, sequential_calls: int
) -> dict[str, object]:
    results: dict[str, object] = {}
    channels = [open_channel(a) for a in cluster.addresses]
    stubs = [cms_pb2_grpc.CMSStub(c) for c in channels]
    try:
        await setup_keyspaces(stubs[0], max(CONCURRENCY))
        workloads = [Workload(i) for i in range(max(CONCURRENCY))]
        # Warm-up, then sequential latency (one task, rotating over the members).
        await run_clients(stubs, workloads[:1], 1.0)
        latencies = []
        for call in range(sequential_calls):
            request = workloads[0].next_request()
            started = time.perf_counter()
            await stubs[call % len(stubs)].Commit(request, timeout=30)
            latencies.append(time.perf_counter() - started)
            workloads[0].committed(request)
        latencies.sort()
        results["commit_p50_ms"] = statistics.median(latencies) * 1000
        results["commit_p99_ms"] = latencies[int(len(latencies) * 0.99) - 1] * 1000
        for concurrency in CONCURRENCY:
            ok, failures, _ = await run_clients(stubs, workloads[:concurrency], seconds)
            results[f"commits_per_s_c{concurrency}"] = ok / seconds
            if concurrency == max(CONCURRENCY):
                results[f"failed_commits_c{concurrency}"] = sum(failures.values())
            for failure, count in failures.most_common(5):
                print(f"c{concurrency}: {count} x {failure}")
    finally:
        for channel in channels:
            await channel.close()
    return results


# ---------------------------------------------------------------- the run


RATIOS = ("commit_p50_ms", "commits_per_s_c32")


async def main_async(quick: bool, runs: int) -> dict[str, object]:
    seconds = 2.0 if quick else 8.0
    sequential_calls = 300 if quick else 2000
    with echo_server() as echo_port:
        echo_p50_ms, echo_calls = await measure_echo(echo_port, seconds, sequential_calls, 32)
    results: dict[str, object] = {"echo_p50_ms": echo_p50_ms, "echo_calls_per_s_c32": echo_calls}

    async def measure(pki: DevPki | None, folder: Path) -> dict[str, object]:
        cluster = LocalCMS(folder, pki=pki, insecure=pki is None)
        try:
            cluster.start()
            await cluster.wait_serving()
            return await measure_cms(cluster, seconds, sequential_calls)
        finally:
            cluster.stop()

    with tempfile.TemporaryDirectory(prefix="bench-cms-") as data_dir:
        modes = await _security.both_modes(measure, Path(data_dir), runs)
    results.update(_security.medians(modes, RATIOS))
    return results


def main() -> int:
    parser = _report.parser(__doc__)
    _security.add_runs_flag(parser)
    args = parser.parse_args()
    figures = asyncio.run(main_async(args.quick, 1 if args.quick else args.runs))
    out = _report.write_result(
        "cms_commit",
        figures,
        workload="3 members, SQLite WAL synchronous=FULL, snapshot every 100 epochs; "
        "create/drop tables from a pool of 100 names per client keyspace, ~300-byte "
        "CreateTable; N asyncio tasks in one process over all members; raw Commit, no retries; "
        "mutual TLS and plain text, alternating, medians over the runs",
        quick=args.quick,
    )
    echo_p50 = figures["echo_p50_ms"]
    echo_c32 = figures["echo_calls_per_s_c32"]
    _report.print_table(
        figures,
        (
            "echo_p50_ms",
            "echo_calls_per_s_c32",
            "commit_p50_ms",
            "commit_p99_ms",
            *(f"commits_per_s_c{c}" for c in CONCURRENCY),
            "failed_commits_c128",
            "commit_p50_ms_plain",
            "commits_per_s_c32_plain",
            "commit_p50_ms_tls_over_plain",
            "commits_per_s_c32_tls_over_plain",
        ),
    )
    print(
        f"\ncommit p50 / echo p50 = {figures['commit_p50_ms'] / echo_p50:.2f} (target <= 4); "
        f"commits/s c32 / echo calls/s c32 = {figures['commits_per_s_c32'] / echo_c32:.2f} "
        f"(target >= 0.4); failed at c128 = {figures['failed_commits_c128']} (target 0)"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
