"""The cost of tracing: the data path's writes and the CMS's commits with tracing off, on at
ratio 1.0 to files, and on at ratio 0.01, in one run.

Three runs (``--runs``; ``--quick``: one short one), each figure the median over them. In a run
the workload (fixed) runs twice per mode, each time on fresh processes, in the order off, ratio
1.0, ratio 0.01, ratio 0.01, ratio 1.0, off (a mode's figure in the run is the mean of its two,
so that drift over the run favours none):
- Writes (``data_path.py``'s): 3 CMS members and 3 replicas on 127.0.0.1, SQLite WAL
  synchronous=FULL, a tracked keyspace with RF 3, table ``kv(id text, payload text)`` with
  ~300-byte rows, a new partition per write; the SDK's asyncio client in this process, after a
  warm-up: sequential QUORUM writes for the p50, then 16 tasks for writes/s.
- Commits (``cms_commit.py``'s): 3 CMS members; raw Commit calls of CreateTable/DropTable, task i
  to member i mod 3 (two thirds forwarded): sequential calls for the p50, then 32 tasks.
- Modes: ``off`` (no trace dir, no endpoint), ``files`` (``EPOCHAL_TRACE_DIR``; sampler
  parent-based ratio 1.0: every span written as OTLP JSON lines), ``ratio_0.01``
  (``OTEL_TRACES_SAMPLER_ARG=0.01``, files too). Every service process traces in the traced
  modes; the benchmark's own client (the application) installs no tracer provider, so the
  figures are the services' cost (an application that traces adds its own SDK spans).

Result keys, per mode M in off, files, ratio_0.01: write_p50_ms_M, writes_per_s_c16_M,
commit_p50_ms_M, commits_per_s_c32_M; and the ratios to ``off`` of each traced mode:
writes_per_s_c16_files_over_off, writes_per_s_c16_ratio_0.01_over_off,
commits_per_s_c32_files_over_off, commits_per_s_c32_ratio_0.01_over_off (the median of the
runs' ratios); ``runs``: every run's figures.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from pathlib import Path

import _report
from cms_commit import Workload, run_clients, setup_keyspaces
from data_path import PAYLOAD, throughput, timed

from epochal.client import AsyncClient
from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.cms import LocalCMS
from epochal.wire.channels import channel as open_channel
from epochal.wire.v1 import cms_pb2_grpc

MODES = ("off", "files", "ratio_0.01")
COMMIT_CONCURRENCY = 32


def environment(mode: str, traces: Path) -> dict[str, str]:
    if mode == "off":
        return {}
    env = {"EPOCHAL_TRACE_DIR": str(traces)}
    if mode == "ratio_0.01":
        env["OTEL_TRACES_SAMPLER_ARG"] = "0.01"
    return env


async def measure_writes(
    data_dir: Path, env: dict[str, str], calls: int, seconds: float
) -> dict[str, float]:
    cluster = LocalCluster(data_dir, env=env)
    try:
        cluster.start()
        await cluster.wait_ready()
        await cluster.wait_joined()
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("bench", replication_factor=3, tracked=True)
            await client.create_table(
                "bench", "kv", {"id": "text", "payload": "text"}, partition_key=["id"]
            )
            written = 0

            async def write(n: int) -> None:
                nonlocal written
                written += 1
                await client.write("bench", "kv", {"id": f"k{written:08d}", "payload": PAYLOAD})

            await throughput(3.0 if calls < 1000 else 10.0, write)  # warm-up (see data_path)
            latencies = await timed(calls, write)
            writes_per_s = await throughput(seconds, write)
        return {"write_p50_ms": statistics.median(latencies), "writes_per_s_c16": writes_per_s}
    finally:
        cluster.stop()


async def measure_commits(
    data_dir: Path, env: dict[str, str], calls: int, seconds: float
) -> dict[str, float]:
    cluster = LocalCMS(data_dir, env=env)
    try:
        cluster.start()
        await cluster.wait_serving()
        channels = [open_channel(a) for a in cluster.addresses]
        stubs = [cms_pb2_grpc.CMSStub(c) for c in channels]
        try:
            await setup_keyspaces(stubs[0], COMMIT_CONCURRENCY)
            workloads = [Workload(i) for i in range(COMMIT_CONCURRENCY)]
            await run_clients(stubs, workloads[:1], 1.0)  # warm-up
            latencies = []
            for call in range(calls):
                request = workloads[0].next_request()
                started = asyncio.get_running_loop().time()
                await stubs[call % len(stubs)].Commit(request, timeout=30)
                latencies.append((asyncio.get_running_loop().time() - started) * 1000)
                workloads[0].committed(request)
            ok, failures, _ = await run_clients(stubs, workloads, seconds)
            if failures:
                print(f"commits that failed: {dict(failures.most_common(3))}")
        finally:
            for channel in channels:
                await channel.close()
        return {"commit_p50_ms": statistics.median(latencies), "commits_per_s_c32": ok / seconds}
    finally:
        cluster.stop()


async def one_run(quick: bool) -> dict[str, float]:
    """Each mode measured twice (off, files, ratio, ratio, files, off): the means, and the
    traced modes' throughput over ``off``'s."""
    seconds = 3.0 if quick else 10.0
    calls = 300 if quick else 1500
    measured: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as folder:
        for turn, mode in enumerate((*MODES, *reversed(MODES))):
            base = Path(folder) / f"{turn}-{mode}"
            env = environment(mode, base / "traces")
            writes = await measure_writes(base / "data", env, calls, seconds)
            commits = await measure_commits(base / "cms", env, calls, seconds)
            for key, value in {**writes, **commits}.items():
                measured.setdefault(f"{key}_{mode}", []).append(value)
            spans = sum(1 for path in (base / "traces").glob("*.jsonl") for _ in path.open())
            shown = ", ".join(f"{k} {v:.2f}" for k, v in {**writes, **commits}.items())
            print(f"{mode}: {shown}; {spans:,} span batches written", flush=True)
    figures = {key: statistics.mean(values) for key, values in measured.items()}
    for mode in MODES[1:]:
        for key in ("writes_per_s_c16", "commits_per_s_c32"):
            figures[f"{key}_{mode}_over_off"] = figures[f"{key}_{mode}"] / figures[f"{key}_off"]
    return figures


async def main_async(quick: bool, runs: int) -> dict[str, object]:
    """``runs`` runs; each figure is the median over them (a ratio: the median of the runs'
    ratios, each measured against ``off`` in its own run). ``runs`` holds every run's."""
    each = []
    for number in range(1, runs + 1):
        print(f"run {number} of {runs}", flush=True)
        each.append(await one_run(quick))
    figures: dict[str, object] = {
        key: statistics.median(run[key] for run in each) for key in each[0]
    }
    figures["runs"] = each
    return figures


def keys() -> list[str]:
    per_mode = ("write_p50_ms", "writes_per_s_c16", "commit_p50_ms", "commits_per_s_c32")
    ratios = [
        f"{key}_{mode}_over_off"
        for mode in MODES[1:]
        for key in ("writes_per_s_c16", "commits_per_s_c32")
    ]
    return [f"{key}_{mode}" for mode in MODES for key in per_mode] + ratios


def main() -> int:
    parser = _report.parser(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="whole runs; figures are medians")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    figures = asyncio.run(main_async(args.quick, runs))
    _report.write_result(
        "tracing",
        figures,
        workload="data_path.py's writes (3 CMS + 3 replicas, tracked RF 3, ~300-byte rows, "
        "sequential then 16 tasks) and cms_commit.py's commits (3 members, sequential then 32 "
        "tasks), with tracing off, to files at ratio 1.0, and to files at ratio 0.01",
        quick=args.quick,
    )
    _report.print_table(figures, keys())
    each = figures["runs"]
    assert isinstance(each, list)
    for key in (key for key in keys() if key.endswith("_over_off")):
        print(f"{key}, run by run: {', '.join(f'{run[key]:.2f}' for run in each)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
