"""The topology operations as commands, each naming its node by id or address: ``bootstrap``,
``decommission``, ``removenode``, ``replace``, ``move``, ``resume``, ``cancel``, ``cleanup``
(run by ``epochal.cli.operations.run_operation`` on the replica that drives them) and
``unregister`` (a commit through the CMS)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from epochal.admin import (
    AdminRequest,
    Bootstrap,
    BootstrapAbort,
    BootstrapResume,
    Cancel,
    Cleanup,
    Decommission,
    DecommissionAbort,
    Move,
    Remove,
    Replace,
    Resume,
)
from epochal.cli.connect import Cluster
from epochal.cli.failures import Refused
from epochal.cli.operations import operations, run_operation
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit
from epochal.cli.runner import failure_of, opened, run
from epochal.cms_client import CMSClient
from epochal.errors import EpochalError
from epochal.tcm import NodeInfo, Unregister

# ---------------------------------------------------------------------- the commands

NODE = click.argument("node", metavar="NODE")


@click.command()
@NODE
@click.option("--tokens", help="explicit tokens, comma-separated")
@click.option("--num-tokens", type=click.IntRange(min=0), default=0, help="else this many")
@click.option("--resume", is_flag=True, help="continue NODE's interrupted join")
@click.option("--abort", is_flag=True, help="stop NODE's join and undo its steps")
@global_options
def bootstrap(node: str, tokens: str | None, num_tokens: int, resume: bool, abort: bool) -> int:
    """Join NODE (registered, not joined) to the ring."""
    if resume and abort:
        raise click.UsageError("--resume or --abort, not both")
    request: AdminRequest
    if resume:
        request = BootstrapResume()
    elif abort:
        request = BootstrapAbort()
    else:
        request = Bootstrap(tokens=_tokens(tokens), num_tokens=num_tokens)
    return run(lambda options: run_operation(options, node, request))


@click.command()
@NODE
@click.option("--abort", is_flag=True, help="stop NODE's decommission and undo its steps")
@global_options
def decommission(node: str, abort: bool) -> int:
    """Take NODE out of the ring, streaming its ranges to their new owners."""
    request = DecommissionAbort() if abort else Decommission()
    return run(lambda options: run_operation(options, node, request))


@click.command()
@NODE
@click.option("--via", metavar="NODE", default="", help="the live replica that drives it")
@global_options
def removenode(node: str, via: str) -> int:
    """Remove the dead NODE, its ranges streamed from the other replicas."""
    return run(
        lambda options: run_operation(
            options, node, lambda _, found: Remove(node_id=found.node_id), via=via
        )
    )


@click.command()
@NODE
@click.argument("dead", metavar="DEAD")
@global_options
def replace(node: str, dead: str) -> int:
    """NODE (registered, not joined) takes over the tokens of the dead node DEAD."""
    return run(
        lambda options: run_operation(
            options, node, lambda cluster, _: Replace(replaced=cluster.node(dead).node_id)
        )
    )


@click.command()
@NODE
@click.option("--tokens", required=True, metavar="TOKEN,...", help="the new tokens")
@global_options
def move(node: str, tokens: str) -> int:
    """Move NODE to new tokens (--tokens -5,7: comma-separated, negative ones too)."""
    return run(lambda options: run_operation(options, node, Move(tokens=_tokens(tokens))))


@click.command()
@NODE
@global_options
def resume(node: str) -> int:
    """Continue the interrupted operation of NODE."""
    return run(lambda options: _own_or_other(options, node, cancel=False))


@click.command()
@NODE
@global_options
def cancel(node: str) -> int:
    """Undo the operation of NODE, one step per epoch."""
    return run(lambda options: _own_or_other(options, node, cancel=True))


async def _own_or_other(options: Options, node: str, *, cancel: bool) -> int:
    def asked(cluster: Cluster, found: NodeInfo) -> Cancel | Resume:
        if found.node_id not in cluster.metadata.sequences:
            raise Refused(f"{found.node_id} has no operation in progress (epochal operations)")
        return Cancel(node_id=found.node_id) if cancel else Resume(node_id=found.node_id)

    return await run_operation(options, node, asked)


@click.command()
@NODE
@global_options
def cleanup(node: str) -> int:
    """Delete from NODE the ranges it no longer replicates."""
    return run(lambda options: run_operation(options, node, Cleanup()))


@click.command()
@NODE
@global_options
def unregister(node: str) -> int:
    """Forget NODE, registered but never joined (an Unregister through the CMS)."""
    return run(lambda options: _unregister(options, node))


async def _unregister(options: Options, node: str) -> int:
    async with opened(options) as cluster:
        node_id = cluster.node(node).node_id
        async with CMSClient(cluster.cms_addresses(), total_timeout_s=options.timeout_s) as cms:
            try:
                committed = await cms.commit(Unregister(node_id=node_id))
            except EpochalError as error:
                raise failure_of(error, f"unregister {node_id}") from None
    data = {"node": node_id, "epoch": committed.epoch}
    emit(options.output, data, lambda: [f"unregistered {node_id} at epoch {committed.epoch}"])
    return 0


def _tokens(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(t) for t in text.replace(" ", ",").split(",") if t)
    except ValueError:
        raise click.UsageError(f"tokens are integers, comma-separated: {text!r}") from None


COMMANDS: Sequence[click.Command] = (
    operations,
    bootstrap,
    decommission,
    removenode,
    replace,
    move,
    resume,
    cancel,
    cleanup,
    unregister,
)
