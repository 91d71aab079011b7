"""``python -m epochal.analytics TRACE_DIR... --out DIR``: the trace analytics job.

The same entry runs under spark-submit (``spark-submit analytics/__main__.py TRACE_DIR --out
DIR``, or the installed package's module file): the master and settings spark-submit gives win
over the defaults here. Flags have environment variables: ``EPOCHAL_ANALYTICS_OUT``, ``_MASTER``,
``_SHUFFLE_PARTITIONS``, ``_DRIVER_MEMORY``, ``_WINDOW_S``, ``_ACCURACY``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence

from epochal.analytics import latency
from epochal.analytics.job import DEFAULT_SHUFFLE_PARTITIONS, JobSettings, Summary, run

ENV_PREFIX = "EPOCHAL_ANALYTICS_"


def _env(name: str, default: str) -> str:
    return os.environ.get(ENV_PREFIX + name, default)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m epochal.analytics",
        description="Analyse the cluster's span files (OTLP JSON lines) into Parquet tables.",
    )
    p.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE_DIR",
        help="folders of *.jsonl span files (searched at any depth) or files; any Hadoop path",
    )
    p.add_argument(
        "--out",
        default=_env("OUT", ""),
        help="where the tables go (a folder, replaced table by table) [EPOCHAL_ANALYTICS_OUT]",
    )
    p.add_argument(
        "--master",
        default=_env("MASTER", ""),
        help="Spark master (spark://host:7077, yarn, k8s://…); default: spark-submit's, "
        "else local[*] [EPOCHAL_ANALYTICS_MASTER]",
    )
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        default=int(_env("SHUFFLE_PARTITIONS", "0")) or None,
        help="spark.sql.shuffle.partitions (default: spark-submit's, else "
        f"{DEFAULT_SHUFFLE_PARTITIONS}, for a 2-core machine; raise it on a cluster) "
        "[EPOCHAL_ANALYTICS_SHUFFLE_PARTITIONS]",
    )
    p.add_argument(
        "--driver-memory",
        default=_env("DRIVER_MEMORY", "4g"),
        help="the driver's heap when this process starts Spark (default 4g) "
        "[EPOCHAL_ANALYTICS_DRIVER_MEMORY]",
    )
    p.add_argument(
        "--window",
        type=int,
        default=int(_env("WINDOW_S", "60")),
        help="seconds per time window of the latency table (default 60) "
        "[EPOCHAL_ANALYTICS_WINDOW_S]",
    )
    p.add_argument(
        "--accuracy",
        type=int,
        default=int(_env("ACCURACY", str(latency.ACCURACY))),
        help="percentile_approx's accuracy: ranks within n/accuracy of the exact one "
        f"(default {latency.ACCURACY}) [EPOCHAL_ANALYTICS_ACCURACY]",
    )
    p.add_argument("--ui", action="store_true", help="serve Spark's web UI while it runs")
    return p


def report(summary: Summary) -> str:
    """What the job wrote, as text."""
    lines = [
        f"read {summary.spans:,} spans of {summary.traces:,} traces from "
        f"{', '.join(summary.inputs)} ({summary.bad_lines} unreadable lines skipped)",
        f"tables in {summary.out} (Spark {summary.spark['version']}, "
        f"{summary.spark['master']}, {summary.stage_s.get('total', 0):.1f} s):",
    ]
    width = max(len(name) for name in summary.tables)
    for name, count in summary.tables.items():
        lines.append(f"  {name:<{width}}  {count:>10,} rows  {summary.stage_s[name]:>7.2f} s")
    crossed = summary.crossed
    lines.append(f"thresholds crossed: {len(crossed) or 'none'}")
    for row in crossed:
        critical = "" if row["critical"] is None else f", critical > {row['critical']:g}"
        lines.append(
            f"  {row['state'].upper():<8} {row['metric']}: {row['measured']:.3f} {row['unit']} "
            f"(warning > {row['warning']:g}{critical})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.out:
        parser().error("--out DIR is required (or EPOCHAL_ANALYTICS_OUT)")
    try:
        settings = JobSettings(
            traces=tuple(args.traces),
            out=args.out,
            master=args.master,
            shuffle_partitions=args.shuffle_partitions,
            driver_memory=args.driver_memory,
            window_s=args.window,
            accuracy=args.accuracy,
            ui=args.ui,
        )
    except ValueError as error:
        parser().error(str(error))
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        print(
            "error: Spark needs Java 17 or newer, and there is no `java` on PATH and no "
            "JAVA_HOME: `make deps` installs Debian's openjdk-17-jre-headless",
            file=sys.stderr,
        )
        return 2
    try:
        summary = run(settings)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
