"""Which other CMS members answer: the source of ``epochal_cms_unreachable_members``.

Each other member is asked the gRPC health check every ``interval_s``, with a deadline of
``timeout_s``; one that did not answer its last check (no connection, the deadline passed — a
stopped or partitioned process) is unreachable until it answers again. An answer of any status
counts as an answer: a member that is starting is there. Paxos traffic alone could not tell:
followers do not talk to each other, and a leader that is the one stopped sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from epochal.cms.peers import PeerTransport

INTERVAL_S = 1.0
TIMEOUT_S = 1.0


class PeerHealth:
    def __init__(
        self,
        transport: PeerTransport,
        voters: Callable[[], Iterable[str]],
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.transport = transport
        self.voters = voters  # the voting members other than this one
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.silent: frozenset[str] = frozenset()  # replaced whole: read from the scrape thread
        self.unreachable = 0

    async def run_forever(self) -> None:
        while True:
            peers = [p for p in self.voters() if p in self.transport.peers()]
            answered = await asyncio.gather(*(self._answers(p) for p in peers))
            self.silent = frozenset(p for p, ok in zip(peers, answered, strict=True) if not ok)
            self.unreachable = len(self.silent)
            await asyncio.sleep(self.interval_s)

    async def _answers(self, peer: str) -> bool:
        stub = health_pb2_grpc.HealthStub(self.transport.channel(peer))
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=self.timeout_s)
            return True
        return False
