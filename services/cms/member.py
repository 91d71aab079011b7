"""A CMS member: the one loop that owns the Paxos core and the metadata state machine.

Theory of operation
-------------------
Everything that touches ``PaxosNode`` or ``MetadataStateMachine`` runs on the asyncio loop, so
there are no locks. The loop also makes every storage write, synchronously: a hand-off to a
storage thread and back costs two thread wake-ups per vote, more than the fsync itself on these
machines. Reads (catch-up pages, the state at start) run on one reader thread with connections
of their own. Each pass of ``_process`` drains the core's Readies: it sends the proposer's
messages at once and queues the acceptor's writes for the next loop step — after the peer
streams have handed the leader's Accepts to gRPC, so that when the leader votes itself (see
``leader_vote_delay_ms`` in epochal.paxos) its fsync overlaps the followers' — as one
transaction, in the order the Readies were taken; the replies that depended on them go once it
is durable. Chosen slots are applied at once, except that a follower applies them only after
its queued vote has gone out (the vote is on the commit path, applying is not). The applied log
is written lazily, several slots per transaction.

Commits (DESIGN.md "Batching", "Careful"): the leader keeps exactly one slot in flight. When the
slot before it is chosen and applied, it validates every pending transformation in order
against the state at the tail, defers one that only fails because of another in the same batch
(it is validated again next round, against a state that really happened), rejects one that
fails at the tail outright, and proposes the rest as one slot. A value validated this way can
never rest on a slot that is later lost, because there is no later slot in flight. Followers
forward commits to the leader in batches. Entry ids are checked before proposing and again at
apply, on every member, so a re-proposal and a retry of one transformation commit it once.

Membership (DESIGN.md "Membership"; epochal.tcm.cms): who votes is in the metadata. When an
applied slot s changes the CMS members, the core gets a configuration governing slots from
s + α (α = 1 slot in flight), and the peer channels follow the members' addresses. Before the
first InitializeCMS the voters are --members. A member not in --members starts as a joiner: it
registers itself as a candidate (AddCMSCandidate) through them and then follows the log as a
learner; it neither campaigns nor votes until FinishAddToCMS makes it a voter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from opentelemetry import trace

from epochal.cms.batching import (
    INTERNAL_ENTRY_ID_PREFIX,
    Batch,
    BatchLimits,
    Decision,
    answer_to,
    build_batch,
    known_answer,
    proposal_item,
)
from epochal.cms.codec import decode_item, encode_item
from epochal.cms.log_server import RECENT_ENTRIES, FetchResult, LogServer
from epochal.cms.peers import PeerTransport
from epochal.cms.settings import CMSSettings
from epochal.cms.state_machine import (
    CommitResult,
    MetadataStateMachine,
    ProposalItem,
    SlotResult,
    digest_of,
)
from epochal.cms.storage import (
    AcceptedRow,
    CMSStorage,
    EntryIdRow,
    LogEntryRow,
    SnapshotRow,
    StoredState,
)
from epochal.cms_client import CMSClient
from epochal.errors import (
    CommitTimeout,
    EpochalError,
    NotLeader,
    Overloaded,
    Rejected,
    ShuttingDown,
    Unavailable,
)
from epochal.paxos import (
    AcceptedSlot,
    Ballot,
    ChosenSlot,
    Configuration,
    Membership,
    Message,
    PaxosNode,
    PaxosSettings,
    Ready,
)
from epochal.runtime.service import EXIT_INVARIANT_BROKEN, fatal
from epochal.tcm import (
    AddCMSCandidate,
    ClusterMetadata,
    CMSMember,
    CMSRole,
    InitializeCMS,
)
from epochal.telemetry import enabled as tracing_enabled
from epochal.telemetry import tracer
from epochal.wire.metadata import (
    MalformedInput,
    MetadataEncoder,
    decode_metadata,
    decode_transformation,
)
from epochal.wire.multiplex import describe
from epochal.wire.paxos import decode_slot_value, encode_slot_value

log = logging.getLogger(__name__)
_tracer = tracer("epochal.cms")
T = TypeVar("T")

TICK_INTERVAL_S = 0.01
FETCH_TIMEOUT_S = 30.0  # a page of a peer's log, when catching up or filling the log in
EXIT_CANNOT_JOIN = 78  # EX_CONFIG: the running CMS refused this member as a candidate


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class _Unflushed:
    """Applied state not yet handed to storage."""

    applied_slot: int = 0
    entries: list[LogEntryRow] = field(default_factory=list)
    entry_ids: list[EntryIdRow] = field(default_factory=list)
    snapshots: list[tuple[int, int, ClusterMetadata]] = field(default_factory=list)
    forget_ids_below: int | None = None


@dataclass(frozen=True, slots=True)
class _OwnProposal:
    """The slot this leader has in flight and the states it validated it into."""

    values: tuple[bytes, ...]
    items: list[ProposalItem]
    base: ClusterMetadata
    states: list[ClusterMetadata]  # after each item


class _Pending:
    __slots__ = ("future", "item", "origin")

    def __init__(
        self, item: ProposalItem, future: asyncio.Future[CommitResult], origin: str | None
    ) -> None:
        self.item = item
        self.future = future
        self.origin = origin  # the member that forwarded it, which learns its outcome itself


def _time_out(future: asyncio.Future[CommitResult], timeout_s: float) -> None:
    if not future.done():
        message = f"no outcome within {timeout_s:.1f} s; retry with the same entry_id"
        future.set_exception(CommitTimeout(message))


@contextlib.contextmanager
def _crash_on_broken_invariant() -> Iterator[None]:
    """A broken invariant of the Paxos core (an assertion, or the shell breaking the Ready
    protocol) ends the process, as a failed storage write does: going on could acknowledge what
    is not so, and a restart recovers from what is on disk."""
    try:
        yield
    except AssertionError as error:
        fatal(
            f"the Paxos core's invariant broke: {error!r}\n{traceback.format_exc()}",
            EXIT_INVARIANT_BROKEN,
        )
    except (MemoryError, RecursionError) as error:
        # The process's, not the input's: applying on regardless could leave this member's
        # state apart from the others'. A restart applies the same slots again.
        fatal(f"out of memory or stack: {error!r}\n{traceback.format_exc()}")


def _settled(outcome: CommitResult | EpochalError) -> asyncio.Future[CommitResult]:
    future: asyncio.Future[CommitResult] = asyncio.get_running_loop().create_future()
    _settle(future, outcome)
    return future


def _settle(future: asyncio.Future[CommitResult], outcome: CommitResult | EpochalError) -> None:
    if future.done():
        return
    if isinstance(outcome, EpochalError):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class CMSMemberLoop:
    def __init__(self, settings: CMSSettings, storage: CMSStorage) -> None:
        self.settings = settings
        self.storage = storage
        self.member_id = settings.member_id
        self.peers = PeerTransport(self.member_id, settings.peers)
        self._reader = ThreadPoolExecutor(1, thread_name_prefix=f"cms-read-{self.member_id}")
        self._to_persist: list[Ready] = []
        self._unadvanced: deque[Ready] = deque()  # taken from the core, not yet performed
        self._to_apply: list[ChosenSlot] = []
        self._last_batch_commits = 0  # client commits in the last slot this member proposed
        self._linger_timer: asyncio.TimerHandle | None = None
        self._lingered = False
        # One slot in flight (see the module docstring); a batch may also carry the leader's
        # InitializeCMS and TriggerSnapshot.
        batch_values = settings.max_batch_values + 2
        self._paxos_settings = PaxosSettings(
            max_in_flight_slots=1,
            max_batch_values=batch_values,
            max_batch_bytes=settings.max_batch_bytes + (64 << 10),
            max_pending_values=batch_values,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            election_timeout_ms=settings.election_timeout_ms,
            retransmit_interval_ms=settings.retransmit_interval_ms,
            leader_vote_delay_ms=settings.leader_vote_delay_ms,
            leader_votes_small_slots_up_to=settings.leader_votes_small_slots_up_to,
        )
        self.node: PaxosNode
        self.sm: MetadataStateMachine
        self._pending: deque[_Pending] = deque()
        # Commits in the slot this leader proposed, by entry id: their item's digest, and every
        # caller waiting on it.
        self._in_flight: dict[str, tuple[int, list[asyncio.Future[CommitResult]]]] = {}
        # Commits this member forwarded to the leader, by entry id: answered by the slot that
        # carries them when this member applies it, or by the leader, whichever comes first.
        self._forwarded: dict[str, list[tuple[ProposalItem, asyncio.Future[CommitResult]]]] = {}
        self._round_span: trace.Span | None = None
        self._proposal: _OwnProposal | None = None
        self.log = LogServer(settings, storage, self._read)
        self._snapshot_epochs: list[int] = []
        self._unflushed = _Unflushed()
        # The applied slot last written lazily: durable once a synchronous write follows it.
        self._applied_written = 0
        self._snapshot_encoder = MetadataEncoder()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._leader_changed = asyncio.Event()
        self._was_leader = False
        self._last_leader_id: str | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._transferring = False
        self._backfilling = False
        self.log_complete = False
        self.snapshots_installed = 0
        self.target_epoch = 0
        self.ready = False
        self.on_readiness: Callable[[bool], None] = lambda ready: None
        self._stopped = False
        self.loaded = False  # the state is loaded: peers may Describe and fetch
        self.started = False  # caught up with the others: commits are taken
        self._draining = False  # stopping: commits in flight settle, new ones are refused
        self.closing = asyncio.Event()  # stopping: the Step and Forward streams end
        self._accepting_messages = False
        # Why this member stopped applying the log (a chosen value it cannot read), or "".
        self.stopped_applying = ""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        stored = await self._read(self.storage.load)
        self.sm, unreadable = self._rebuild(stored)
        self._snapshot_epochs = await self._read(self.storage.snapshot_epochs)
        self.node = PaxosNode(
            self.member_id,
            self._membership_of(self.sm.metadata),
            self._paxos_settings,
            random.Random().random,
            now_ms(),
            promised=Ballot(*stored.promised) if stored.promised else Ballot(0, ""),
            accepted=[
                AcceptedSlot(
                    slot=row.slot,
                    ballot=Ballot(row.ballot_round, row.ballot_node),
                    value=decode_slot_value(row.value),
                )
                for row in stored.accepted
            ],
            chosen_up_to=stored.applied_slot,
        )
        log.info(
            "member %s starting at epoch %d, applied slot %d, %d accepted slot(s) on disk",
            self.member_id,
            self.sm.epoch,
            self.sm.applied_slot,
            len(stored.accepted),
        )
        self.peers.update(self._peer_addresses(self.sm.metadata))
        self.loaded = True
        if unreadable:
            self._stop_applying(self.sm.applied_slot + 1, unreadable, stored=True)
            self.started = True
            return
        if self.settings.joining and self.sm.metadata.cms_member(self.member_id) is None:
            self._spawn(self._register_as_candidate())
        # Far behind: copy a snapshot before taking part in Paxos, whose slot-by-slot
        # catch-up would otherwise race it (Paxos messages are dropped until then; the
        # protocol retransmits them).
        await self._learn_target_epoch()
        self._accepting_messages = True
        self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())
        self._spawn(self._backfill())
        self.started = True

    def _rebuild(self, stored: StoredState) -> tuple[MetadataStateMachine, str]:
        """The state machine from the stored snapshot and log, and what stopped the replay
        ("" when nothing did): an entry this version cannot read, or a damaged log."""
        metadata = ClusterMetadata.empty()
        unreadable = ""
        try:
            if stored.snapshot is not None:
                metadata = decode_metadata(stored.snapshot.metadata)
            for row in stored.entries:
                metadata = _next_state(metadata, row)
        except (MemoryError, RecursionError):
            raise
        except Exception as error:  # MalformedInput, or a value a domain type refuses
            unreadable = f"it cannot be replayed past epoch {metadata.epoch}: {error}"
        self.log.remember(stored.entries[-RECENT_ENTRIES:])
        machine = MetadataStateMachine(
            metadata,
            stored.applied_slot,
            [(r.entry_id, r.epoch, r.digest) for r in stored.entry_ids],
            self.settings.entry_id_retention_epochs,
        )
        return machine, unreadable

    async def drain(self, timeout_s: float) -> None:
        """Stop taking commits (they are answered UNAVAILABLE: the client retries them on
        another member with the same entry id) and wait up to ``timeout_s`` for those in flight
        here — queued, proposed, or forwarded to the leader — to settle."""
        self._draining = True
        self._leader_changed.set()  # a commit waiting for a leader sees the drain at once
        outstanding = [p.future for p in self._pending]
        outstanding += [f for _, futures in self._in_flight.values() for f in futures]
        outstanding += [f for waiting in self._forwarded.values() for _, f in waiting]
        waiting = [f for f in outstanding if not f.done()]
        if waiting and timeout_s > 0:
            await asyncio.wait(waiting, timeout=timeout_s)

    def end_streams(self) -> None:
        """The last step before the gRPC server stops: answer what is still waiting (the
        client retries it elsewhere with the same entry id), end the Step and Forward streams
        and every Watch, so that no call holds the stop to its deadline."""
        self._draining = True
        self._fail_everything(self._shutting_down)
        self.closing.set()
        self.log.reset(f"{self.member_id} is shutting down; watch another member")

    def _shutting_down(self) -> ShuttingDown:
        return ShuttingDown(
            f"{self.member_id} is shutting down; retry with the same entry_id on another member"
        )

    async def stop(self) -> None:
        self._stopped = True
        if self._ticker is not None:
            self._ticker.cancel()
        for task in list(self._background):
            task.cancel()
        self.log.reset("CMS member shutting down")
        self._fail_all(lambda: NotLeader(None))
        # Votes still queued were never sent, so they need not be written; the applied state is.
        self._flush_applied()
        await self.peers.close()
        # Let reads in progress finish, then close every connection.
        self._reader.shutdown(wait=True)
        self.storage.close()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _read(self, function: Callable[..., T], *args: Any) -> T:
        """Run a storage read on the reader thread."""
        return await asyncio.get_running_loop().run_in_executor(self._reader, function, *args)

    async def _tick_forever(self) -> None:
        while not self.stopped_applying:
            await asyncio.sleep(TICK_INTERVAL_S)
            with _crash_on_broken_invariant():
                self.node.tick(now_ms())
                self._process()
            self._expire_pending()

    # ------------------------------------------------------------------ the Ready loop

    def on_messages(self, messages: list[Message]) -> None:
        if not self._accepting_messages:
            return
        now = now_ms()
        with _crash_on_broken_invariant():
            for message in messages:
                if message.dst != self.member_id:
                    continue
                self.node.step(message, now)
            self._process()

    def _process(self) -> None:
        if self.stopped_applying:
            return
        with _crash_on_broken_invariant():
            self._process_readies()

    def _process_readies(self) -> None:
        while True:
            self._advance_performed()
            ready = self.node.take_ready()
            if ready.is_empty():
                break
            self._unadvanced.append(ready)
            self._send(ready.messages)
            if ready.needs_persist or self._to_persist:  # replies wait for earlier writes too
                self._persist_then_send(ready)
            else:
                self._send(ready.messages_after_persist)
            if ready.chosen:
                if self._to_persist or self._to_apply:
                    self._to_apply.extend(ready.chosen)  # after the vote queued just now
                else:
                    self._apply(ready.chosen)
            if ready.state_transfer is not None:
                self._begin_state_transfer(ready.state_transfer.peer)
        self._on_role_change()
        self._maybe_propose()

    def _advance_performed(self) -> None:
        """Acknowledge to the core, in the order taken, each Ready performed in full: its
        writes durable and its replies sent (it left ``_to_persist``), its slots applied."""
        while self._unadvanced and not self._stopped:
            ready = self._unadvanced[0]
            if self._to_persist and ready is self._to_persist[0]:
                return  # the Readies queued for writing come in the order taken
            if ready.chosen and ready.chosen[-1].slot > self.sm.applied_slot:
                return
            self.node.advance(self._unadvanced.popleft())

    def _send(self, messages: tuple[Message, ...]) -> None:
        if not messages:
            return
        remote = []
        now = now_ms()
        for message in messages:
            if message.dst == self.member_id:
                self.node.step(message, now)
            else:
                remote.append(message)
        if remote:
            self.peers.send(remote)

    def _persist_then_send(self, ready: Ready) -> None:
        """Queue the Ready's writes for the next loop step (see the module docstring)."""
        if not self._to_persist:
            asyncio.get_running_loop().call_soon(self._persist_step)
        self._to_persist.append(ready)

    def _persist_step(self) -> None:
        """Every queued write as one durable transaction, then the replies that waited for it."""
        readies, self._to_persist = self._to_persist, []
        if self._stopped or not readies:
            return
        promises = [r.persist_promise for r in readies if r.persist_promise is not None]
        promised = (promises[-1].round, promises[-1].node_id) if promises else None
        rows = [
            _accepted_row(record.slot, record.ballot, record.value)
            for ready in readies
            for record in ready.persist_accepted
        ]
        written = self._applied_written
        try:
            self.storage.save_acceptor(promised, rows)
        except Exception as error:
            # An acceptor that cannot store its vote must not cast it: crash, and let the
            # others carry on (Paxos tolerates a crashed member, not a lying one).
            fatal(f"acceptor write failed: {error!r}")
        if written:
            # The synchronous write flushed the lazy ones before it (storage.py): the applied
            # state they hold is durable now.
            self.node.durable(written)
        for ready in readies:
            self._send(ready.messages_after_persist)
        # Applying waits one more loop step, so the peer streams send these replies first: a
        # follower's vote is on the commit path, applying what it learned is not.
        self._apply_soon()
        self._process()

    def _apply_soon(self) -> None:
        if self._to_apply:
            asyncio.get_running_loop().call_soon(self._apply_deferred)

    def _apply_deferred(self) -> None:
        if self._stopped or self._to_persist:
            return  # the step after the queued writes applies these
        chosen, self._to_apply = self._to_apply, []
        with _crash_on_broken_invariant():
            self._apply(tuple(chosen))
        self._process()

    # ------------------------------------------------------------------ apply

    def _apply(self, chosen: tuple[ChosenSlot, ...]) -> None:
        if not chosen or self.stopped_applying:
            return
        for record in chosen:
            if record.slot <= self.sm.applied_slot:
                continue  # installed by a state transfer
            members_before = self.sm.metadata.cms_members
            proposal, self._proposal = self._proposal, None
            if (
                proposal is not None
                and proposal.base is self.sm.metadata
                and record.value == proposal.values
            ):
                result = self.sm.apply_validated(record.slot, proposal.items, proposal.states)
            else:
                try:
                    items = [decode_item(value) for value in record.value]
                except MalformedInput as error:
                    self._stop_applying(record.slot, str(error))
                    return
                result = self.sm.apply_slot(record.slot, items)
            membership = self.node.membership
            if self.sm.metadata.cms_members != members_before:
                membership = self._reconfigure(record.slot)
            self.node.applied(record.slot, membership)
            self._answer(result)  # first: the waiting clients need nothing else
            self._record_applied(result)
            if self._round_span is not None and self.node.is_leader:
                self._round_span.set_attribute("slot", record.slot)
                self._round_span.end()
                self._round_span = None
        self._check_ready()

    def _stop_applying(self, slot: int, problem: str, stored: bool = False) -> None:
        """A chosen slot (or this member's stored log) holds a value this member cannot read —
        a transformation of a newer version, or damaged data: it never skips it (every member
        must apply the same log), nor crash-loops on it. It stops taking part — no votes, no
        proposals, no commits — keeps what it applied and serves it (FetchLog, Describe), and
        reports NOT_SERVING until it runs a version that reads the log."""
        where = "its stored log" if stored else f"slot {slot}"
        remedy = (
            "run the version that wrote it or, if its data is damaged, replace this member "
            "(remove it from the CMS, add a new one)"
            if stored
            else "upgrade it to a version that reads this slot"
        )
        self.stopped_applying = (
            f"CMS member {self.member_id} cannot apply {where} (epoch {self.sm.epoch + 1} on): "
            f"{problem}. It stays at epoch {self.sm.epoch}, takes no part in the CMS and serves "
            f"nothing newer; {remedy}"
        )
        log.critical("%s", self.stopped_applying)
        self._accepting_messages = False
        self._flush_applied()
        self._fail_everything(lambda: Unavailable(self.stopped_applying))
        self._check_ready()

    def _record_applied(self, result: SlotResult) -> None:
        """Queue the slot's applied state for the next lazy flush, and publish its entries."""
        pending = self._unflushed
        rows = [LogEntryRow(e.epoch, e.slot, e.entry_id, e.kind, e.encoded) for e in result.entries]
        pending.entries.extend(rows)
        pending.entry_ids.extend(EntryIdRow(e.entry_id, e.epoch, e.digest) for e in result.entries)
        snapshots = result.snapshots
        pending.snapshots.extend((epoch, result.slot, metadata) for epoch, metadata in snapshots)
        if result.forget_ids_below_epoch is not None:
            pending.forget_ids_below = result.forget_ids_below_epoch
        pending.applied_slot = result.slot
        for epoch, _ in snapshots:
            self._snapshot_epochs.append(epoch)
        if self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(
                self.settings.applied_flush_interval_ms / 1000, self._flush_applied
            )
        if rows:
            self.log.publish(rows, self.sm.epoch)

    def _flush_applied(self) -> None:
        """One lazy transaction for every slot applied since the last flush: the applied log is
        derived from slots a quorum already holds, so it need not be written slot by slot, and
        its commit does not wait for the disk."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        pending, self._unflushed = self._unflushed, _Unflushed()
        if pending.applied_slot == 0:
            return
        slot = pending.applied_slot
        try:
            self.storage.save_applied(
                applied_slot=slot,
                entries=pending.entries,
                entry_ids=pending.entry_ids,
                forget_entry_ids_below_epoch=pending.forget_ids_below,
                snapshots=[
                    SnapshotRow(epoch, at_slot, self._snapshot_encoder.encode(metadata))
                    for epoch, at_slot, metadata in pending.snapshots
                ],
                forget_accepted_up_to=slot,
            )
        except Exception as error:
            fatal(f"writing applied slots up to {slot} failed: {error!r}")
        self._applied_written = slot
        self._compact(slot - self.settings.retain_slots)

    def _compact(self, up_to: int) -> None:
        if not self._stopped and up_to > 0 and up_to <= self.sm.applied_slot:
            self.node.compact(min(up_to, self.node.chosen_up_to))

    def _answer(self, result: SlotResult) -> None:
        """Settle the commits waiting here on each outcome's entry id: those of the very item
        with its outcome; one that carries another transformation under that id with the id's
        record (``reused``) — or, when the slot recorded nothing under it, not yet."""
        for outcome in result.outcomes:
            waiting: list[tuple[int, asyncio.Future[CommitResult]]] = [
                (item.digest, future) for item, future in self._forwarded.get(outcome.entry_id, ())
            ]
            in_flight = self._in_flight.pop(outcome.entry_id, None)
            if in_flight is not None:
                waiting += [(in_flight[0], future) for future in in_flight[1]]
            known = self.sm.lookup(outcome.entry_id)
            for digest, future in waiting:
                answer = answer_to(outcome, digest, known, len(result.outcomes), result.slot)
                if answer is not None:
                    _settle(future, answer)

    # ------------------------------------------------------------------ commits

    async def commit(self, item: ProposalItem) -> CommitResult:
        """Commit through whichever member leads."""
        entry_id = item.entry_id
        deadline = time.monotonic() + self.settings.commit_timeout_ms / 1000
        while True:
            known = self.sm.lookup(entry_id)
            if known is not None:
                answer = known_answer(item, known)
                if isinstance(answer, EpochalError):
                    raise answer
                return answer
            if self._draining:
                raise self._shutting_down()
            if self.stopped_applying:
                raise Unavailable(self.stopped_applying)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommitTimeout(
                    f"no outcome within {self.settings.commit_timeout_ms} ms; "
                    "retry with the same entry_id"
                )
            try:
                if self.node.is_leader:
                    return await self._commit_as_leader(item, remaining)
                leader = self.node.leader_id
                if leader is None or leader == self.member_id:
                    await self._wait_for_leader(min(remaining, 0.5))
                    continue
                return await self._forward(leader, item, remaining)
            except NotLeader:
                # Leadership moved while we waited: the loop retries with the same entry id.
                await self._wait_for_leader(min(max(deadline - time.monotonic(), 0), 0.05))

    async def _forward(self, leader: str, item: ProposalItem, timeout_s: float) -> CommitResult:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CommitResult] = loop.create_future()
        entry_id = item.entry_id
        waiting = self._forwarded.setdefault(entry_id, [])
        waiting.append((item, future))
        self.peers.forward(leader, item, future)
        timer = loop.call_later(timeout_s, _time_out, future, timeout_s)
        try:
            return await future
        finally:
            timer.cancel()
            waiting[:] = [w for w in waiting if w[1] is not future]
            if not waiting:
                del self._forwarded[entry_id]

    def commit_forwarded(
        self, item: ProposalItem, origin: str | None
    ) -> asyncio.Future[CommitResult]:
        """A commit ``origin`` forwarded: answered here if leader, else told who leads."""
        known = self.sm.lookup(item.entry_id)
        if known is not None:
            return _settled(known_answer(item, known))
        if self.stopped_applying:
            return _settled(Unavailable(self.stopped_applying))
        if not self.node.is_leader:
            return _settled(NotLeader(self.node.leader_id))
        if self._draining:
            # Leading still, but not for long: the follower waits for the next leader.
            return _settled(NotLeader(None))
        try:
            return self._enqueue(item, self.settings.commit_timeout_ms / 1000, origin)
        except Overloaded as error:
            return _settled(error)

    async def _wait_for_leader(self, timeout_s: float) -> None:
        self._leader_changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._leader_changed.wait(), timeout_s)

    async def _commit_as_leader(self, item: ProposalItem, timeout_s: float) -> CommitResult:
        return await self._enqueue(item, timeout_s, None)

    def _enqueue(
        self, item: ProposalItem, timeout_s: float, origin: str | None
    ) -> asyncio.Future[CommitResult]:
        """Queue a commit for the next batch; the future is settled by its outcome or by a
        timeout. Raises Overloaded when the queue is full."""
        if len(self._pending) >= self.settings.max_pending_commits:
            raise Overloaded(
                f"{len(self._pending)} commits already queued at the leader "
                f"(--max-pending-commits); retry later"
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CommitResult] = loop.create_future()
        self._pending.append(_Pending(item, future, origin))
        log.debug("commit %s queued at the leader (%d pending)", item.entry_id, len(self._pending))
        self._maybe_propose()
        # A timer rather than asyncio.wait_for: one handle per commit instead of two tasks.
        timer = loop.call_later(timeout_s, _time_out, future, timeout_s)
        future.add_done_callback(lambda _: timer.cancel())
        return future

    def _maybe_propose(self) -> None:
        with _crash_on_broken_invariant():  # also on the commit path and the linger timer
            self._propose_next()

    def _propose_next(self) -> None:
        if not (self._pending or (self.node.is_leader and self.sm.epoch == 0)):
            return
        if not self.node.idle_leader or self.sm.applied_slot != self.node.chosen_up_to:
            return
        if self._linger():
            return
        base = self.sm.metadata
        batch = self._build_batch(base)
        if not batch.items:
            return
        items = batch.items
        self._lingered = False
        self._last_batch_commits = sum(1 for i in items if i.entry_id in self._in_flight)
        values = tuple(encode_item(item) for item in items)
        try:
            self.node.propose(values, now_ms(), batch.learners)
        except (NotLeader, Overloaded) as error:  # not expected: idle_leader was true
            log.error("proposal refused by the Paxos core: %s", error)
            self._fail_in_flight(lambda: NotLeader(self.node.leader_id))
            return
        self._proposal = _OwnProposal(values, items, base, batch.states)
        if tracing_enabled():
            self._round_span = _tracer.start_span(
                "paxos.round",
                attributes={
                    "batch_size": len(items),
                    "ballot": str(self.node.status().ballot),
                    "member": self.member_id,
                },
            )
        self._process()

    def _linger(self) -> bool:
        """Group commit (like PostgreSQL's commit_delay): while the log is busy, wait a little
        for more commits before proposing, so that rounds carry more of them. Every round costs
        the same few messages and fsyncs whatever it carries, and on a loaded machine those
        compete for the CPU with the commits themselves. A commit after a quiet spell, or one
        slot's worth of them, goes at once."""
        settings = self.settings
        if (
            self._lingered
            or settings.batch_linger_ms <= 0
            or self._last_batch_commits < settings.batch_linger_commits
            or len(self._pending) >= settings.max_batch_values
        ):
            return False
        if self._linger_timer is None:
            self._linger_timer = asyncio.get_running_loop().call_later(
                settings.batch_linger_ms / 1000, self._linger_over
            )
        return True

    def _linger_over(self) -> None:
        self._linger_timer = None
        self._lingered = True
        self._maybe_propose()

    def _build_batch(self, base: ClusterMetadata) -> Batch[_Pending]:
        """The next slot from the queued commits (``epochal.cms.batching``); settles those it
        answers at once, requeues the deferred ones in front, and marks the proposed ones in
        flight."""
        settings = self.settings
        batch = build_batch(
            base,
            self._live_pending(),
            item_of=lambda pending: pending.item,
            origin_of=lambda pending: pending.origin,
            lookup=self.sm.lookup,
            limits=BatchLimits(
                max_values=settings.max_batch_values,
                max_bytes=settings.max_batch_bytes,
                snapshot_frequency=settings.snapshot_frequency,
            ),
            last_snapshot_epoch=self._snapshot_epochs[-1] if self._snapshot_epochs else 0,
            initialize=self._initialize_item() if base.epoch == 0 else None,
        )
        deferred: list[_Pending] = []
        for decided in batch.decided:
            pending = decided.commit
            if decided.decision is Decision.PROPOSED:
                self._in_flight[pending.item.entry_id] = (pending.item.digest, [pending.future])
            elif decided.decision is Decision.JOINED:
                # The same id twice in one batch: one proposal, both callers answered by it.
                joined = self._in_flight.setdefault(
                    pending.item.entry_id, (pending.item.digest, [])
                )
                joined[1].append(pending.future)
            elif decided.decision is Decision.DEFERRED:
                deferred.append(pending)
            else:
                assert decided.answer is not None
                _settle(pending.future, decided.answer)
        self._pending.extendleft(reversed(deferred))
        return batch

    def _live_pending(self) -> Iterator[_Pending]:
        """The queued commits in order, each taken off the queue as it is read (one whose
        caller gave up is dropped)."""
        while self._pending:
            pending = self._pending.popleft()
            if not pending.future.done():
                yield pending

    def _initialize_item(self) -> ProposalItem:
        transformation = InitializeCMS(
            members=tuple(
                CMSMember(member_id=m, address=a) for m, a in sorted(self.settings.members.items())
            )
        )
        return proposal_item(transformation, f"{INTERNAL_ENTRY_ID_PREFIX}initialize")

    def _on_role_change(self) -> None:
        leader = self.node.leader_id
        if leader != self._last_leader_id:
            self._last_leader_id = leader
            self._leader_changed.set()
        is_leader = self.node.is_leader
        if is_leader != self._was_leader:
            self._was_leader = is_leader
            log.info(
                "member %s is %s (ballot %s)",
                self.member_id,
                "now the leader" if is_leader else "no longer the leader",
                self.node.status().ballot,
            )
            if not is_leader:
                self._fail_all(lambda: NotLeader(self.node.leader_id))
                if self._linger_timer is not None:
                    self._linger_timer.cancel()
                    self._linger_timer = None
                self._last_batch_commits = 0
                self._lingered = False

    def _fail_in_flight(self, error: Callable[[], EpochalError]) -> None:
        """Settle every commit in flight with an error of its own (``error`` builds one)."""
        for _, futures in self._in_flight.values():
            for future in futures:
                _settle(future, error())
        self._in_flight.clear()
        self._proposal = None
        if self._round_span is not None:
            self._round_span.set_attribute("outcome", "abandoned")
            self._round_span.end()
            self._round_span = None

    def _fail_all(self, error: Callable[[], EpochalError]) -> None:
        self._fail_in_flight(error)
        while self._pending:
            _settle(self._pending.popleft().future, error())

    def _fail_everything(self, error: Callable[[], EpochalError]) -> None:
        """``_fail_all``, and the commits forwarded to the leader too (this member will not
        answer them by applying their slots)."""
        self._fail_all(error)
        for waiting in list(self._forwarded.values()):
            for _, future in waiting:
                _settle(future, error())

    def _expire_pending(self) -> None:
        while self._pending and self._pending[0].future.done():
            self._pending.popleft()

    # ------------------------------------------------------------------ log serving

    async def fetch_log(
        self, since: int, max_entries: int, include_ids: bool, entries_only: bool = False
    ) -> FetchResult:
        return await self.log.fetch(
            since,
            max_entries,
            latest=self.sm.epoch,
            applied_slot=self.sm.applied_slot,
            entry_ids=self.sm.entry_ids() if include_ids else [],
            entries_only=entries_only,
        )

    # ------------------------------------------------------------------ catching up

    async def _learn_target_epoch(self) -> None:
        """Readiness: SERVING once caught up to the newest epoch a peer reported at start."""
        peers = self.peers.peers()
        answers = await asyncio.gather(
            *(self.peers.epoch_of(peer, timeout_s=1.0) for peer in peers),
            return_exceptions=True,
        )
        epochs = []
        for peer, answer in zip(peers, answers, strict=True):
            if isinstance(answer, BaseException):
                log.info("could not ask %s for its epoch at start: %s", peer, describe(answer))
            else:
                epochs.append((answer, peer))
        if epochs:
            self.target_epoch, peer = max(epochs)
            if self.target_epoch - self.sm.epoch > self.settings.snapshot_frequency:
                self._transferring = True
                await self._state_transfer(peer)
        self._check_ready()

    def _check_ready(self) -> None:
        ready = self.sm.epoch >= max(self.target_epoch, 1) and not self.stopped_applying
        if ready != self.ready:
            self.ready = ready
            log.info(
                "member %s %s at epoch %d",
                self.member_id,
                "ready" if ready else "not ready",
                self.sm.epoch,
            )
            self.on_readiness(ready)

    def _begin_state_transfer(self, peer: str) -> None:
        if self._transferring or peer not in self.peers.peers():
            return
        self._transferring = True
        self._spawn(self._state_transfer(peer))

    async def _state_transfer(self, peer: str) -> None:
        """Copy a peer's log (snapshot + tail when far behind) via FetchLog, then install it."""
        try:
            with _tracer.start_as_current_span("cms.state_transfer", attributes={"peer": peer}):
                await self._copy_from(peer)
        except Exception as error:
            log.warning("state transfer from %s failed: %s", peer, error)
        finally:
            self._transferring = False

    async def _copy_from(self, peer: str) -> None:
        since = self.sm.epoch
        metadata = self.sm.metadata
        snapshot_row: SnapshotRow | None = None
        ids: list[tuple[str, int, int]] = self.sm.entry_ids()
        rows: list[LogEntryRow] = []
        while True:
            page = await self.peers.fetch_log(
                peer, since, include_entry_ids=True, timeout_s=FETCH_TIMEOUT_S
            )
            if page.snapshot is not None:
                metadata, snapshot_row = page.snapshot.metadata, page.snapshot.row
                ids = list(page.snapshot.entry_ids)
                rows = []
            for row in page.entries:
                metadata = _next_state(metadata, row)  # raises: the transfer fails, logged
                rows.append(row)
                ids.append((row.entry_id, row.epoch, digest_of(row.transformation)))
            since = metadata.epoch
            if not page.has_more:
                applied_slot = page.applied_slot
                break
        if applied_slot <= self.sm.applied_slot:
            return
        log.info(
            "member %s installs state from %s: epoch %d, slot %d%s",
            self.member_id,
            peer,
            metadata.epoch,
            applied_slot,
            f" (snapshot at epoch {snapshot_row.epoch})" if snapshot_row else "",
        )
        # Switch the in-memory state, the core and storage in one loop step; what was applied
        # before goes to storage first, so the install comes after it.
        self._flush_applied()
        self.sm.install(metadata, applied_slot, ids)
        self.node.install_state(applied_slot)
        # Every slot up to the installed one is chosen: the installed members govern the rest.
        self.node.applied(applied_slot, self._membership_of(metadata))
        self.peers.update(self._peer_addresses(metadata))
        self._answer_installed()
        if snapshot_row is not None:
            self._snapshot_epochs.append(snapshot_row.epoch)
            self.snapshots_installed += 1
        try:
            self.storage.install(
                snapshot=snapshot_row,
                entries=rows,
                entry_ids=[EntryIdRow(i, e, d) for i, e, d in self.sm.entry_ids()],
                applied_slot=applied_slot,
            )
        except Exception as error:
            fatal(f"installing the state copied from {peer} failed: {error!r}")
        self.node.durable(applied_slot)  # a synchronous write
        self.log.reset("member state replaced by a state transfer; resume")
        self._check_ready()
        self._process()
        if snapshot_row is not None:
            self.log_complete = False
            self._spawn(self._backfill())

    def _answer_installed(self) -> None:
        """Forwarded commits whose slots a state transfer skipped: answer them from the ids."""
        for entry_id, waiting in self._forwarded.items():
            known = self.sm.lookup(entry_id)
            if known is not None:
                for item, future in waiting:
                    _settle(future, known_answer(item, known))

    async def _backfill(self) -> None:
        """Fill the log below an installed snapshot with entries from peers, so this member
        can serve any suffix of the log (the snapshot made it current; this makes it whole)."""
        if self._backfilling:
            return
        self._backfilling = True
        try:
            while not self._stopped:
                prefix = await self._read(self.storage.contiguous_prefix)
                target = self._snapshot_epochs[-1] if self._snapshot_epochs else 0
                if prefix >= min(target, self.sm.epoch):
                    self.log_complete = True
                    log.info("member %s holds the whole log up to epoch %d", self.member_id, prefix)
                    return
                if not await self._backfill_page(prefix, target):
                    await asyncio.sleep(1.0)  # no peer could help now; try again
        finally:
            self._backfilling = False

    async def _backfill_page(self, prefix: int, target: int) -> bool:
        for peer in self.peers.peers():
            try:
                page = await self.peers.fetch_log(
                    peer, prefix, entries_only=True, timeout_s=FETCH_TIMEOUT_S
                )
            except grpc.aio.AioRpcError as error:
                log.info("backfill from %s failed: %s", peer, error.code().name)
                continue
            rows = [row for row in page.entries if prefix < row.epoch <= target]
            if not rows or rows[0].epoch != prefix + 1:
                continue  # this peer lacks the entries too
            self.storage.insert_entries(rows)
            return True
        return False

    # ------------------------------------------------------------------ membership

    def _membership_of(self, metadata: ClusterMetadata) -> Membership:
        """The Paxos membership for the slots after ``metadata``'s (all earlier ones are
        chosen); before InitializeCMS, --members vote."""
        if not metadata.initialized:
            return Membership.initial(frozenset(self.settings.members))
        voters = metadata.cms_voters
        return Membership.initial(voters, metadata.cms_with_role(CMSRole.JOINING, CMSRole.LEARNER))

    def _peer_addresses(self, metadata: ClusterMetadata) -> dict[str, str]:
        addresses = dict(self.settings.peers)
        addresses.update((m.member_id, m.address) for m in metadata.cms_members)
        addresses.pop(self.member_id, None)
        return addresses

    def _reconfigure(self, slot: int) -> Membership:
        """Slot ``slot`` changed the members: they govern from slot + α on."""
        metadata = self.sm.metadata
        alpha = self._paxos_settings.max_in_flight_slots
        configuration = Configuration(
            from_slot=slot + alpha,
            voters=metadata.cms_voters,
            learners=metadata.cms_with_role(CMSRole.JOINING, CMSRole.LEARNER),
        )
        membership = self.node.membership.with_configuration(configuration)
        self.peers.update(self._peer_addresses(metadata))
        log.info(
            "member %s: CMS members at epoch %d govern from slot %d: voters %s, learners %s",
            self.member_id,
            metadata.epoch,
            configuration.from_slot,
            ",".join(sorted(configuration.voters)),
            ",".join(sorted(configuration.learners)) or "-",
        )
        return membership

    async def _register_as_candidate(self) -> None:
        """A joiner asks the running CMS (--members) to add it as a candidate, until it is."""
        transformation = AddCMSCandidate(self.member_id, self.settings.listen_address)
        entry_id = f"cms-candidate:{self.member_id}:{self.settings.listen_address}"
        backoff_s = 0.1
        while not self._stopped and self.sm.metadata.cms_member(self.member_id) is None:
            try:
                async with CMSClient(list(self.settings.members.values())) as client:
                    committed = await client.commit(transformation, entry_id=entry_id)
                log.info(
                    "member %s registered as a CMS candidate at epoch %d",
                    self.member_id,
                    committed.epoch,
                )
                return
            except Rejected as error:
                if error.rule == "cms_member_exists":
                    return
                # A misconfiguration (an address another member has, too many members): a
                # member that can never join must not look healthy.
                log.critical(
                    "member %s cannot join the CMS as a candidate: %s; exiting",
                    self.member_id,
                    error,
                )
                logging.shutdown()
                os._exit(EXIT_CANNOT_JOIN)
            except EpochalError as error:
                log.warning("member %s: registering as a candidate: %s", self.member_id, error)
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 2.0)

    # ------------------------------------------------------------------ describe

    def describe(self) -> MemberDescription:
        status = self.node.status()
        members = self.sm.metadata.cms_members or tuple(
            CMSMember(member_id=m, address=a) for m, a in sorted(self.settings.members.items())
        )
        return MemberDescription(
            member_id=self.member_id,
            members=tuple(members),
            leader_id=status.leader_id or "",
            epoch=self.sm.epoch,
            snapshot_epochs=tuple(self._snapshot_epochs),
            promised=status.promised,
            applied_slot=self.sm.applied_slot,
            ready=self.ready,
            snapshots_installed=self.snapshots_installed,
            log_complete=self.log_complete,
        )


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """What Describe answers: this member's view of the CMS and its own progress."""

    member_id: str
    members: tuple[CMSMember, ...]
    leader_id: str
    epoch: int
    snapshot_epochs: tuple[int, ...]
    promised: Ballot
    applied_slot: int
    ready: bool
    snapshots_installed: int
    log_complete: bool


# ---------------------------------------------------------------------- encoding helpers


def _accepted_row(slot: int, ballot: Ballot, value: tuple[bytes, ...]) -> AcceptedRow:
    return AcceptedRow(slot, ballot.round, ballot.node_id, encode_slot_value(value))


def _next_state(metadata: ClusterMetadata, row: LogEntryRow) -> ClusterMetadata:
    """The state after a log entry read from storage or a peer's log; raises MalformedInput
    when it does not follow ``metadata`` or cannot be read."""
    if row.epoch != metadata.epoch + 1:
        raise MalformedInput(
            f"the entry of epoch {row.epoch} does not follow epoch {metadata.epoch}"
        )
    transformation = decode_transformation(row.transformation)
    try:
        return transformation.execute(metadata)
    except (MemoryError, RecursionError):
        raise  # the process's, not the entry's
    except Exception as error:  # a bug: the entry was validated when it was applied
        log.exception("replaying epoch %d (%s) failed", row.epoch, transformation)
        raise MalformedInput(f"replaying epoch {row.epoch} ({transformation}) failed") from error
