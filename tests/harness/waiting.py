"""Waiting on what the system shows rather than for a guessed time: a bounded wait on a
condition, in a test's event loop or in a thread that runs none, and a scenario run against
local processes that are killed afterwards whatever happens."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

T = TypeVar("T")

POLL_INTERVAL_S = 0.02

# What is awaited, for the error at the timeout; a callable is asked then, to say how things
# stand at that moment.
What = str | Callable[[], str]


async def until(
    what: What,
    check: Callable[[], T | Awaitable[T]],
    timeout_s: float = 60.0,
    interval_s: float = POLL_INTERVAL_S,
) -> T:
    """Until ``check`` (a function or a coroutine function) answers something true; returns
    that answer. Raises TimeoutError naming ``what`` if it has not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return answer  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise TimeoutError(_timed_out(what, timeout_s))
        await asyncio.sleep(interval_s)


def block_until(
    what: What, check: Callable[[], T], timeout_s: float, interval_s: float = 0.05
) -> T:
    """``until`` for code that runs no event loop: the thread sleeps between checks."""
    deadline = time.monotonic() + timeout_s
    while not (answer := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(_timed_out(what, timeout_s))
        time.sleep(interval_s)
    return answer


def _timed_out(what: What, timeout_s: float) -> str:
    return f"{what() if callable(what) else what}: not within {timeout_s} s"


class Closeable(Protocol):
    def close(self) -> None: ...


def run(processes: Closeable, scenario: Callable[[], Awaitable[T]], timeout_s: float) -> T:
    """Run ``scenario`` to its end, failing it past ``timeout_s``; whatever happens, the
    ``processes`` (a LocalCluster, a LocalCMS) are killed afterwards."""
    try:
        return asyncio.run(asyncio.wait_for(scenario(), timeout_s))
    finally:
        processes.close()
