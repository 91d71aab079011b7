"""Which other CMS members answer: the source of ``epochal_cms_unreachable_members``.

Each other voting member is asked the gRPC health check every ``interval_s``, with a deadline
of ``timeout_s``; one that did not answer its last check (no connection, the deadline passed —
a stopped or partitioned process) is unreachable until it answers again. An answer of any
serving status counts: a member that is starting is there. Paxos traffic alone could not tell:
followers do not talk to each other, and a leader that is the one stopped sends nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from epochal.probes import health_of
from epochal.wire.channels import Channels

INTERVAL_S = 1.0
TIMEOUT_S = 1.0
ANSWERS = frozenset({"SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"})  # else a failed call's code


class PeerHealth:
    def __init__(
        self,
        voters: Callable[[], Mapping[str, str]],
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.voters = voters  # the other voting members: id -> address
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.channels = Channels()
        self.silent: frozenset[str] = frozenset()  # replaced whole: read from the scrape thread
        self.unreachable = 0

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
