"""Topology operations: ``operations`` (every one in progress, with its step and progress) and
the commands that run them — ``bootstrap``, ``decommission``, ``removenode``, ``replace``,
``move``, ``resume``, ``cancel``, ``cleanup``, ``unregister`` — each naming its node (an id or an
address).

An operation is asked of the node that drives it (``epochal.v1.ReplicaAdmin``): a join, leave,
move or replace of the node itself; the removal of a dead node of any other live one. The call
answers when the operation has finished, failed or been refused; meanwhile its progress (step,
state, ranges, streamed bytes, ETA) is shown on stderr — a progress bar on a terminal, a line per
change otherwise. Interrupted (Ctrl-C, a lost connection), the operation goes on: ``epochal
operations`` shows it, ``resume`` and ``cancel`` act on it. Exit code 0 when it finished (or
was cancelled as asked), 1 when it was refused or failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from epochal.admin import (
    AdminRequest,
    Cancel,
    Cleanup,
    OperationRequest,
    OperationStatus,
    Remove,
    Resume,
)
from epochal.admin_client import AdminClient
from epochal.cli.connect import Cluster
from epochal.cli.failures import Refused, Unreachable
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit, stderr_console, table
from epochal.cli.runner import failure_of, opened, run
from epochal.errors import EpochalError
from epochal.tcm import NodeInfo, NodeState, SequenceKind

PROGRESS_INTERVAL_S = 1.0
FINISHED = ("finished", "aborted", "cancelled")


# ---------------------------------------------------------------------- operations


@click.command()
@global_options
def operations() -> int:
    """Every topology operation in progress, and each replica's last one."""
    return run(_operations)


async def _operations(options: Options) -> int:
    async with opened(options) as cluster:
        nodes = cluster.live_nodes()
        answers = await asyncio.gather(
            *(_status_of(n.address) for n in nodes), return_exceptions=True
        )
        metadata = cluster.metadata
    by_driver: dict[str, OperationStatus] = {}
    replicas = []
    for node, answer in zip(nodes, answers, strict=True):
        if isinstance(answer, OperationStatus):
            by_driver[node.node_id] = answer
            replicas.append({"node": node.node_id, "reachable": True, **_status_dict(answer)})
        elif isinstance(answer, Exception):
            replicas.append({"node": node.node_id, "reachable": False})
        else:
            raise answer  # type: ignore[misc]
    in_progress = []
    for node_id, sequence in sorted(metadata.sequences.items()):
        driver = next(  # the replica whose operation is this sequence (running or not)
            (
                d
                for d, s in sorted(by_driver.items())
                if s.node_id == node_id and s.kind == sequence.kind.value
            ),
            None,
        )
        progress = by_driver[driver] if driver else None
        in_progress.append(
            {
                "node": node_id,
                "kind": sequence.kind.value,
                "step": sequence.done.value,
                "next_step": sequence.next_step.value if sequence.next_step else None,
                "cancelling": sequence.cancelling,
                "prepared_epoch": sequence.prepared_epoch,
                "driver": driver,
                "progress": _status_dict(progress) if progress else None,
            }
        )
    data = {"epoch": metadata.epoch, "in_progress": in_progress, "replicas": replicas}
    emit(options.output, data, lambda: operations_tables(data))
    return 0


async def _status_of(address: str) -> OperationStatus:
    async with AdminClient(address) as admin:
        return await admin.status(timeout_s=3.0)


def _status_dict(status: OperationStatus) -> dict[str, Any]:
    shown = asdict(status)
    shown["eta_s"] = None if status.eta_s < 0 else status.eta_s
    return shown


def operations_tables(data: dict[str, Any]) -> list[Any]:
    in_progress = data["in_progress"]
    shown: list[Any] = [
        f"Epoch: {data['epoch']}   Operations in progress: {len(in_progress) or 'none'}"
    ]
    if in_progress:
        shown.append(
            table(
                ["NODE", "OPERATION", "STEP DONE", "NEXT", "DRIVER", "STATE", "PROGRESS"],
                [
                    [
                        o["node"],
                        o["kind"] + (" (cancelling)" if o["cancelling"] else ""),
                        o["step"],
                        o["next_step"],
                        o["driver"],
                        o["progress"]["state"] if o["progress"] else "not running",
                        _progress_text(o["progress"]) if o["progress"] else "",
                    ]
                    for o in in_progress
                ],
            )
        )
    shown.append(
        table(
            ["REPLICA", "LAST OPERATION", "OF", "STEP", "STATE", "> EPOCH", "MESSAGE"],
            [
                [
                    r["node"],
                    r.get("kind") or "",
                    r.get("node_id") or "",
                    r.get("step") or "",
                    r.get("state") or "" if r["reachable"] else "unreachable",
                    r.get("epoch") or "",
                    r.get("message") or "",
                ]
                for r in data["replicas"]
            ],
        )
    )
    return shown


def _progress_text(status: dict[str, Any]) -> str:
    parts = []
    if status["ranges_total"]:
        parts.append(f"{status['ranges_done']}/{status['ranges_total']} ranges")
    if status["streamed_bytes"]:
        parts.append(f"{status['streamed_bytes'] / 1e6:.1f} MB")
    if status["eta_s"] is not None:
        parts.append(f"ETA {status['eta_s']:.0f} s")
    return ", ".join(parts)


def progress_line(status: OperationStatus) -> str:
    eta = f", ETA {status.eta_s:.0f} s" if status.eta_s >= 0 else ""
    ranges = f", {status.ranges_done}/{status.ranges_total} ranges" if status.ranges_total else ""
    return (
        f"{status.kind or '-'} of {status.node_id}: {status.step or '-'} done, {status.state}"
        f"{ranges}, {status.streamed_bytes / 1e6:.1f} MB{eta}"
    )


# ---------------------------------------------------------------------- running one


async def run_operation(
    options: Options,
    node_ref: str,
    asked: OperationRequest | Cleanup | Callable[[Cluster, NodeInfo], OperationRequest | Cleanup],
    *,
    via: str = "",
) -> int:
    """Ask the request (or what ``asked`` makes of the cluster and the node) of the node that
    drives it and wait, showing its progress."""
    async with opened(options) as cluster:
        request = asked if not callable(asked) else asked(cluster, cluster.node(node_ref))
        driver = await _driver(cluster, node_ref, request, via)
        async with AdminClient(driver) as admin:
            try:
                if isinstance(request, Cleanup):
                    result = await admin.cleanup(request, timeout_s=max(options.timeout_s, 120))
                    data = {"node": node_ref, "epoch": result.epoch, "removed": result.removed}
                    emit(
                        options.output,
                        data,
                        lambda: [
                            f"removed {result.removed} cells and log entries from {node_ref} "
                            f"(owners as of epoch {result.epoch})"
                        ],
                    )
                    return 0
                status = await _with_progress(
                    admin, admin.run(request, timeout_s=86_400.0), options
                )
            except EpochalError as error:
                raise failure_of(error, f"{_name(request)} of {node_ref} at {driver}") from None
    data = _status_dict(status)
    emit(options.output, data, lambda: [describe_status(status)])
    if status.state not in FINISHED:
        raise Refused(f"{status.kind} of {status.node_id} {status.state}: {status.message}")
    return 0


def _name(request: AdminRequest) -> str:
    return type(request).__name__.lower()


async def _driver(cluster: Cluster, node_ref: str, request: AdminRequest, via: str) -> str:
    """The address of the replica that drives ``request`` for ``node_ref``: the node itself, or,
    for the removal of a dead node, ``via`` or the first other joined replica that answers."""
    node = cluster.node(node_ref)
    sequence = cluster.metadata.sequences.get(node.node_id)
    removal = isinstance(request, Remove) or (
        isinstance(request, Resume | Cancel)
        and sequence is not None
        and sequence.kind is SequenceKind.REMOVE
    )
    if via:
        return cluster.node(via).address
    if not removal:
        return node.address
    others = [
        n.address
        for n in cluster.live_nodes()
        if n.node_id != node.node_id and n.state is NodeState.JOINED
    ]
    for address in others:
        try:
            await cluster.describe_replica(address)
        except Unreachable:
            continue
        return address
    raise Refused(
        f"no other joined replica answers to drive the removal of {node.node_id} (asked: "
        f"{', '.join(others) or 'none'})"
    )


async def _with_progress(
    admin: AdminClient, operation: Awaitable[OperationStatus], options: Options
) -> OperationStatus:
    """Await ``operation``, showing the replica's Status on stderr meanwhile: a progress bar on a
    terminal, a line per change otherwise, nothing with --quiet. The Status is asked every
    second either way: a driver that has not answered it for --timeout-s has stopped (its call
    would wait for ever on a process that is stopped, not dead), and the command says so."""
    task = asyncio.ensure_future(operation)
    console = stderr_console()
    try:
        if options.quiet or not console.is_terminal:
            shown = [""]
            started = time.monotonic()

            def line(status: OperationStatus) -> None:
                text = progress_line(status)
                if not options.quiet and text != shown[0]:  # when something changed
                    stamp = f"[{time.monotonic() - started:5.0f} s] "
                    console.print(stamp + text, markup=False, highlight=False)
                    shown[0] = text

            return await _watch(admin, task, line, options.timeout_s)
        with Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),  # ranges streamed of those to stream (pulsing until that is known)
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            bar = progress.add_task("starting", total=None)

            def update(status: OperationStatus) -> None:
                progress.update(
                    bar,
                    description=progress_line(status),
                    completed=status.ranges_done,
                    total=status.ranges_total or None,
                )

            return await _watch(admin, task, update, options.timeout_s)
    finally:
        task.cancel()


async def _watch(
    admin: AdminClient,
    task: asyncio.Future[OperationStatus],
    show: Callable[[OperationStatus], None],
    timeout_s: float,
) -> OperationStatus:
    answered = time.monotonic()
    while not task.done():
        await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_S)
        if task.done():
            break
        try:
            status = await admin.status(timeout_s=min(timeout_s, 5.0))
        except EpochalError:
            if time.monotonic() - answered > timeout_s:
                raise Unreachable(
                    f"{admin.address} has not answered for {timeout_s:.0f} s; if it is alive "
                    "the operation goes on (epochal operations shows it)"
                ) from None
            continue
        answered = time.monotonic()
        show(status)
    return task.result()


def describe_status(status: OperationStatus) -> str:
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
            f"{status.streamed_bytes / 1e6:.1f} MB, {status.streamed_cells} cells, "
            f"{status.streamed_mutations} log entries"
        )
    if status.reconciled_mutations:
        lines.append(f"reconciled  {status.reconciled_mutations} log entries")
    if status.barrier_level:
        lines.append(f"barrier     {status.barrier_level}")
    return "\n".join(lines)
