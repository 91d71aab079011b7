"""Which CMS voters answer: the source of ``epochal_cms_unreachable_members`` in every process.

Each voting member (a CMS member asks the others; a replica or reconciler asks them all) is
asked the gRPC health check every ``interval_s``, with a deadline of ``timeout_s``; one that did
not answer its last check (no connection, the deadline passed — a stopped or partitioned
process) is unreachable until it answers again. An answer of any serving status counts: a member
that is starting is there. The traffic a process has anyway could not tell: CMS followers do not
talk to each other, a stopped leader sends nothing, and a replica talks to one member at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from epochal.probes import health_of
from epochal.telemetry.context import detached
from epochal.wire.channels import Channels

INTERVAL_S = 1.0
TIMEOUT_S = 1.0
ANSWERS = frozenset({"SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"})  # else a failed call's code


class CMSHealth:
    def __init__(
        self,
        voters: Callable[[], Mapping[str, str]],
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.voters = voters  # the voting members to ask: id -> address
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.channels = Channels()
        self.silent: frozenset[str] = frozenset()  # replaced whole: read from the scrape thread
        self.unreachable = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = detached(self.run_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def run_forever(self) -> None:
        try:
            while True:
                voters = dict(self.voters())
                answers = await asyncio.gather(
                    *(health_of(self.channels, a, self.timeout_s) for a in voters.values())
                )
                self.silent = frozenset(
                    member
                    for member, answer in zip(voters, answers, strict=True)
                    if answer not in ANSWERS
                )
                self.unreachable = len(self.silent)
                await asyncio.sleep(self.interval_s)
        finally:
            await self.channels.close()
