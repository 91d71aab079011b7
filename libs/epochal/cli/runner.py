"""What every command shares: its options resolved, its coroutine run, the cluster opened and
closed around it, and the SDK's errors turned into the command line's (``failures``).

    @click.command()
    @global_options
    def ring() -> int:
        return run(_ring)

    async def _ring(options: Options) -> int:
        async with opened(options) as cluster:
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import click
import grpc

from epochal.cli.connect import Cluster, connect
from epochal.cli.failures import Failure, Refused, Unreachable
from epochal.cli.options import Options, resolve
from epochal.errors import EpochalError
from epochal.status import code_of

# Statuses that mean nothing answered (the rest: the process answered no).
NOT_ANSWERED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def run(command: Callable[[Options], Coroutine[Any, Any, int]]) -> int:
    """Resolve this invocation's options and run ``command`` on them; its exit code."""
    options = resolve(click.get_current_context())
    try:
        return asyncio.run(command(options))
    except EpochalError as error:
        raise failure_of(error) from None


def failure_of(error: EpochalError, what: str = "") -> Failure:
    """The command line's failure for an SDK error: Unreachable when nothing answered."""
    message = f"{what}: {error.message}" if what else error.message
    if error.status and error.message != error.status:
        message = f"{message} ({error.status})"
    if code_of(error) in NOT_ANSWERED:
        return Unreachable(message)
    return Refused(message)


@contextlib.asynccontextmanager
async def opened(options: Options) -> AsyncIterator[Cluster]:
    """The cluster ``--cluster`` names, closed afterwards."""
    cluster = await connect(options.require_cluster(), options.timeout_s)
    try:
        yield cluster
    finally:
        await cluster.close()
