"""Channels to the other CMS members: Paxos messages out, commits forwarded to the leader.

Paxos messages are one-way: each peer gets one long-lived ``Step`` stream, and a message lost
with a broken stream is simply a lost message (the core retransmits). Forwarded commits go to the
leader on a ``Forward`` stream, in batches of whatever queued meanwhile; the leader's answer
settles the caller's future unless something else (the member applying the slot that carries
the commit) settled it first.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable

import grpc

from epochal.cms.errors import CommitError, InvalidCommit, NotLeaderError, RejectedCommit
from epochal.cms.state_machine import CommitResult
from epochal.paxos import Message
from epochal.wire.channels import insecure_channel
from epochal.wire.paxos import messages_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

log = logging.getLogger(__name__)

MAX_QUEUED_MESSAGES = 4096
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 1.0
MAX_FORWARD_BATCH = 512


class PeerTransport:
    def __init__(self, member_id: str, peers: dict[str, str]) -> None:
        self.member_id = member_id
        self._channels = {p: insecure_channel(a) for p, a in peers.items()}
        self._stubs = {p: cms_pb2_grpc.CMSPeerStub(c) for p, c in self._channels.items()}
        self.cms_stubs = {p: cms_pb2_grpc.CMSStub(c) for p, c in self._channels.items()}
        self._streams: dict[str, _PeerStream] = {}
        self._forwarders: dict[str, _Forwarder] = {}

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

    def forward(
        self, leader: str, request: cms_pb2.CommitRequest, answer: asyncio.Future[CommitResult]
    ) -> None:
        """Send ``request`` to the leader; its answer (or a failure) settles ``answer``."""
        forwarder = self._forwarders.get(leader)
        if forwarder is None:
            forwarder = self._forwarders[leader] = _Forwarder(self.member_id, self._stubs[leader])
        forwarder.submit(request, answer)

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
    """Commits bound for the leader, over one ``Forward`` stream. Whatever queued while a
    write was in flight goes in the next batch; responses come back by batch id as the leader
    finishes them, so no commit waits for an unrelated one. A broken stream fails its
    outstanding commits as "not leader" (the caller retries with the same entry id)."""

    def __init__(self, member_id: str, stub: cms_pb2_grpc.CMSPeerStub) -> None:
        self._member_id = member_id
        self._stub = stub
        self._queue: list[tuple[cms_pb2.CommitRequest, asyncio.Future[CommitResult]]] = []
        self._outstanding: dict[int, list[asyncio.Future[CommitResult]]] = {}
        self._next_batch = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def submit(self, request: cms_pb2.CommitRequest, answer: asyncio.Future[CommitResult]) -> None:
        self._queue.append((request, answer))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        call = self._stub.Forward()
        reader = asyncio.get_running_loop().create_task(self._read(call))
        try:
            while not call.done():
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    batch = self._queue[:MAX_FORWARD_BATCH]
                    del self._queue[:MAX_FORWARD_BATCH]
                    self._next_batch += 1
                    self._outstanding[self._next_batch] = [f for _, f in batch]
                    await call.write(
                        cms_pb2.ForwardRequest(
                            commits=[r for r, _ in batch],
                            batch_id=self._next_batch,
                            member_id=self._member_id,
                        )
                    )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.info("forward stream to the leader broke: %s", _describe(error))
        finally:
            reader.cancel()
            call.cancel()
            self._fail_outstanding()

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        try:
            async for response in call:
                futures = self._outstanding.pop(response.batch_id, [])
                for future, outcome in zip(futures, response.outcomes, strict=True):
                    if future.done():
                        continue
                    if outcome.HasField("committed"):
                        future.set_result(
                            CommitResult(
                                outcome.committed.epoch,
                                outcome.committed.duplicate,
                                outcome.batch_size,
                            )
                        )
                    else:
                        future.set_exception(error_from_outcome(outcome.error))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.info("forward stream from the leader broke: %s", _describe(error))
        self._wake.set()
        self._fail_outstanding()

    def _fail_outstanding(self) -> None:
        failure = NotLeaderError(None)
        failure.message = "the stream to the leader broke before it answered; retry"
        pending = [f for futures in self._outstanding.values() for f in futures]
        pending += [f for _, f in self._queue]
        self._outstanding.clear()
        self._queue.clear()
        for future in pending:
            if not future.done():
                future.set_exception(failure)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


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
