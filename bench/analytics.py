"""The trace analytics job's speed: synthetic span files of 1M and 4M spans analysed on
``local[2]``, against a single-process Python pass over the same files.

Workload (fixed): ``epochal.analytics.synthetic.generate`` (the tests' generator; seed 0): an
application, 3 CMS members, 6 replicas and a reconciler writing OTLP JSON lines in batches of
512 spans; 60 % writes (6 spans) and 40 % reads (5 spans) at ONE/QUORUM/ALL, one DDL commit per
200 requests (leader phases, a Paxos round, an ``epoch.apply`` per follower), one
reconciliation round per 20 (10 spans); ~420 bytes of JSON per span. ``--quick``: 50k and 200k
spans and one run, under the same keys.

Each run, in order: the job on the 1M files, the Python pass on them, the job on the 4M files.
The job runs as users run it — ``python -m epochal.analytics FILES --out DIR --master
local[2]``, a fresh process and JVM each time (the driver's default 4 GB heap) — timed from
launch to exit (``spark_wall_s_*``: JVM start included) and by its own summary
(``spark_job_s_*`` and ``spark_stage_<table>_s_*``, the job's stages); its peak memory is the
greatest sum of resident sets over the process and all its children (the JVM, Python workers),
sampled every 0.2 s. The Python pass (``bench/_span_pass.py``, a process of its own, timed from
its first read to its table) computes the job's ``latency`` table — the same groups and
percentiles, exactly — and checks the job's table against it (``python_agrees``).

Result keys: spark_wall_s_1m, spark_wall_s_4m, spark_job_s_1m, spark_job_s_4m,
spark_4m_over_1m (targets: 1M ≤ 60 s, 4M ≤ 4.5 × 1M), spark_peak_rss_mb (the larger of the
two sizes'), spark_peak_rss_mb_1m, spark_peak_rss_mb_4m, python_pass_s_1m,
python_peak_rss_mb_1m, spark_over_python_1m, spark_job_over_python_1m,
spark_stage_<table>_s_1m and _4m, spans_1m, spans_4m, python_agrees; each the median over the
runs (``--runs``, default 3); ``runs``: every run's figures; generate_s_1m and generate_s_4m
when this run generated the files (``--data DIR`` keeps them for the next run, which reuses
them).

``--quick`` takes over a minute, not the conventional well under one: each job starts a JVM
and runs some 40 Spark jobs, about 25 s whatever the size, and a size's figure must come from
a job of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _report

from epochal.analytics import latency, synthetic

MASTER = "local[2]"
SIZES = {"1m": 1_000_000, "4m": 4_000_000}
QUICK_SIZES = {"1m": 50_000, "4m": 200_000}
SAMPLE_S = 0.2
SHUFFLE_PARTITIONS = 8  # the job's defaults, given: a stray EPOCHAL_ANALYTICS_* cannot change them
DRIVER_MEMORY = "4g"
DONE = ".generated"  # in a data folder: generated whole (--data reuses it)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, MB."""
    tree, total, todo = _children(), 0.0, [pid]
    while todo:
        current = todo.pop()
        todo += tree.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def run_job(traces: Path, out: Path) -> dict[str, object]:
    """The job in a fresh process: wall time, its summary's stage times, peak memory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EPOCHAL_ANALYTICS_")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    command = [sys.executable, "-m", "epochal.analytics", str(traces), "--out", str(out)]
    command += ["--shuffle-partitions", str(SHUFFLE_PARTITIONS), "--driver-memory", DRIVER_MEMORY]
    command += ["--accuracy", str(latency.ACCURACY)]
    started = time.monotonic()
    process = subprocess.Popen(
        [*command, "--master", MASTER],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(SAMPLE_S):
            peak = max(peak, _rss_mb(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        output, _ = process.communicate(timeout=1800)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # its session: the JVM, its Python workers
        process.wait()
        raise
    finally:
        done.set()
        sampler.join()
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"the job failed ({process.returncode}):\n{output[-4000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "wall_s": wall,
        "job_s": summary["stage_s"]["total"],
        "stages": {k: v for k, v in summary["stage_s"].items() if k != "total"},
        "peak_rss_mb": peak,
        "spans": summary["spans"],
    }


def python_pass(traces: Path, spark_latency: Path) -> dict[str, Any]:
    """The Python pass in a process of its own: seconds, peak memory, disagreements."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_span_pass.py")), str(traces),
         str(spark_latency), str(latency.ACCURACY)],
        capture_output=True, text=True, timeout=1800, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def one_run(data: dict[str, Path], work: Path) -> dict[str, object]:
    figures: dict[str, object] = {}
    job_1m = run_job(data["1m"], work / "out-1m")
    baseline = python_pass(data["1m"], work / "out-1m" / "latency")
    seconds, problems = baseline["seconds"], baseline["problems"]
    for problem in problems[:10]:
        print(f"  disagreement: {problem}", flush=True)
    job_4m = run_job(data["4m"], work / "out-4m")
    for size, job in (("1m", job_1m), ("4m", job_4m)):
        figures[f"spark_wall_s_{size}"] = job["wall_s"]
        figures[f"spark_job_s_{size}"] = job["job_s"]
        figures[f"spark_peak_rss_mb_{size}"] = job["peak_rss_mb"]
        figures[f"spans_{size}"] = job["spans"]
        for stage, s in job["stages"].items():  # type: ignore[attr-defined]
            figures[f"spark_stage_{stage}_s_{size}"] = s
    figures["python_pass_s_1m"] = seconds
    figures["python_peak_rss_mb_1m"] = baseline["peak_rss_mb"]
    figures["python_agrees"] = not problems
    figures["spark_4m_over_1m"] = job_4m["wall_s"] / job_1m["wall_s"]  # type: ignore[operator]
    figures["spark_over_python_1m"] = job_1m["wall_s"] / seconds  # type: ignore[operator]
    figures["spark_job_over_python_1m"] = job_1m["job_s"] / seconds  # type: ignore[operator]
    shutil.rmtree(work / "out-1m")
    shutil.rmtree(work / "out-4m")
    return figures


def main() -> int:
    parser = _report.parser(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="whole runs; figures are medians")
    parser.add_argument("--data", type=Path, help="keep the span files here (reused when present)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    runs = 1 if args.quick else args.runs
    sizes = QUICK_SIZES if args.quick else SIZES
    scratch = Path(tempfile.mkdtemp(prefix="epochal-bench-analytics-"))
    root = args.data or scratch
    try:
        data: dict[str, Path] = {}
        figures: dict[str, Any] = {}
        for size, spans in sizes.items():
            data[size] = root / f"spans-{spans}"
            if not (data[size] / DONE).exists():
                started = time.monotonic()
                shutil.rmtree(data[size], ignore_errors=True)
                synthetic.generate(data[size], spans)
                (data[size] / DONE).touch()
                print(
                    f"generated {spans:,} spans in {time.monotonic() - started:.1f} s", flush=True
                )
                figures[f"generate_s_{size}"] = time.monotonic() - started
        each = []
        for number in range(1, runs + 1):
            print(f"run {number} of {runs}", flush=True)
            each.append(one_run(data, scratch))
            print(
                f"  1M: {each[-1]['spark_wall_s_1m']:.1f} s, 4M: {each[-1]['spark_wall_s_4m']:.1f}"
                f" s, Python pass: {each[-1]['python_pass_s_1m']:.1f} s",
                flush=True,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for key in each[0]:
        values = [run[key] for run in each]
        if key == "python_agrees":
            figures[key] = all(values)
        else:
            figures[key] = statistics.median(values)  # type: ignore[arg-type]
    figures["spark_peak_rss_mb"] = max(
        figures["spark_peak_rss_mb_1m"], figures["spark_peak_rss_mb_4m"]
    )
    figures["runs"] = each
    workload = (
        f"synthetic spans (seed 0) {sizes['1m']:,} and {sizes['4m']:,}; {MASTER}, driver "
        f"{DRIVER_MEMORY}, {SHUFFLE_PARTITIONS} shuffle partitions, accuracy {latency.ACCURACY};"
        f" {runs} runs, medians"
    )
    _report.write_result("analytics", figures, workload=workload, quick=args.quick)
    shown = [
        "spark_wall_s_1m",
        "spark_wall_s_4m",
        "spark_job_s_1m",
        "spark_job_s_4m",
        "spark_4m_over_1m",
        "spark_peak_rss_mb",
        "python_pass_s_1m",
        "python_peak_rss_mb_1m",
        "spark_over_python_1m",
        "spark_job_over_python_1m",
        *(k for k in figures if k.startswith("spark_stage_") and k.endswith("_1m")),
    ]
    _report.print_table(figures, shown)
    print(f"python_agrees: {figures['python_agrees']}")
    return 0 if figures["python_agrees"] else 1


if __name__ == "__main__":
    sys.exit(main())
