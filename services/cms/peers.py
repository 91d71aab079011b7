"""Channels to the other CMS members: Paxos messages out, commits forwarded to the leader, and
the calls a member makes to catch up (a peer's epoch, pages of its log), answered as domain
values.

Paxos messages are one-way: each peer gets one long-lived ``Step`` stream, and a message lost
with a broken stream is simply a lost message (the core retransmits). Forwarded commits go to the
leader on a ``Forward`` stream, in batches of whatever queued meanwhile; the leader answers what
it does not put in a slot, and the member learns the rest by applying the slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import grpc

from epochal.cms.codec import settle_from_outcome
from epochal.cms.storage import LogEntryRow, SnapshotRow
from epochal.cmscore.state_machine import CommitResult, ProposalItem
from epochal.errors import NotLeader
from epochal.paxos import Message
from epochal.tcm import ClusterMetadata
from epochal.telemetry.context import current_headers, detached, set_headers
from epochal.wire.channels import channel
from epochal.wire.metadata import decode_metadata
from epochal.wire.multiplex import describe, watch, why_broken
from epochal.wire.paxos import messages_to_proto
from epochal.wire.proposal import item_to_proto, signed64
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

log = logging.getLogger(__name__)

MAX_QUEUED_MESSAGES = 4096
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 1.0
MAX_FORWARD_BATCH = 512


@dataclass(frozen=True, slots=True)
class PeerSnapshot:
    metadata: ClusterMetadata
    row: SnapshotRow
    entry_ids: list[tuple[str, int, int]]  # (entry id, epoch, digest) up to the snapshot


@dataclass(frozen=True, slots=True)
class PeerLogPage:
    """A page of a peer's log, decoded."""

    snapshot: PeerSnapshot | None
    entries: list[LogEntryRow]  # transformations as encoded: the caller decodes what it applies
    applied_slot: int
    has_more: bool


class PeerTransport:
    def __init__(self, member_id: str, peers: dict[str, str]) -> None:
        self.member_id = member_id
        self._addresses: dict[str, str] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, cms_pb2_grpc.CMSPeerStub] = {}
        self.cms_stubs: dict[str, cms_pb2_grpc.CMSStub] = {}
        self._streams: dict[str, _PeerStream] = {}
        self._forwarders: dict[str, _Forwarder] = {}
        self.update(peers)

    def update(self, peers: dict[str, str]) -> None:
        """Open channels to members not known yet (the CMS members in the log grew). A member
        that left the voters keeps its channel: it still follows the log as a learner."""
        for peer, address in sorted(peers.items()):
            known = self._addresses.get(peer)
            if known == address:
                continue
            if known is not None:
                log.warning(
                    "member %s moved from %s to %s; keeping %s", peer, known, address, known
                )
                continue
            self._addresses[peer] = address
            opened = self._channels[peer] = channel(address)
            self._stubs[peer] = cms_pb2_grpc.CMSPeerStub(opened)
            self.cms_stubs[peer] = cms_pb2_grpc.CMSStub(opened)

    def peers(self) -> list[str]:
        return list(self.cms_stubs)

    async def epoch_of(self, peer: str, timeout_s: float) -> int:
        """The epoch ``peer`` has applied (raises grpc.aio.AioRpcError when it does not say)."""
        answer = await self.cms_stubs[peer].Describe(cms_pb2.DescribeRequest(), timeout=timeout_s)
        return answer.epoch

    async def fetch_log(
        self,
        peer: str,
        since_epoch: int,
        *,
        include_entry_ids: bool = False,
        entries_only: bool = False,
        timeout_s: float,
    ) -> PeerLogPage:
        """A page of ``peer``'s log after ``since_epoch`` (raises grpc.aio.AioRpcError)."""
        request = cms_pb2.FetchLogRequest(
            since_epoch=since_epoch, include_entry_ids=include_entry_ids, entries_only=entries_only
        )
        response = await self.cms_stubs[peer].FetchLog(request, timeout=timeout_s)
        snapshot = None
        if response.HasField("snapshot"):
            encoded = response.snapshot.metadata.SerializeToString(deterministic=True)
            metadata = decode_metadata(encoded)
            snapshot = PeerSnapshot(
                metadata,
                SnapshotRow(metadata.epoch, response.snapshot.slot, encoded),
                [(r.entry_id, r.epoch, signed64(r.digest)) for r in response.snapshot.entry_ids],
            )
        entries = [
            LogEntryRow(
                entry.epoch,
                entry.slot,
                entry.entry_id,
                entry.transformation.WhichOneof("kind") or "",
                entry.transformation.SerializeToString(deterministic=True),
            )
            for entry in response.entries
        ]
        return PeerLogPage(snapshot, entries, response.applied_slot, response.has_more)

    def send(self, messages: Iterable[Message], trace_headers: Mapping[str, str]) -> None:
        """Send each message to its member; ``trace_headers``: the context of the round they
        belong to (empty: none), carried by the batch that takes them."""
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
            stream.send(batch, trace_headers)

    def forward(
        self, leader: str, item: ProposalItem, answer: asyncio.Future[CommitResult]
    ) -> None:
        """Send ``item`` to the leader; its answer (or a failure) settles ``answer``, unless
        this member settles it first by applying the slot that carries it."""
        forwarder = self._forwarders.get(leader)
        if forwarder is None:
            forwarder = self._forwarders[leader] = _Forwarder(self.member_id, self._stubs[leader])
        forwarder.submit(item, answer)

    async def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        for forwarder in self._forwarders.values():
            forwarder.close()
        for opened in self._channels.values():
            await opened.close(grace=None)


class _PeerStream:
    """One long-lived ``Step`` stream to a peer. Messages queued while a write is in flight go
    together in the next write; when the stream breaks, queued messages are dropped (the
    protocol retransmits) and it reconnects with backoff."""

    def __init__(self, peer: str, stub: cms_pb2_grpc.CMSPeerStub) -> None:
        self.peer = peer
        self._stub = stub
        self._pending: list[Message] = []
        self._trace_headers: Mapping[str, str] = {}
        self._wake = asyncio.Event()
        self.connected = False
        self._task = detached(self._run())

    def send(self, messages: list[Message], trace_headers: Mapping[str, str]) -> None:
        if len(self._pending) + len(messages) > MAX_QUEUED_MESSAGES:
            return  # the peer is slow or gone; Paxos retransmits what matters
        self._pending.extend(messages)
        if trace_headers:
            self._trace_headers = trace_headers
        self._wake.set()

    async def _run(self) -> None:
        backoff_s = RECONNECT_MIN_S
        while True:
            call = watch(self._stub.Step())
            try:
                while not call.done():
                    await self._wake.wait()
                    self._wake.clear()
                    batch, self._pending = self._pending, []
                    headers, self._trace_headers = self._trace_headers, {}
                    if batch:
                        request = cms_pb2.StepRequest(messages=messages_to_proto(batch))
                        set_headers(request, headers)
                        await call.write(request)
                        if not self.connected:
                            log.info("stream to member %s is up", self.peer)
                        self.connected = True
                        backoff_s = RECONNECT_MIN_S
            except asyncio.CancelledError:
                call.cancel()
                raise
            except Exception as error:
                if self.connected:
                    reason, _ = await why_broken(call, error)
                    log.info("stream to member %s broke: %s", self.peer, reason)
            self.connected = False
            call.cancel()
            self._pending.clear()
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, RECONNECT_MAX_S)

    def close(self) -> None:
        self._task.cancel()


class _Forwarder:
    """Commits bound for the leader, over one ``Forward`` stream. Whatever queued while a
    write was in flight goes in the next batch. The leader answers only what it did not carry
    in a slot (this member learns the rest from the votes, as a learner of those slots), so a
    batch is forgotten once every commit in it is answered, whichever way. A broken stream
    fails its outstanding commits as "not leader" (the caller retries with the same entry id)."""

    def __init__(self, member_id: str, stub: cms_pb2_grpc.CMSPeerStub) -> None:
        self._member_id = member_id
        self._stub = stub
        # A commit, its answer, and its span's context (W3C headers; {}: none).
        self._queue: list[tuple[ProposalItem, asyncio.Future[CommitResult], Mapping[str, str]]] = []
        self._outstanding: dict[int, list[asyncio.Future[CommitResult]]] = {}
        self._next_batch = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_broken = ""

    def submit(self, item: ProposalItem, answer: asyncio.Future[CommitResult]) -> None:
        self._queue.append((item, answer, current_headers()))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = detached(self._run())  # each item carries its own trace context

    async def _run(self) -> None:
        call = watch(self._stub.Forward())
        reader = asyncio.get_running_loop().create_task(self._read(call))
        try:
            while not call.done():
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    batch = self._queue[:MAX_FORWARD_BATCH]
                    del self._queue[:MAX_FORWARD_BATCH]
                    self._next_batch += 1
                    self._track(self._next_batch, [f for _, f, _ in batch])
                    request = cms_pb2.ForwardRequest(
                        items=[item_to_proto(item) for item, _, _ in batch],
                        batch_id=self._next_batch,
                        member_id=self._member_id,
                    )
                    if any(headers for _, _, headers in batch):
                        for _, _, headers in batch:
                            set_headers(request.traces.add(), headers)
                    await call.write(request)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            reason, _ = await why_broken(call, error)
            # A leader that is down fails every attempt alike: say so once, not per commit.
            level = logging.DEBUG if reason == self._last_broken else logging.INFO
            self._last_broken = reason
            log.log(level, "forward stream to the leader broke: %s", reason)
        finally:
            reader.cancel()
            call.cancel()
            self._fail_outstanding()

    def _track(self, batch_id: int, futures: list[asyncio.Future[CommitResult]]) -> None:
        self._outstanding[batch_id] = futures
        left = len(futures)

        def answered(_: asyncio.Future[CommitResult]) -> None:
            nonlocal left
            left -= 1
            if left == 0:
                self._outstanding.pop(batch_id, None)

        for future in futures:
            future.add_done_callback(answered)

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        try:
            async for response in call:
                futures = self._outstanding.get(response.batch_id, ())
                for outcome in response.outcomes:
                    if outcome.index < len(futures):
                        settle_from_outcome(futures[outcome.index], outcome)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.info("forward stream from the leader broke: %s", describe(error))
        self._wake.set()
        self._fail_outstanding()

    def _fail_outstanding(self) -> None:
        pending = [f for futures in self._outstanding.values() for f in futures]
        pending += [f for _, f, _ in self._queue]
        self._outstanding.clear()
        self._queue.clear()
        for future in pending:
            if not future.done():  # each waiter gets an error of its own
                future.set_exception(
                    NotLeader(None, "the stream to the leader broke before it answered; retry")
                )

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
