"""A CMS member in the simulator: the member core the server runs (``epochal.cmscore``) inside a
shell that does what ``epochal.cms.member`` does, on the simulated world.

Theory of operation
-------------------
The shell drains the core's Readies as the server does: proposer messages go at once; acceptor
writes go to the simulated disk, which completes writes in order, each after a random delay,
and the replies that depend on a write leave only once it (and every write before it)
completed; chosen slots are applied by the core at once; each Ready is advanced once performed.
The applied state the core hands over (``take_applied``) is written lazily, in order with the
votes. A crash drops everything not yet on disk; a restart builds a new core from the disk
alone, asks the peers their epochs (a member far behind copies a peer's state first, as the
server does at start) and takes part again.

Commits arrive from the simulated clients and are routed by the core: answered at once, queued
here when leading, forwarded to the leader (whose answer comes back over the network), or sent
back to wait for a leader. A state transfer copies a peer's durable rows over the network and
replays them through the core's ``next_state``, as the server does over FetchLog. Every effect
of the core is performed here; the cluster's invariants are checked on what the core emits.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from epochal.cmscore import MemberConfig, MemberCore, Route
from epochal.cmscore import effects as fx
from epochal.cmscore.batching import proposal_item
from epochal.cmscore.replay import next_state
from epochal.cmscore.rows import AcceptedRow, EntryIdRow, LogEntryRow, SnapshotRow
from epochal.cmscore.state_machine import CommitResult, ProposalItem
from epochal.errors import CommitTimeout, EpochalError, NotLeader, Rejected
from epochal.paxos import ChosenSlot, Message, Ready
from epochal.sim.cms_disk import SimDisk
from epochal.wire.metadata import decode_metadata
from epochal.wire.paxos import encode_slot_value

if TYPE_CHECKING:
    from epochal.sim.cms_cluster import CMSCluster

Reply = Callable[[CommitResult | EpochalError], None]
START_EPOCH_QUERY_MS = 20  # how long a restarted member waits for its peers' epochs
TRANSFER_TIMEOUT_MS = 200


class _Written:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


class SimWaiter:
    """A commit waiting at a member: the core holds it, the shell settles it once."""

    __slots__ = ("_done", "reply")

    def __init__(self, reply: Reply) -> None:
        self._done = False
        self.reply = reply

    def done(self) -> bool:
        return self._done

    def settle(self, outcome: CommitResult | EpochalError) -> None:
        if not self._done:
            self._done = True
            self.reply(outcome)


class SimShell:
    def __init__(self, cluster: CMSCluster, config: MemberConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.id = config.member_id
        self.disk = SimDisk()
        self.up = False
        self.incarnation = 0
        self.core: MemberCore
        self.accepting = False
        self.disk_done_ms = 0  # writes complete in order, the last one queued at this time
        self.acceptor_writes_queued = 0
        self.pending_disk_writes = 0
        self.flush_scheduled = False
        self.linger_token = 0
        self.transferring = False

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        world = self.cluster.world
        self.up = True
        self.incarnation += 1
        self.accepting = False
        self.acceptor_writes_queued = 0
        self.pending_disk_writes = 0
        self.disk_done_ms = world.now_ms
        self.flush_scheduled = False
        self.transferring = False
        self.unadvanced: deque[tuple[Ready, _Written]] = deque()
        self.core = MemberCore(
            self.config,
            self.disk.load(),
            self.disk.snapshot_epochs(),
            random=self.cluster.member_random(self.id),
            now_ms=world.now_ms,
        )
        self.core.start()
        self.perform()
        self.cluster.check_state(self.id, self.core)
        self._ask_peer_epochs()

    def crash(self, power_loss: bool = False) -> bool:
        """Returns whether unsynced state was lost: writes not completed, and on a power loss
        the lazy writes no durable one followed."""
        lost = self.pending_disk_writes > 0
        if power_loss:
            lost = self.disk.power_loss() or lost
        self.up = False
        self.incarnation += 1
        return lost

    def alive(self, incarnation: int) -> bool:
        return self.up and self.incarnation == incarnation

    def later(self, delay_ms: float, label: str, action: Callable[[], None]) -> None:
        incarnation = self.incarnation

        def run() -> None:
            if self.alive(incarnation):
                action()

        self.cluster.world.schedule(max(0, math.ceil(delay_ms)), f"{label} {self.id}", run)

    def _ask_peer_epochs(self) -> None:
        epochs: list[tuple[int, str]] = []
        for peer in self.cluster.peer_ids(self.id):
            self.cluster.request(
                self.id,
                peer,
                "epoch?",
                lambda p: p.core.epoch,
                lambda epoch, peer=peer: epochs.append((epoch, peer)),  # type: ignore[misc]
            )

        def decide() -> None:
            peer = self.core.learned_target(epochs)
            self.perform()
            if peer is not None:
                self._state_transfer(peer, then=self._take_part)
            else:
                self._take_part()

        self.later(START_EPOCH_QUERY_MS, "epochs known", decide)

    def _take_part(self) -> None:
        self.accepting = True
        self._tick()
        self._register_as_candidate()

    def _tick(self) -> None:
        if self.core.stopped_applying:
            return
        self.core.node.tick(self.cluster.world.now_ms)
        self.process()
        self.core.commits.expire()
        self.later(self.cluster.tick_ms, "tick", self._tick)

    # -------------------------------------------------------------- the Ready loop

    def deliver(self, message: Message) -> None:
        if self.up and self.accepting and not self.core.stopped_applying:
            self.core.node.step(message, self.cluster.world.now_ms)
            self.process()

    def process(self) -> None:
        node = self.core.node
        while self.up and not self.core.stopped_applying:
            self._advance_performed()
            ready = node.take_ready()
            if ready.is_empty():
                if self.core.after_readies(self.cluster.world.now_ms):
                    continue
                break
            written = _Written()
            self.unadvanced.append((ready, written))
            self._send_all(ready.messages)
            if ready.needs_persist or self.acceptor_writes_queued > 0:
                self._persist_then_send(ready, written)
            else:
                self._send_all(ready.messages_after_persist)
                written.done = True
            self._apply(ready.chosen)
            if ready.state_transfer is not None:
                self.core.begin_state_transfer(ready.state_transfer.peer)
        self.perform()

    def _advance_performed(self) -> None:
        """Advance, in the order taken, each Ready performed in full (its slots were applied
        when it was taken; its writes and the replies after them are done)."""
        while self.unadvanced and self.unadvanced[0][1].done:
            self.core.node.advance(self.unadvanced.popleft()[0])

    def _send_all(self, messages: tuple[Message, ...]) -> None:
        for message in messages:
            self.cluster.send(message)

    def _persist_then_send(self, ready: Ready, written: _Written) -> None:
        """Write the Ready's acceptor state after every write queued before it, then send the
        replies that depend on it (and on the writes before it)."""
        self.acceptor_writes_queued += 1
        if ready.needs_persist:
            self.pending_disk_writes += 1

        def complete() -> None:
            self.acceptor_writes_queued -= 1
            if ready.needs_persist:
                self.pending_disk_writes -= 1
            promise = ready.persist_promise
            rows = [
                AcceptedRow(r.slot, r.ballot.round, r.ballot.node_id, encode_slot_value(r.value))
                for r in ready.persist_accepted
            ]
            synced = self.disk.save_acceptor(
                (promise.round, promise.node_id) if promise else None, rows
            )
            if synced:
                # The durable write made the lazy ones before it durable (as storage.py's).
                self.core.node.durable(synced)
            self._send_all(ready.messages_after_persist)
            written.done = True
            self.process()

        self._disk_write(ready.needs_persist, "fsync", complete)

    def _disk_write(self, delay: bool, label: str, complete: Callable[[], None]) -> None:
        world = self.cluster.world
        delay_ms = self.cluster.disk_delay_ms() if delay else 0
        self.disk_done_ms = max(self.disk_done_ms, world.now_ms + delay_ms)
        self.later(self.disk_done_ms - world.now_ms, label, complete)

    def _apply(self, chosen: tuple[ChosenSlot, ...]) -> None:
        if not chosen:
            return
        for record in chosen:
            self.cluster.check_chosen(self.id, record.slot, record.value)
        self.core.apply(chosen)
        self.cluster.check_state(self.id, self.core)

    # -------------------------------------------------------------- the core's effects

    def perform(self) -> None:
        effects = self.core.take_effects()
        # What was applied is recorded before the answers it gave are checked (they come from
        # the same apply, answers first).
        for effect in effects:
            if isinstance(effect, fx.Published):
                self.cluster.check_published(self.id, effect.rows)
        for effect in effects:
            if isinstance(effect, fx.Settle):
                assert isinstance(effect.waiter, SimWaiter)
                if effect.waiter.done():
                    self.cluster.fail(f"{self.id} answered a commit twice: {effect.outcome}")
                effect.waiter.settle(effect.outcome)
            elif isinstance(effect, fx.FlushDue):
                self._schedule_flush()
            elif isinstance(effect, fx.StartLinger):
                token = self.linger_token
                self.later(effect.delay_ms, "linger", lambda t=token: self._linger_over(t))
            elif isinstance(effect, fx.CancelLinger):
                self.linger_token += 1
            elif isinstance(effect, fx.BeginStateTransfer):
                self._state_transfer(effect.peer, then=lambda: None)
            elif isinstance(effect, fx.StoppedApplying):
                self.cluster.fail(f"{self.id} stopped applying: {effect.reason}")
            # PeersChanged, ReadinessChanged, LeaderChanged, RoundStarted, RoundEnded: the
            # simulated network reaches every member; clients find the leader by its answers.

    def _linger_over(self, token: int) -> None:
        if token == self.linger_token and self.core.linger_over(self.cluster.world.now_ms):
            self.process()
        else:
            self.perform()

    def _schedule_flush(self) -> None:
        if self.flush_scheduled:
            return
        self.flush_scheduled = True
        self.later(self.cluster.flush_interval_ms, "flush", self._flush)

    def _flush(self) -> None:
        self.flush_scheduled = False
        batch = self.core.take_applied()
        if batch is None:
            return
        self.cluster.check_snapshots(self.id, batch.snapshots)
        self.pending_disk_writes += 1

        def complete() -> None:
            self.pending_disk_writes -= 1
            self.disk.save_applied(batch)  # durable once a durable write follows
            self.core.applied_written(batch.applied_slot)
            self.process()

        self._disk_write(True, "apply", complete)

    def _flush_now(self) -> None:
        """Before a state transfer installs: what was applied goes to disk first."""
        batch = self.core.take_applied()
        if batch is not None:
            self.cluster.check_snapshots(self.id, batch.snapshots)
            self.disk.save_applied(batch)

    # -------------------------------------------------------------- commits

    def commit(self, item: ProposalItem, reply: Reply, deadline_ms: int) -> None:
        """A client's commit: one pass of the server's commit loop (``CMSMemberLoop.commit``):
        answered now, queued here, forwarded to the leader, or routed again once there is one.
        A NotLeader while it waits sends it round again, with the same entry id."""
        if not (self.up and self.accepting):
            return  # lost: the client times out and retries elsewhere
        now = self.cluster.world.now_ms
        core = self.core

        def settled(outcome: CommitResult | EpochalError) -> None:
            core.commits.forward_over(item.entry_id, waiter)
            if isinstance(outcome, NotLeader) and self.cluster.world.now_ms < deadline_ms:
                self.later(5, "commit again", lambda: self.commit(item, reply, deadline_ms))
            else:
                reply(outcome)

        waiter = SimWaiter(settled)
        routing = core.route(item)
        if routing.route is Route.ANSWERED:
            assert routing.answer is not None
            waiter.settle(routing.answer)
        elif now >= deadline_ms:
            waiter.settle(CommitTimeout("no outcome in time; retry with the same entry_id"))
        elif routing.route is Route.LEAD:
            self._enqueue(item, waiter, None, deadline_ms)
        elif routing.route is Route.WAIT:
            self.later(10, "wait for a leader", lambda: self.commit(item, reply, deadline_ms))
        else:
            core.commits.forwarding(item, waiter)
            self.cluster.forward(self.id, routing.leader, item, waiter.settle)
            timeout = CommitTimeout("no outcome from the leader in time; retry")
            self.later(deadline_ms - now, "forward timeout", lambda: waiter.settle(timeout))
        self.perform()

    def commit_forwarded(self, item: ProposalItem, origin: str, reply: Reply) -> None:
        """A commit ``origin`` forwarded (``CMSMemberLoop.commit_forwarded``)."""
        if not (self.up and self.accepting):
            return
        waiter = SimWaiter(reply)
        answer = self.core.route_forwarded(item)
        if answer is not None:
            waiter.settle(answer)
        else:
            self._enqueue(
                item, waiter, origin, self.cluster.world.now_ms + self.cluster.commit_timeout_ms
            )
        self.perform()

    def _enqueue(
        self, item: ProposalItem, waiter: SimWaiter, origin: str | None, deadline_ms: int
    ) -> None:
        try:
            proposed = self.core.enqueue(item, waiter, origin, self.cluster.world.now_ms)
        except EpochalError as error:  # Overloaded
            waiter.settle(error)
            return
        timeout = CommitTimeout("no outcome in time; retry with the same entry_id")
        self.later(
            deadline_ms - self.cluster.world.now_ms,
            "commit timeout",
            lambda: waiter.settle(timeout),
        )
        if proposed:
            self.process()

    def _register_as_candidate(self) -> None:
        """A joiner asks the initial members to add it as a candidate, until it is one."""
        candidacy = self.core.candidacy()
        if candidacy is None:
            return
        transformation, entry_id = candidacy
        item = proposal_item(transformation, entry_id)

        def answered(outcome: CommitResult | EpochalError) -> None:
            if isinstance(outcome, Rejected) and outcome.rule != "cms_member_exists":
                self.cluster.fail(f"{self.id} cannot join the CMS as a candidate: {outcome}")

        self.cluster.submit(self.id, self.cluster.initial_member(), item, answered)
        self.later(200, "register as a candidate", self._register_as_candidate)

    # -------------------------------------------------------------- state transfer

    def _state_transfer(self, peer: str, then: Callable[[], None]) -> None:
        """Copy ``peer``'s durable state over the network and install it (the server does it
        over FetchLog); ``then`` runs once it is installed or given up."""
        if self.transferring or peer == self.id or peer not in self.cluster.members:
            then()
            return
        self.transferring = True
        finished = [False]

        def finish() -> None:
            if not finished[0]:
                finished[0] = True
                self.transferring = False
                then()

        def install(copied: _Copied) -> None:
            if not finished[0]:
                self._install(peer, copied)
                finish()

        self.cluster.request(self.id, peer, "FetchLog", lambda p: p.copy_of_disk(), install)
        self.later(TRANSFER_TIMEOUT_MS, "state transfer timeout", finish)

    def copy_of_disk(self) -> _Copied:
        disk = self.disk.readable()
        snapshot = disk.latest_snapshot()
        entries = disk.entries_after(snapshot.epoch if snapshot else 0)
        return _Copied(snapshot, entries, list(disk.entry_ids.values()), disk.applied_slot)

    def _install(self, peer: str, copied: _Copied) -> None:
        core = self.core
        if copied.applied_slot <= core.sm.applied_slot:
            return
        metadata = core.sm.metadata
        snapshot = copied.snapshot
        if snapshot is not None and snapshot.epoch > metadata.epoch:
            metadata = decode_metadata(snapshot.metadata)
        else:
            snapshot = None
        rows = []
        for row in copied.entries:
            if row.epoch > metadata.epoch:
                metadata = next_state(metadata, row)
                rows.append(row)
        ids = [(r.entry_id, r.epoch, r.digest) for r in copied.entry_ids]
        self._flush_now()
        if not core.install(metadata, copied.applied_slot, ids, snapshot and snapshot.epoch):
            return
        self.disk.install(
            snapshot,
            rows,
            [EntryIdRow(*record) for record in core.sm.entry_ids()],
            copied.applied_slot,
        )
        core.node.durable(copied.applied_slot)
        self.cluster.coverage.state_transfers += 1
        self.cluster.check_state(self.id, core)
        self.process()


class _Copied:
    __slots__ = ("applied_slot", "entries", "entry_ids", "snapshot")

    def __init__(
        self,
        snapshot: SnapshotRow | None,
        entries: list[LogEntryRow],
        entry_ids: list[EntryIdRow],
        applied_slot: int,
    ) -> None:
        self.snapshot = snapshot
        self.entries = entries
        self.entry_ids = entry_ids
        self.applied_slot = applied_slot
