"""Which peers a replica reports unreachable (epochal.replica.reachability, through the real
RemoteHandle over a stub ``ReplicaPeer.Exchange`` on 127.0.0.1): a peer that gives no answer by
the deadline is; a peer that answered — even a reply that could not be used — is not; and a
deadline that passed while this process was stopped (SIGSTOP: after SIGCONT every call in flight
expires at once) says nothing about the peer, so a healthy peer is not reported unreachable —
the reconciler would leave it out of rounds, and fold a cohort without it (issue 28)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from epochal.replica.handles import PeerFailed, RemoteHandle
from epochal.replica.reachability import STALLED_S, PeerReach, counts_as_unreachable
from epochal.wire.channels import Channels
from epochal.wire.status import NO_ANSWER
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc

from .local_server import serving

TIMEOUT_S = 0.2


class StubPeer(replica_pb2_grpc.ReplicaPeerServicer):
    """A peer's Exchange that never answers (``silent``) or answers every request as malformed."""

    def __init__(self, *, silent: bool) -> None:
        self.silent = silent

    async def Exchange(
        self, requests: AsyncIterator[pb.PeerRequests], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PeerReplies]:
        async for batch in requests:
            if not self.silent:
                replies = [pb.PeerReply(id=r.id, malformed="the stub's") for r in batch.requests]
                yield pb.PeerReplies(replies=replies)


async def call_peer(*, silent: bool, stall_s: float = 0.0) -> tuple[BaseException, PeerReach]:
    """One call to the stub peer; ``stall_s``: this process stops running right after sending
    it, for that long (its event loop is blocked, as a SIGSTOPped process's is)."""
    add = replica_pb2_grpc.add_ReplicaPeerServicer_to_server
    async with serving(StubPeer(silent=silent), add) as address:
        channels, reach = Channels(), PeerReach()
        handle = RemoteHandle("peer", address, channels, reach)
        try:
            future = handle.fetch(1, [], timeout_s=TIMEOUT_S)
            if stall_s:
                await asyncio.sleep(0)  # the request is on its way
                time.sleep(stall_s)  # the fault itself: this process does not run meanwhile
            with pytest.raises(PeerFailed) as failed:
                await future
            return failed.value, reach
        finally:
            handle.close()
            await channels.close()


def test_a_peer_that_gives_no_answer_in_time_is_unreachable() -> None:
    failed, reach = asyncio.run(call_peer(silent=True))
    assert failed.code is grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
    assert reach.unreachable() == {"peer"}


def test_a_deadline_that_passed_while_this_process_was_stopped_says_nothing_of_the_peer() -> None:
    failed, reach = asyncio.run(call_peer(silent=True, stall_s=TIMEOUT_S + 2 * STALLED_S))
    assert failed.code is grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
    assert reach.unreachable() == frozenset()


def test_a_peer_that_answered_is_reachable_even_when_its_answer_is_of_no_use() -> None:
    failed, reach = asyncio.run(call_peer(silent=False))
    assert "the stub's" in str(failed)
    assert reach.unreachable() == frozenset()


@pytest.mark.parametrize(
    "code", sorted(set(grpc.StatusCode) - {grpc.StatusCode.OK}, key=lambda c: c.value[0])
)
def test_only_a_call_that_got_no_answer_counts(code: grpc.StatusCode) -> None:
    assert counts_as_unreachable(code, 0.0) is (code in NO_ANSWER)
    late = code is not grpc.StatusCode.DEADLINE_EXCEEDED and code in NO_ANSWER
    assert counts_as_unreachable(code, 2 * STALLED_S) is late
