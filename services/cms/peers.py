"""Channels to the other CMS members: Paxos messages out, commits forwarded to the leader.

Paxos messages are one-way: each peer gets one long-lived ``Step`` stream, and a message lost
with a broken stream is simply a lost message (the core retransmits). Forwarded commits are batched
per leader: while one ``Forward`` call is in flight, later commits wait and go together in the
next one, so a follower adds one hop, not one call per commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from epochal.cms.errors import CommitError, InvalidCommit, NotLeaderError, RejectedCommit
from epochal.paxos import Message
from epochal.wire.channels import insecure_channel
from epochal.wire.paxos import messages_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

log = logging.getLogger(__name__)

MAX_QUEUED_MESSAGES = 4096
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 1.0
MAX_FORWARD_BATCH = 512


@dataclass(frozen=True, slots=True)
class ForwardOutcome:
    epoch: int
    duplicate: bool


class PeerTransport:
    def __init__(self, member_id: str, peers: dict[str, str]) -> None:
        self.member_id = member_id
        self.addresses = dict(peers)
        self._channels = {p: insecure_channel(a) for p, a in peers.items()}
        self._stubs = {p: cms_pb2_grpc.CMSPeerStub(c) for p, c in self._channels.items()}
        self.cms_stubs = {p: cms_pb2_grpc.CMSStub(c) for p, c in self._channels.items()}
        self._streams: dict[str, _PeerStream] = {}
        self._forwarders: dict[str, _Forwarder] = {}

    @property
    def unreachable(self) -> set[str]:
        return {peer for peer, stream in self._streams.items() if not stream.connected}

    def send(self, messages: Iterable[Message]) -> None:
        by_peer: dict[str, list[Message]] = defaultdict(list)
        for message in messages:
            by_peer[message.dst].append(message)
        for peer, batch in by_peer.items():
            if peer not in self._stubs:
                log.warning("dropping %d message(s) for unknown member %s", len(batch), peer)
                continue
            stream = self._streams.get(peer)
            if stream is None:
                stream = self._streams[peer] = _PeerStream(peer, self._stubs[peer])
            stream.send(batch)

    async def forward(
        self, leader: str, request: cms_pb2.CommitRequest, timeout_s: float
    ) -> ForwardOutcome:
        forwarder = self._forwarders.get(leader)
        if forwarder is None:
            forwarder = self._forwarders[leader] = _Forwarder(self._stubs[leader])
        return await forwarder.submit(request, timeout_s)

    async def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        for forwarder in self._forwarders.values():
            forwarder.close()
        for channel in self._channels.values():
            await channel.close(grace=None)


class _PeerStream:
    """One long-lived ``Step`` stream to a peer. Messages queued while a write is in flight go
    together in the next write; when the stream breaks, queued messages are dropped (the
    protocol retransmits) and it reconnects with backoff."""

    def __init__(self, peer: str, stub: cms_pb2_grpc.CMSPeerStub) -> None:
        self.peer = peer
        self._stub = stub
        self._pending: list[Message] = []
        self._wake = asyncio.Event()
        self.connected = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    def send(self, messages: list[Message]) -> None:
        if len(self._pending) + len(messages) > MAX_QUEUED_MESSAGES:
            return  # the peer is slow or gone; Paxos retransmits what matters
        self._pending.extend(messages)
        self._wake.set()

    async def _run(self) -> None:
        backoff_s = RECONNECT_MIN_S
        while True:
            call = self._stub.Step()
            try:
                while not call.done():
                    await self._wake.wait()
                    self._wake.clear()
                    batch, self._pending = self._pending, []
                    if batch:
                        await call.write(cms_pb2.StepRequest(messages=messages_to_proto(batch)))
                        if not self.connected:
                            log.info("stream to member %s is up", self.peer)
                        self.connected = True
                        backoff_s = RECONNECT_MIN_S
            except asyncio.CancelledError:
                call.cancel()
                raise
            except Exception as error:
                if self.connected:
                    log.info("stream to member %s broke: %s", self.peer, _describe(error))
            self.connected = False
            call.cancel()
            self._pending.clear()
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, RECONNECT_MAX_S)

    def close(self) -> None:
        self._task.cancel()


def _describe(error: Exception) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code().name
    return type(error).__name__


class _Forwarder:
    def __init__(self, stub: cms_pb2_grpc.CMSPeerStub) -> None:
        self._stub = stub
        self._queue: list[tuple[cms_pb2.CommitRequest, asyncio.Future[ForwardOutcome]]] = []
        self._sending = False
        self._task: asyncio.Task[None] | None = None

    async def submit(self, request: cms_pb2.CommitRequest, timeout_s: float) -> ForwardOutcome:
        future: asyncio.Future[ForwardOutcome] = asyncio.get_running_loop().create_future()
        self._queue.append((request, future))
        if not self._sending:
            self._sending = True
            self._task = asyncio.get_running_loop().create_task(self._drain(timeout_s))
        return await future

    async def _drain(self, timeout_s: float) -> None:
        try:
            while self._queue:
                batch = self._queue[:MAX_FORWARD_BATCH]
                del self._queue[:MAX_FORWARD_BATCH]
                await self._send(batch, timeout_s)
        finally:
            self._sending = False

    async def _send(
        self,
        batch: list[tuple[cms_pb2.CommitRequest, asyncio.Future[ForwardOutcome]]],
        timeout_s: float,
    ) -> None:
        request = cms_pb2.ForwardRequest(commits=[r for r, _ in batch])
        try:
            response = await self._stub.Forward(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            failure = NotLeaderError(None)
            failure.message = f"forwarding to the leader failed ({error.code().name}); retry"
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
            return
        for (_, future), outcome in zip(batch, response.outcomes, strict=True):
            if future.done():
                continue
            if outcome.HasField("committed"):
                future.set_result(
                    ForwardOutcome(outcome.committed.epoch, outcome.committed.duplicate)
                )
            else:
                future.set_exception(error_from_outcome(outcome.error))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for _, future in self._queue:
            if not future.done():
                future.cancel()


def error_from_outcome(error: cms_pb2.CommitError) -> CommitError:
    """Rebuild the leader's error on the follower, so the client sees the leader's answer."""
    if error.code == "FAILED_PRECONDITION":
        return RejectedCommit(error.message, rule=error.rule)
    if error.code == "INVALID_ARGUMENT":
        return InvalidCommit(error.message, rule=error.rule)
    if error.rule.startswith("not_leader:"):
        return NotLeaderError(error.rule.removeprefix("not_leader:") or None)
    failure = CommitError(error.message, rule=error.rule)
    failure.code = error.code or "UNAVAILABLE"
    return failure


def outcome_from_error(error: CommitError) -> cms_pb2.CommitOutcome:
    rule = error.rule
    if isinstance(error, NotLeaderError):
        rule = f"not_leader:{error.leader_id or ''}"
    return cms_pb2.CommitOutcome(
        error=cms_pb2.CommitError(code=error.code, message=error.message, rule=rule)
    )
