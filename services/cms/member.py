"""A CMS member's asyncio shell around its core (``epochal.cmscore``): timers, storage, peers.

Theory of operation
-------------------
The core (the Paxos node, the metadata state machine and every decision around them) runs on
the asyncio loop, so there are no locks. The loop also makes every storage write,
synchronously: a hand-off to a storage thread and back costs two thread wake-ups per vote, more
than the fsync itself on these machines. Reads (catch-up pages, the state at start) run on one
reader thread with connections of their own. Each pass of ``_process`` drains the node's
Readies: it sends the proposer's messages at once and queues the acceptor's writes for the next
loop step — after the peer streams have handed the leader's Accepts to gRPC, so that when the
leader votes itself (see ``leader_vote_delay_ms`` in epochal.paxos) its fsync overlaps the
followers' — as one transaction, in the order the Readies were taken; the replies that depended
on them go once it is durable. Chosen slots are applied at once, except that a follower applies
them only after its queued vote has gone out (the vote is on the commit path, applying is not).
The applied log is written lazily, several slots per transaction. After every input the shell
performs the core's effects (``_perform``): settling commits, following peers, timers, spans.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from epochal.cms.catch_up import backfill, copy_state, learn_target_epoch, register_as_candidate
from epochal.cms.commit_path import CommitPath, now_ms
from epochal.cms.commit_tracing import CommitTraces
from epochal.cms.description import MemberDescription
from epochal.cms.log_server import RECENT_ENTRIES, FetchResult, LogServer
from epochal.cms.peers import PeerTransport
from epochal.cms.settings import CMSSettings
from epochal.cms.shell_support import crash_on_broken_invariant
from epochal.cms.storage import CMSStorage
from epochal.cmscore import MemberConfig, MemberCore
from epochal.cmscore import effects as fx
from epochal.cmscore.rows import AcceptedRow
from epochal.cmscore.state_machine import CommitResult
from epochal.errors import EpochalError, NotLeader
from epochal.paxos import Ballot, ChosenSlot, Message, PaxosNode, Ready
from epochal.runtime.service import fatal
from epochal.tcm import CMSMember, CMSRole
from epochal.telemetry import attributes as attr
from epochal.telemetry import tracer
from epochal.telemetry.context import detached
from epochal.wire.paxos import encode_slot_value

log = logging.getLogger(__name__)
_tracer = tracer("epochal.cms")
T = TypeVar("T")

TICK_INTERVAL_S = 0.01


class CMSMemberLoop(CommitPath):
    def __init__(self, settings: CMSSettings, storage: CMSStorage) -> None:
        self.settings = settings
        self.storage = storage
        self.member_id = settings.member_id
        self.peers = PeerTransport(self.member_id, settings.peers)
        self._reader = ThreadPoolExecutor(1, thread_name_prefix=f"cms-read-{self.member_id}")
        self._to_persist: list[Ready] = []
        self._unadvanced: deque[Ready] = deque()  # taken from the node, not yet performed
        self._to_apply: list[ChosenSlot] = []
        self._linger_timer: asyncio.TimerHandle | None = None
        self.core: MemberCore  # built by ``start`` from what storage holds
        self._built = False  # (a stop can come first, while the member starts)
        self.traces = CommitTraces(self.member_id)
        self.log = LogServer(settings, storage, self._read)
        # The applied slot last written lazily: durable once a synchronous write follows it.
        self._applied_written = 0
        self._flush_timer: asyncio.TimerHandle | None = None
        self._leader_changed = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._transferring = False
        self._backfilling = False
        self.log_complete = False
        self.on_readiness: Callable[[bool], None] = lambda ready: None
        self._stopped = False
        self.loaded = False  # the state is loaded: peers may Describe and fetch
        self.started = False  # caught up with the others: commits are taken
        self.closing = asyncio.Event()  # stopping: the Step and Forward streams end
        self._accepting_messages = False

    @property
    def node(self) -> PaxosNode:
        return self.core.node

    @property
    def ready(self) -> bool:
        return self.core.ready

    @property
    def stopped_applying(self) -> str:
        return self.core.stopped_applying

    # What the metrics read when scraped (from the scrape's thread).

    def applied_epoch(self) -> float:
        """NaN until the state loads: not an epoch 0 that would read as everything behind."""
        return self.core.epoch if self.loaded else math.nan

    def voters(self) -> dict[str, str]:
        """The voting members (id -> address), this one included (before the log names any:
        the initial members it was started with)."""
        members = self.core.sm.metadata.cms_members if self.loaded else ()
        if not members:
            return dict(self.settings.members)
        return {m.member_id: m.address for m in members if m.role is CMSRole.VOTER}

    def leads(self) -> bool:
        return self.loaded and self.core.node.is_leader

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        stored = await self._read(self.storage.load)
        snapshot_epochs = await self._read(self.storage.snapshot_epochs)
        self.core = MemberCore(
            MemberConfig.of(self.settings),
            stored,
            snapshot_epochs,
            random=random.Random().random,
            now_ms=now_ms(),
        )
        self._built = True
        self.log.remember(stored.entries[-RECENT_ENTRIES:])
        log.info(
            "member %s starting at epoch %d, applied slot %d, %d accepted slot(s) on disk",
            self.member_id,
            self.core.epoch,
            self.core.sm.applied_slot,
            len(stored.accepted),
        )
        self.core.start()
        self._perform()
        self.loaded = True
        if self.core.stopped_applying:
            self.started = True
            return
        if self.core.candidacy() is not None:
            self._spawn(register_as_candidate(self))
        # Far behind: copy a snapshot before taking part in Paxos, whose slot-by-slot
        # catch-up would otherwise race it (Paxos messages are dropped until then; the
        # protocol retransmits them).
        await learn_target_epoch(self)
        self._accepting_messages = True
        self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())
        self._spawn(self._backfill())
        self.started = True

    async def drain(self, timeout_s: float) -> None:
        """Stop taking commits (they are answered UNAVAILABLE: the client retries them on
        another member with the same entry id) and wait up to ``timeout_s`` for those in flight
        here — queued, proposed, or forwarded to the leader — to settle."""
        self._leader_changed.set()  # a commit waiting for a leader sees the drain at once
        if not self._built:
            return  # stopped while starting: nothing was taken yet
        self.core.draining = True
        waiting: list[Any] = self.core.commits.outstanding()
        if waiting and timeout_s > 0:
            await asyncio.wait(waiting, timeout=timeout_s)

    def end_streams(self) -> None:
        """The last step before the gRPC server stops: answer what is still waiting (the
        client retries it elsewhere with the same entry id), end the Step and Forward streams
        and every Watch, so that no call holds the stop to its deadline."""
        if self._built:
            self.core.draining = True
            self.core.fail_everything(self.core.shutting_down)
            self._perform()
        self.closing.set()
        self.log.reset(f"{self.member_id} is shutting down; watch another member")

    async def stop(self) -> None:
        self._stopped = True
        if self._ticker is not None:
            self._ticker.cancel()
        for task in list(self._background):
            task.cancel()
        self.log.reset("CMS member shutting down")
        if self._built:
            self.core.fail_all(lambda: NotLeader(None))
            self._perform()
            # Votes still queued were never sent, so they need not be written; the applied
            # state is.
            self._flush_applied()
        await self.peers.close()
        # Let reads in progress finish, then close every connection.
        self._reader.shutdown(wait=True)
        self.storage.close()

    def _spawn(self, coroutine: Any) -> None:
        """Run background work (a state transfer, a flush): in no request's trace, though a
        request's message (a Step in a round's trace) may be what started it."""
        task = detached(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _read(self, function: Callable[..., T], *args: Any) -> T:
        """Run a storage read on the reader thread."""
        return await asyncio.get_running_loop().run_in_executor(self._reader, function, *args)

    async def _tick_forever(self) -> None:
        while not self.core.stopped_applying:
            await asyncio.sleep(TICK_INTERVAL_S)
            with crash_on_broken_invariant():
                self.core.node.tick(now_ms())
                self._process()
            self.core.commits.expire()

    # ------------------------------------------------------------------ the Ready loop

    def on_messages(self, messages: list[Message]) -> None:
        if not self._accepting_messages:
            return
        now = now_ms()
        node = self.core.node
        with crash_on_broken_invariant():
            for message in messages:
                if message.dst != self.member_id:
                    continue
                node.step(message, now)
            self._process()

    def _process(self) -> None:
        if not self.core.stopped_applying:
            with crash_on_broken_invariant():
                self._process_readies()
        self._perform()  # also what stopping to apply asked for (health, answers)

    def _process_readies(self) -> None:
        node = self.core.node
        while True:
            self._advance_performed()
            ready = node.take_ready()
            if ready.is_empty():
                if self.core.after_readies(now_ms()):
                    continue  # it proposed: take the Ready with the Accepts
                return
            self._unadvanced.append(ready)
            if ready.chosen and self.traces.round_in_flight():
                # chosen by a quorum: before the others learn it from these messages
                self.traces.round_chosen(self.core.carries_own(ready.chosen))
            self._send(ready.messages)
            if ready.needs_persist or self._to_persist:  # replies wait for earlier writes too
                self._persist_then_send(ready)
            else:
                self._send(ready.messages_after_persist)
            if ready.chosen:
                if self._to_persist or self._to_apply:
                    self._to_apply.extend(ready.chosen)  # after the vote queued just now
                else:
                    self.core.apply(ready.chosen)
            if ready.state_transfer is not None:
                self.core.begin_state_transfer(ready.state_transfer.peer)

    def _advance_performed(self) -> None:
        """Acknowledge to the node, in the order taken, each Ready performed in full: its
        writes durable and its replies sent (it left ``_to_persist``), its slots applied."""
        node = self.core.node
        while self._unadvanced and not self._stopped:
            ready = self._unadvanced[0]
            if self._to_persist and ready is self._to_persist[0]:
                return  # the Readies queued for writing come in the order taken
            if ready.chosen and ready.chosen[-1].slot > self.core.sm.applied_slot:
                return
            node.advance(self._unadvanced.popleft())

    def _send(self, messages: tuple[Message, ...]) -> None:
        if not messages:
            return
        remote = []
        now = now_ms()
        for message in messages:
            if message.dst == self.member_id:
                self.core.node.step(message, now)
            else:
                remote.append(message)
        if remote:
            self.peers.send(remote, self.traces.round_headers())

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
            self.core.node.durable(written)
        for ready in readies:
            self._send(ready.messages_after_persist)
        # Applying waits one more loop step, so the peer streams send these replies first: a
        # follower's vote is on the commit path, applying what it learned is not.
        if self._to_apply:
            asyncio.get_running_loop().call_soon(self._apply_deferred)
        self._process()

    def _apply_deferred(self) -> None:
        if self._stopped or self._to_persist:
            return  # the step after the queued writes applies these
        chosen, self._to_apply = self._to_apply, []
        with crash_on_broken_invariant():
            self.core.apply(tuple(chosen))
        self._process()

    # ------------------------------------------------------------------ the core's effects

    def _perform(self) -> None:
        for effect in self.core.take_effects():
            if isinstance(effect, fx.Settle):
                future: asyncio.Future[CommitResult] = effect.waiter  # type: ignore[assignment]
                if not future.done():
                    if isinstance(effect.outcome, EpochalError):
                        future.set_exception(effect.outcome)
                    else:
                        future.set_result(effect.outcome)
            elif isinstance(effect, fx.Published):
                self.log.publish(effect.rows, effect.epoch)
            elif isinstance(effect, fx.FlushDue):
                if self._flush_timer is None:
                    self._flush_timer = asyncio.get_running_loop().call_later(
                        self.settings.applied_flush_interval_ms / 1000, self._flush_applied
                    )
            elif isinstance(effect, fx.LeaderChanged):
                self._leader_changed.set()
            elif isinstance(effect, fx.RoundStarted | fx.RoundEnded):
                self.traces.round_effect(effect)
            elif isinstance(effect, fx.StartLinger):
                self._linger_timer = asyncio.get_running_loop().call_later(
                    effect.delay_ms / 1000, self._linger_over
                )
            elif isinstance(effect, fx.CancelLinger):
                if self._linger_timer is not None:
                    self._linger_timer.cancel()
                    self._linger_timer = None
            elif isinstance(effect, fx.PeersChanged):
                self.peers.update(effect.addresses)
            elif isinstance(effect, fx.BeginStateTransfer):
                self._begin_state_transfer(effect.peer)
            elif isinstance(effect, fx.ReadinessChanged):
                self.on_readiness(effect.ready)
            elif isinstance(effect, fx.StoppedApplying):
                self._accepting_messages = False
                self._flush_applied()

    def _linger_over(self) -> None:
        self._linger_timer = None
        with crash_on_broken_invariant():
            proposed = self.core.linger_over(now_ms())
        if proposed:
            self._process()
        else:
            self._perform()

    def _flush_applied(self) -> None:
        """One lazy transaction for every slot applied since the last flush: the applied log is
        derived from slots a quorum already holds, so it need not be written slot by slot, and
        its commit does not wait for the disk."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        batch = self.core.take_applied()
        if batch is None:
            return
        try:
            self.storage.save_applied(
                applied_slot=batch.applied_slot,
                entries=batch.entries,
                entry_ids=batch.entry_ids,
                forget_entry_ids_below_epoch=batch.forget_entry_ids_below_epoch,
                snapshots=batch.snapshots,
                forget_accepted_up_to=batch.applied_slot,
            )
        except Exception as error:
            fatal(f"writing applied slots up to {batch.applied_slot} failed: {error!r}")
        self._applied_written = batch.applied_slot
        if not self._stopped:
            self.core.applied_written(batch.applied_slot)

    # ------------------------------------------------------------------ log serving

    async def fetch_log(
        self, since: int, max_entries: int, include_ids: bool, entries_only: bool = False
    ) -> FetchResult:
        return await self.log.fetch(
            since,
            max_entries,
            latest=self.core.epoch,
            applied_slot=self.core.sm.applied_slot,
            entry_ids=self.core.sm.entry_ids() if include_ids else [],
            entries_only=entries_only,
        )

    # ------------------------------------------------------------------ catching up

    def _begin_state_transfer(self, peer: str) -> None:
        if self._transferring or peer not in self.peers.peers():
            return
        self._transferring = True
        self._spawn(self.state_transfer(peer))

    async def state_transfer(self, peer: str) -> None:
        """Copy a peer's log (snapshot + tail when far behind) via FetchLog, then install it."""
        try:
            with _tracer.start_as_current_span(
                attr.CMS_STATE_TRANSFER, attributes={attr.PEER: peer}
            ):
                await copy_state(self, peer)
        except Exception as error:
            log.warning("state transfer from %s failed: %s", peer, error)
        finally:
            self._transferring = False

    async def _backfill(self) -> None:
        """Fill the log below an installed snapshot with entries from peers, so this member
        can serve any suffix of the log (the snapshot made it current; this makes it whole)."""
        if self._backfilling:
            return
        self._backfilling = True
        try:
            await backfill(self)
        finally:
            self._backfilling = False

    # ------------------------------------------------------------------ describe

    def describe(self) -> MemberDescription:
        status = self.core.node.status()
        members = self.core.sm.metadata.cms_members or tuple(
            CMSMember(member_id=m, address=a) for m, a in sorted(self.settings.members.items())
        )
        return MemberDescription(
            member_id=self.member_id,
            members=tuple(members),
            leader_id=status.leader_id or "",
            epoch=self.core.epoch,
            snapshot_epochs=tuple(self.core.snapshot_epochs),
            promised=status.promised,
            applied_slot=self.core.sm.applied_slot,
            ready=self.core.ready,
            snapshots_installed=self.core.snapshots_installed,
            log_complete=self.log_complete,
        )


def _accepted_row(slot: int, ballot: Ballot, value: tuple[bytes, ...]) -> AcceptedRow:
    return AcceptedRow(slot, ballot.round, ballot.node_id, encode_slot_value(value))
