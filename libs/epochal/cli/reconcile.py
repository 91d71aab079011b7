"""``epochal reconcile status``: where each range of every tracked keyspace stands — owner, lease
token, low bound, lag, last round — as the reconcilers report it (``epochal.reconcile_client``),
one line per range by keyspace then range, each range as its owner reports it, then a summary.

The reconcilers are found in the metadata (each registers its address when it starts) unless
``--reconciler`` names them. Those that answer are shown; those that do not are named, with why,
and the exit code is then 1.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import click

from epochal.cli.failures import Refused
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit
from epochal.cli.runner import failure_of, opened, run
from epochal.cms_client import CMSClient
from epochal.errors import EpochalError
from epochal.mtrack import format_hlc
from epochal.reconcile_client import STATUS_TIMEOUT_S, RangeStatus, ReconcileClient, ReconcileStatus
from epochal.runtime.flags import parse_addresses
from epochal.tcm.reconcilers import DEREGISTERED, RegisterReconciler


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


# OUTCOME: the last round's; LEASE: the lease's token (the epoch of its grant).
RECONCILE_COLUMNS = ("KEYSPACE", "RANGE", "OWNER", "LEASE", "LOW BOUND", "LAG", "OUTCOME", "ROUNDS")
RIGHT_ALIGNED = frozenset({"LEASE", "LAG", "ROUNDS"})


def reconcile_table(ranges: Sequence[RangeStatus]) -> list[str]:
    """One line per range, in the order given, under a header; columns as wide as their
    widest cell."""
    rows = [RECONCILE_COLUMNS, *(_reconcile_row(r) for r in ranges)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(RECONCILE_COLUMNS))]
    return [
        "  ".join(
            cell.rjust(width) if name in RIGHT_ALIGNED else cell.ljust(width)
            for name, cell, width in zip(RECONCILE_COLUMNS, row, widths, strict=True)
        ).rstrip()
        for row in rows
    ]


def _reconcile_row(report: RangeStatus) -> tuple[str, ...]:
    return (
        report.keyspace,
        str(report.range),
        report.owner or "-",
        str(report.lease_token) if report.lease_token else "-",
        format_hlc(report.low_bound) if report.low_bound else "-",
        "-" if report.lag_ms is None else f"{report.lag_ms} ms",
        report.last_outcome or "-",
        str(report.rounds),
    )


COHORT_COLUMNS = ("KEYSPACE", "RANGE", "COHORT", "MEMBERS", "HIGH", "FOLDED", "AGE", "HELD BY")


def cohort_table(ranges: Sequence[RangeStatus], now_unix_ms: int) -> list[str]:
    """One line per cohort of the ranges (none: no lines), under a header."""
    rows = [
        (
            r.keyspace,
            str(r.range),
            c.id,
            ",".join(c.members),
            format_hlc(c.high),
            f"{c.mutations} ({_megabytes(c.bytes)})",
            f"{max(now_unix_ms - c.formed_unix_ms, 0) // 1000} s",
            ",".join(c.holders),
        )
        for r in ranges
        for c in r.cohorts
    ]
    if not rows:
        return []
    table = [COHORT_COLUMNS, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(COHORT_COLUMNS))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


def reconcile_summary(status: ReconcileStatus) -> str:
    """``48 ranges: 48 owned (reconciler1 48), 0 unowned; max lag 6210 ms``."""
    by_owner = Counter(report.owner for report in status.ranges if report.owned)
    owners = ", ".join(f"{owner} {count}" for owner, count in sorted(by_owner.items()))
    lag = "-" if status.max_lag_ms is None else f"{status.max_lag_ms} ms"
    cohorts = sum(len(r.cohorts) for r in status.ranges)
    cut_off = sorted({node for r in status.ranges for node in r.unreachable})
    return (
        f"{len(status.ranges)} ranges: {status.owned} owned"
        f"{f' ({owners})' if owners else ''}, {status.unowned} unowned; max lag {lag}"
        + (f"; {cohorts} cohorts" if cohorts else "")
        + (f"; unreachable: {', '.join(cut_off)}" if cut_off else "")
    )


def describe_reconcile(
    status: ReconcileStatus, missing: Sequence[dict[str, str]] = ()
) -> list[str]:
    """Who answered, who did not, the table, the summary."""
    asked = ", ".join(
        f"{a.reconciler_id} at {a.address} (epoch {a.epoch})" for a in status.reconcilers
    )
    lines = [f"reconcilers: {asked or 'none answered'}"]
    lines += [f"did not answer: {m['address']} ({m['error']})" for m in missing]
    if status.reconcilers:
        lines += [
            *reconcile_table(status.ranges),
            *cohort_table(status.ranges, time.time_ns() // 1_000_000),
            reconcile_summary(status),
        ]
    return ["\n".join(lines)]


@click.group()
@global_options
def reconcile() -> None:
    """The reconcilers: where the tracked ranges stand."""


@reconcile.command("status")
@click.option(
    "--reconciler",
    metavar="HOST:PORT,...",
    default="",
    help="ask these reconcilers (default: every one the metadata names) [EPOCHAL_RECONCILER]",
    envvar="EPOCHAL_RECONCILER",
)
@global_options
def reconcile_status(reconciler: str) -> int:
    """Per range: owner, lease token, low bound, lag, last round."""
    try:
        named = parse_addresses(reconciler, "--reconciler")
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    return run(lambda options: _reconcile_status(options, named))


async def _reconcile_status(options: Options, named: Sequence[str]) -> int:
    addresses = list(named)
    if not addresses:
        async with opened(options) as cluster:
            addresses = list(cluster.reconcilers().values())
        if not addresses:
            raise Refused("no reconciler is registered in the metadata (is one running?)")
    async with ReconcileClient(addresses) as reconcilers:
        status, failures = await reconcilers.partial_status(
            timeout_s=min(options.timeout_s, STATUS_TIMEOUT_S)
        )
    missing = [{"address": a, "error": f"{e.status or 'ERROR'}: {e.message}"} for a, e in failures]
    data = status_data(status, missing)
    emit(options.output, data, lambda: describe_reconcile(status, missing))
    return 1 if missing else 0


def status_data(status: ReconcileStatus, missing: list[dict[str, str]]) -> dict[str, Any]:
    """The JSON shape of ``reconcile status``."""
    return {
        "reconcilers": [
            {"id": a.reconciler_id, "address": a.address, "epoch": a.epoch}
            for a in status.reconcilers
        ],
        "unreachable": missing,
        "ranges": [
            {
                "keyspace": r.keyspace,
                "left": r.range.left,
                "right": r.range.right,
                "owner": r.owner or None,
                "lease_token": r.lease_token or None,
                "low_bound": format_hlc(r.low_bound) if r.low_bound else None,
                "lag_ms": r.lag_ms,
                "last_outcome": r.last_outcome or None,
                "rounds": r.rounds,
                "unreachable": list(r.unreachable),
                "cohorts": len(r.cohorts),
            }
            for r in status.ranges
        ],
        "owned": status.owned,
        "unowned": status.unowned,
        "max_lag_ms": status.max_lag_ms,
    }


@reconcile.command("deregister")
@click.argument("reconciler_id", metavar="ID")
@global_options
def reconcile_deregister(reconciler_id: str) -> int:
    """Forget reconciler ID, gone for good (a reconciler that stops cleanly does this itself)."""
    return run(lambda options: _deregister(options, reconciler_id))


async def _deregister(options: Options, reconciler_id: str) -> int:
    async with opened(options) as cluster:
        if reconciler_id not in cluster.metadata.reconcilers:
            known = ", ".join(cluster.reconcilers()) or "none"
            raise Refused(f"no reconciler {reconciler_id!r} is registered (registered: {known})")
        async with CMSClient(cluster.cms_addresses(), total_timeout_s=options.timeout_s) as cms:
            try:
                committed = await cms.commit(
                    RegisterReconciler(reconciler_id=reconciler_id, address=DEREGISTERED)
                )
            except EpochalError as error:
                raise failure_of(error, f"reconcile deregister {reconciler_id}") from None
    data = {"reconciler": reconciler_id, "epoch": committed.epoch}
    emit(
        options.output,
        data,
        lambda: [f"deregistered reconciler {reconciler_id} at epoch {committed.epoch}"],
    )
    return 0
