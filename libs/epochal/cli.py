"""``epochal``: the operator's command line for topology operations on a replica.

``epochal unregister NODE`` forgets a node that registered but never joined (one with a
software version the others refuse, say) by committing Unregister through the CMS.

``epochal reconcile status --reconciler host:port[,host:port...]`` asks reconcilers
(``epochal.v1.Reconciler/Status``) where each range of every tracked keyspace stands — owner,
lease token, low bound, lag, last round — one line per range by keyspace then range, each range
as its owner reports it (``epochal.reconcile_client``), then a summary line.

Each command calls the replica's ``epochal.v1.ReplicaAdmin`` service (see
services/replica/README.md, "Topology operations"). A command that runs an operation answers
when it has finished, failed or been refused; meanwhile it shows the operation's progress (step,
state, streamed bytes, ranges, ETA) on stderr. If the command is interrupted (Ctrl-C, a lost
connection) the operation goes on; ``epochal status`` shows it and ``resume`` / ``cancel`` act
on it.

Exit status: 0 when the operation finished (or was cancelled as asked), 1 when it failed, 2 when
it was refused or the replica (a reconciler) could not be reached — the message says why and what
to do.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

import grpc

from epochal.admin import (
    AdminRequest,
    Bootstrap,
    BootstrapAbort,
    BootstrapResume,
    Cancel,
    Cleanup,
    CleanupResult,
    Decommission,
    DecommissionAbort,
    Move,
    OperationStatus,
    Remove,
    Replace,
    Resume,
    Status,
)
from epochal.admin_client import AdminClient
from epochal.client import Client
from epochal.errors import EpochalError
from epochal.mtrack import format_hlc
from epochal.reconcile_client import STATUS_TIMEOUT_S, RangeStatus, ReconcileClient, ReconcileStatus
from epochal.runtime.flags import parse_addresses
from epochal.status import code_of
from epochal.tcm import Unregister

PROGRESS_INTERVAL_S = 1.0
REFUSED = {
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.NOT_FOUND,
}


def _first(addresses: str) -> str:
    return next((a.strip() for a in addresses.split(",") if a.strip()), "")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="epochal",
        description="Run and watch topology operations on an Epochal replica; ask reconcilers "
        "where the tracked ranges stand (reconcile status).",
    )
    top.add_argument(
        "--replica",
        default=os.environ.get("EPOCHAL_REPLICA") or _first(os.environ.get("EPOCHAL_CLUSTER", "")),
        help="the replica to ask, host:port (its --listen or --advertise) [EPOCHAL_REPLICA; "
        "else the first of EPOCHAL_CLUSTER, the replicas' addresses]",
    )
    top.add_argument(
        "--timeout-s",
        type=float,
        default=float(os.environ.get("EPOCHAL_TIMEOUT_S", "86400")),
        help="give up waiting after this long; the operation goes on [EPOCHAL_TIMEOUT_S]",
    )
    top.add_argument("--quiet", action="store_true", help="no progress lines")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("status", help="what the replica's operation is doing")
    # Parsed by epochal.devcluster.commands (`epochal dev --help`); listed here for --help.
    commands.add_parser("dev", help="a local cluster: up, status, add-replica, add-cms, down")
    boot = commands.add_parser("bootstrap", help="join the ring (on the new node)")
    boot.add_argument("action", nargs="?", choices=("resume", "abort"))
    boot.add_argument("--tokens", type=int, nargs="+", default=[], help="explicit tokens")
    boot.add_argument("--num-tokens", type=int, default=0, help="else this many, allocated")
    leave = commands.add_parser("decommission", help="leave the ring (on the leaving node)")
    leave.add_argument("action", nargs="?", choices=("abort",))
    remove = commands.add_parser("removenode", help="remove a dead node (on any live node)")
    remove.add_argument("node_id")
    replace = commands.add_parser("replace", help="take a dead node's tokens (on the new node)")
    replace.add_argument("node_id", help="the dead node")
    move = commands.add_parser("move", help="move to new tokens (on the moving node)")
    move.add_argument("tokens", type=int, nargs="+")
    resume = commands.add_parser("resume", help="continue an interrupted operation")
    resume.add_argument("node_id", nargs="?", default="", help="another node's (a removal)")
    cancel = commands.add_parser("cancel", help="undo an operation, one step per epoch")
    cancel.add_argument("node_id", nargs="?", default="", help="another node's")
    commands.add_parser("cleanup", help="delete the ranges this replica no longer owns")
    unregister = commands.add_parser(
        "unregister",
        help="forget a node that registered but never joined (through the CMS the replica names)",
    )
    unregister.add_argument("node_id")
    reconcile = commands.add_parser("reconcile", help="ask reconcilers about tracked ranges")
    reconcile_commands = reconcile.add_subparsers(
        dest="reconcile_command", required=True, metavar="COMMAND"
    )
    reconcile_status = reconcile_commands.add_parser(
        "status", help="per range: owner, lease token, low bound, lag, last round"
    )
    reconcile_status.add_argument(
        "--reconciler",
        type=_addresses,
        default=os.environ.get("EPOCHAL_RECONCILER", ""),
        help="the reconcilers to ask, host:port[,host:port...] (their --listen) "
        "[EPOCHAL_RECONCILER]",
    )
    return top


def _addresses(text: str) -> tuple[str, ...]:
    try:
        return parse_addresses(text, "--reconciler")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def call_for(args: argparse.Namespace) -> AdminRequest:
    """What a parsed command line asks of the replica's ReplicaAdmin service."""
    match args.command:
        case "status":
            return Status()
        case "bootstrap" if args.action == "resume":
            return BootstrapResume()
        case "bootstrap" if args.action == "abort":
            return BootstrapAbort()
        case "bootstrap":
            return Bootstrap(tokens=tuple(args.tokens), num_tokens=args.num_tokens)
        case "decommission" if args.action == "abort":
            return DecommissionAbort()
        case "decommission":
            return Decommission()
        case "removenode":
            return Remove(node_id=args.node_id)
        case "replace":
            return Replace(replaced=args.node_id)
        case "move":
            return Move(tokens=tuple(args.tokens))
        case "resume":
            return Resume(node_id=args.node_id)
        case "cancel":
            return Cancel(node_id=args.node_id)
        case "cleanup":
            return Cleanup()
    raise ValueError(f"unknown command {args.command!r}")


def describe(status: OperationStatus) -> str:
    """The final status, one field per line."""
    lines = [
        f"node        {status.node_id}",
        f"operation   {status.kind or '-'} (step {status.step or '-'}, {status.state})",
        f"epoch       {status.epoch}",
    ]
    if status.message:
        lines.append(f"message     {status.message}")
    if status.ranges_total:
        lines.append(
            f"streamed    {status.ranges_done}/{status.ranges_total} ranges, "
            f"{_megabytes(status.streamed_bytes)}, {status.streamed_cells} cells, "
            f"{status.streamed_mutations} log entries"
        )
    if status.reconciled_mutations:
        lines.append(f"reconciled  {status.reconciled_mutations} log entries")
    if status.barrier_level:
        lines.append(f"barrier     {status.barrier_level}")
    return "\n".join(lines)


def progress_line(status: OperationStatus) -> str:
    eta = f", ETA {status.eta_s:.0f} s" if status.eta_s >= 0 else ""
    ranges = f", {status.ranges_done}/{status.ranges_total} ranges" if status.ranges_total else ""
    return (
        f"{status.kind or '-'} of {status.node_id}: {status.step or '-'} done, {status.state}"
        f"{ranges}, {_megabytes(status.streamed_bytes)}{eta}"
    )


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


def describe_reconcile(status: ReconcileStatus) -> str:
    """Who answered, the table, the summary."""
    asked = ", ".join(
        f"{a.reconciler_id} at {a.address} (epoch {a.epoch})" for a in status.reconcilers
    )
    return "\n".join(
        [
            f"reconcilers: {asked}",
            *reconcile_table(status.ranges),
            *cohort_table(status.ranges, time.time_ns() // 1_000_000),
            reconcile_summary(status),
        ]
    )


async def reconcile_status(
    args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]
) -> int:
    """Ask every reconciler named for its status; print the ranges as their owners see them."""
    try:
        async with ReconcileClient(args.reconciler) as reconcilers:
            status = await reconcilers.status(timeout_s=min(args.timeout_s, STATUS_TIMEOUT_S))
    except EpochalError as error:
        err(f"epochal reconcile status: {error}")
        return 2 if code_of(error) in REFUSED or code_of(error) is None else 1
    out(describe_reconcile(status))
    return 0


async def unregister(
    args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]
) -> int:
    """Commit Unregister through the CMS members the replica's metadata names."""
    try:
        async with Client([args.replica], timeout_s=min(args.timeout_s, 30.0)) as client:
            epoch = await client.commit(Unregister(node_id=args.node_id))
    except EpochalError as error:
        err(f"epochal unregister: {error}")
        return 2 if code_of(error) in REFUSED or code_of(error) is None else 1
    out(f"unregistered {args.node_id} at epoch {epoch}")
    return 0


async def run(
    args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]
) -> int:
    if args.command == "unregister":
        return await unregister(args, out, err)
    if args.command == "reconcile":
        return await reconcile_status(args, out, err)
    request = call_for(args)
    async with AdminClient(args.replica) as admin:
        try:
            match request:
                case Cleanup():
                    reply: OperationStatus | CleanupResult = await admin.cleanup(
                        request, timeout_s=min(args.timeout_s, 120.0)
                    )
                case Status():
                    reply = await admin.status(timeout_s=min(args.timeout_s, 120.0))
                case _:
                    reply = await _with_progress(
                        admin, admin.run(request, timeout_s=args.timeout_s), args, err
                    )
        except EpochalError as error:
            said = "" if error.message == error.status else error.message  # none given
            err(f"epochal {args.command}: {error.status}: {said}")
            return 2 if code_of(error) in REFUSED else 1
    if isinstance(reply, CleanupResult):
        out(f"removed {reply.removed} cells and log entries (owners as of epoch {reply.epoch})")
        return 0
    out(describe(reply))
    if isinstance(request, Status):
        return 0
    return 0 if reply.state in ("finished", "aborted") else 1


async def _with_progress(
    admin: AdminClient,
    operation: Awaitable[OperationStatus],
    args: argparse.Namespace,
    err: Callable[[str], None],
) -> OperationStatus:
    """Await ``operation``, writing the replica's Status to stderr every second meanwhile."""
    task = asyncio.ensure_future(operation)
    last = ""
    started = time.monotonic()
    while not task.done():
        await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_S)
        if task.done() or args.quiet:
            continue
        try:
            status = await admin.status(timeout_s=5.0)
        except EpochalError:
            continue  # the operation's own call reports what went wrong
        line = progress_line(status)
        if line != last:  # a line when something changed, not one a second
            err(f"[{time.monotonic() - started:5.0f} s] {line}")
            last = line
    return task.result()


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["dev"]:  # a command line of its own (epochal.devcluster.commands)
        from epochal.devcluster.commands import main as dev_main

        return dev_main(arguments[1:])
    command_line = parser()
    args = command_line.parse_args(arguments)
    if args.command == "reconcile":
        if not args.reconciler:
            command_line.error(
                "name the reconcilers to ask: --reconciler host:port[,host:port...] or "
                "EPOCHAL_RECONCILER"
            )
    elif not args.replica:
        command_line.error("name the replica to ask: --replica host:port or EPOCHAL_REPLICA")
    try:
        return asyncio.run(run(args, print, lambda line: print(line, file=sys.stderr, flush=True)))
    except KeyboardInterrupt:
        if args.command == "reconcile":
            print("interrupted", file=sys.stderr)  # a read: nothing goes on
        else:
            print("interrupted: the operation goes on; `epochal status` shows it", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
