"""The CMS member core: the Paxos node and the metadata state machine, and every decision a
member makes around them. No I/O, clock or randomness: time comes in as ``now_ms``, randomness
as the function the shell seeds, and what the shell must do goes out as effects
(``epochal.cmscore.effects``). The CMS server (``epochal.cms.member``) and the simulator
(``epochal.sim``) drive this same object.

Theory of operation
-------------------
Commits (DESIGN.md "Batching", "Careful"): the leader keeps exactly one slot in flight. When the
slot before it is chosen and applied, it validates every pending transformation in order
against the state at the tail, defers one that only fails because of another in the same batch
(it is validated again next round, against a state that really happened), rejects one that
fails at the tail outright, and proposes the rest as one slot (``epochal.cmscore.batching``). A
value validated this way can never rest on a slot that is later lost, because there is no later
slot in flight. Followers forward commits to the leader and learn the slot that carries them
from the votes (the leader names them as learners). Entry ids are checked before proposing and
again at apply, on every member, so a re-proposal and a retry of one transformation commit it
once; a commit is answered only once the slot that carries it is applied here (or, forwarded,
by the leader once it applied it).

Membership (DESIGN.md "Membership"; epochal.tcm.cms): who votes is in the metadata. When an
applied slot s changes the CMS members, the Paxos node gets a configuration governing slots
from s + α (α = 1 slot in flight), and the peers follow the members' addresses. Before the
first InitializeCMS the voters are the initial members. A member not among them starts as a
joiner: it registers itself as a candidate (``candidacy``) and follows the log as a learner; it
neither campaigns nor votes until FinishAddToCMS makes it a voter.

The shell's side: it performs each Ready of ``node`` (send, persist, send), hands the chosen
slots to ``apply`` in order, calls ``after_readies`` once it has drained them (leadership
changes are noticed and the next slot proposed there), and performs ``take_effects`` after
every call.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence

from epochal.cmscore.batching import (
    INTERNAL_ENTRY_ID_PREFIX,
    Batch,
    BatchLimits,
    build_batch,
    known_answer,
    proposal_item,
)
from epochal.cmscore.catch_up import CatchingUp
from epochal.cmscore.commits import Commits, Pending
from epochal.cmscore.config import BUG_ANSWER_FORWARDED_EARLY, MemberConfig
from epochal.cmscore.effects import (
    CancelLinger,
    Effect,
    FlushDue,
    LeaderChanged,
    PeersChanged,
    Published,
    RoundEnded,
    RoundStarted,
    StartLinger,
    StoppedApplying,
    Waiter,
)
from epochal.cmscore.flush import AppliedBatch, Unflushed
from epochal.cmscore.membership import membership_of, peer_addresses, reconfigured
from epochal.cmscore.replay import replay
from epochal.cmscore.rows import StoredState
from epochal.cmscore.state_machine import CommitResult, ProposalItem, SlotResult
from epochal.errors import EpochalError, NotLeader, Overloaded, ShuttingDown, Unavailable
from epochal.paxos import AcceptedSlot, Ballot, ChosenSlot, Membership, PaxosNode
from epochal.tcm import ClusterMetadata, CMSMember, InitializeCMS
from epochal.wire.metadata import MalformedInput, MetadataEncoder
from epochal.wire.paxos import decode_slot_value
from epochal.wire.proposal import decode_item, encode_item

log = logging.getLogger(__name__)

Outcome = CommitResult | EpochalError


class Route(enum.Enum):
    ANSWERED = "answered"  # ``answer`` is the commit's outcome, known now
    LEAD = "lead"  # this member leads: ``enqueue`` it
    FORWARD = "forward"  # ``leader`` leads: forward it there (``forwarding``)
    WAIT = "wait"  # no leader known: wait for one, then route it again


class Routing:
    __slots__ = ("answer", "leader", "route")

    def __init__(self, route: Route, answer: Outcome | None = None, leader: str = "") -> None:
        self.route = route
        self.answer = answer
        self.leader = leader


_LEAD = Routing(Route.LEAD)
_WAIT = Routing(Route.WAIT)


class _OwnProposal:
    """The slot this leader has in flight and the states it validated it into."""

    __slots__ = ("base", "items", "states", "values")

    def __init__(
        self,
        values: tuple[bytes, ...],
        items: list[ProposalItem],
        base: ClusterMetadata,
        states: list[ClusterMetadata],
    ) -> None:
        self.values = values
        self.items = items
        self.base = base
        self.states = states  # after each item


class MemberCore(CatchingUp):
    def __init__(
        self,
        config: MemberConfig,
        stored: StoredState,
        snapshot_epochs: Sequence[int],
        *,
        random: Callable[[], float],
        now_ms: int,
    ) -> None:
        self.config = config
        self.member_id = config.member_id
        replayed = replay(stored, config.entry_id_retention_epochs)
        self.sm = replayed.machine
        self.sm.planted_bugs = config.planted_bugs
        self.unreadable = replayed.unreadable  # the stored log stops short: see ``start``
        self.snapshot_epochs = list(snapshot_epochs)
        self._paxos_settings = config.paxos_settings()
        self.node = PaxosNode(
            self.member_id,
            self.membership_of(self.sm.metadata),
            self._paxos_settings,
            random,
            now_ms,
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
        self._limits = BatchLimits(
            max_values=config.max_batch_values,
            max_bytes=config.max_batch_bytes,
            snapshot_frequency=config.snapshot_frequency,
            snapshot_closes_slot=config.snapshot_closes_slot,
        )
        self._effects: list[Effect] = []
        self.commits = Commits(self._effects, config.max_pending_commits)
        self._proposal: _OwnProposal | None = None
        self._last_batch_commits = 0  # client commits in the last slot this member proposed
        self._linger_armed = False
        self._lingered = False
        self._was_leader = False
        self._last_leader_id: str | None = None
        self._unflushed = Unflushed()
        self._snapshot_encoder = MetadataEncoder()  # reuses what an earlier snapshot encoded
        self.target_epoch = 0
        self.ready = False
        self.draining = False  # stopping: commits in flight settle, new ones are refused
        # Why this member stopped applying the log (a chosen value it cannot read), or "".
        self.stopped_applying = ""
        self.snapshots_installed = 0

    # ------------------------------------------------------------------ the shell's interface

    def take_effects(self) -> list[Effect]:
        effects = self._effects[:]  # the list is shared with ``commits``: emptied in place
        self._effects.clear()
        self.commits.taken()
        return effects

    def start(self) -> None:
        """After construction: the peers to follow, and a stored log that stops short."""
        self._effects.append(PeersChanged(self.peer_addresses(self.sm.metadata)))
        if self.unreadable:
            self.stop_applying(self.sm.applied_slot + 1, self.unreadable, stored=True)

    @property
    def epoch(self) -> int:
        return self.sm.epoch

    def after_readies(self, now_ms: int) -> bool:
        """The shell drained the node's Readies: notice a leadership change, and propose the
        next slot if one is due. True when it proposed (the shell drains the Readies again)."""
        self._on_role_change()
        return self.maybe_propose(now_ms)

    # ------------------------------------------------------------------ commits

    def route(self, item: ProposalItem) -> Routing:
        """Where a client's commit goes from this member."""
        known = self.sm.lookup(item.entry_id)
        if known is not None:
            return Routing(Route.ANSWERED, known_answer(item, known))
        if self.draining:
            return Routing(Route.ANSWERED, self.shutting_down())
        if self.stopped_applying:
            return Routing(Route.ANSWERED, Unavailable(self.stopped_applying))
        if self.node.is_leader:
            return _LEAD
        leader = self.node.leader_id
        if leader is None or leader == self.member_id:
            return _WAIT
        return Routing(Route.FORWARD, leader=leader)

    def route_forwarded(self, item: ProposalItem) -> Outcome | None:
        """A commit another member forwarded: its answer now, or None to ``enqueue`` it."""
        known = self.sm.lookup(item.entry_id)
        if known is not None:
            return known_answer(item, known)
        if self.stopped_applying:
            return Unavailable(self.stopped_applying)
        if not self.node.is_leader:
            return NotLeader(self.node.leader_id)
        if self.draining:
            return NotLeader(None)  # leading still, but not for long: wait for the next leader
        return None

    def enqueue(self, item: ProposalItem, waiter: Waiter, origin: str | None, now_ms: int) -> bool:
        """Queue a commit for the next batch; raises Overloaded when the queue is full. True when
        a slot was proposed (the shell drains the node's Readies)."""
        self.commits.queue(item, waiter, origin)
        log.debug(
            "commit %s queued at the leader (%d pending)", item.entry_id, len(self.commits.pending)
        )
        return self.maybe_propose(now_ms)

    def shutting_down(self) -> ShuttingDown:
        return ShuttingDown(
            f"{self.member_id} is shutting down; retry with the same entry_id on another member"
        )

    def fail_in_flight(self, error: Callable[[], EpochalError]) -> None:
        """Settle every commit in flight with an error of its own (``error`` builds one)."""
        self.commits.fail_in_flight(error)
        if self._proposal is not None:
            self._proposal = None
            self._effects.append(RoundEnded(0))

    def fail_all(self, error: Callable[[], EpochalError]) -> None:
        self.fail_in_flight(error)
        self.commits.fail_pending(error)

    def fail_everything(self, error: Callable[[], EpochalError]) -> None:
        """``fail_all``, and the commits forwarded to the leader too (this member will not
        answer them by applying their slots)."""
        self.fail_all(error)
        self.commits.fail_forwarded(error)

    # ------------------------------------------------------------------ proposing

    def maybe_propose(self, now_ms: int) -> bool:
        if not (self.commits.pending or (self.node.is_leader and self.sm.epoch == 0)):
            return False
        if not self.node.idle_leader or self.sm.applied_slot != self.node.chosen_up_to:
            return False
        if self._linger():
            return False
        base = self.sm.metadata
        batch = self._build_batch(base)
        if not batch.items:
            return False
        items = batch.items
        self._lingered = False
        self._last_batch_commits = sum(1 for i in items if i.entry_id in self.commits.in_flight)
        values = tuple(encode_item(item) for item in items)
        try:
            self.node.propose(values, now_ms, batch.learners)
        except (NotLeader, Overloaded) as error:  # not expected: idle_leader was true
            log.error("proposal refused by the Paxos core: %s", error)
            self.fail_in_flight(lambda: NotLeader(self.node.leader_id))
            return False
        self._proposal = _OwnProposal(values, items, base, batch.states)
        self._effects.append(
            RoundStarted(
                len(items), str(self.node.status().ballot), tuple(i.entry_id for i in items)
            )
        )
        return True

    def linger_over(self, now_ms: int) -> bool:
        self._linger_armed = False
        self._lingered = True
        return self.maybe_propose(now_ms)

    def _linger(self) -> bool:
        """Group commit (like PostgreSQL's commit_delay): while the log is busy, wait a little
        for more commits before proposing, so that rounds carry more of them. Every round costs
        the same few messages and fsyncs whatever it carries, and on a loaded machine those
        compete for the CPU with the commits themselves. A commit after a quiet spell, or one
        slot's worth of them, goes at once."""
        config = self.config
        if (
            self._lingered
            or config.batch_linger_ms <= 0
            or self._last_batch_commits < config.batch_linger_commits
            or len(self.commits.pending) >= config.max_batch_values
        ):
            return False
        if not self._linger_armed:
            self._linger_armed = True
            self._effects.append(StartLinger(config.batch_linger_ms))
        return True

    def _build_batch(self, base: ClusterMetadata) -> Batch[Pending]:
        """The next slot from the queued commits (``epochal.cmscore.batching``)."""
        batch = build_batch(
            base,
            self.commits.live(),
            item_of=lambda pending: pending.item,
            origin_of=lambda pending: pending.origin,
            lookup=self.sm.lookup,
            limits=self._limits,
            last_snapshot_epoch=self.snapshot_epochs[-1] if self.snapshot_epochs else 0,
            initialize=self._initialize_item() if base.epoch == 0 else None,
        )
        self.commits.decided(batch)
        if BUG_ANSWER_FORWARDED_EARLY in self.config.planted_bugs:
            self.commits.answer_forwarded_early(batch)
        return batch

    def _initialize_item(self) -> ProposalItem:
        transformation = InitializeCMS(
            members=tuple(
                CMSMember(member_id=m, address=a) for m, a in sorted(self.config.members.items())
            )
        )
        return proposal_item(transformation, f"{INTERNAL_ENTRY_ID_PREFIX}initialize")

    def _on_role_change(self) -> None:
        leader = self.node.leader_id
        is_leader = self.node.is_leader
        if leader == self._last_leader_id and is_leader == self._was_leader:
            return
        self._last_leader_id = leader
        if is_leader != self._was_leader:
            self._was_leader = is_leader
            log.info(
                "member %s is %s (ballot %s)",
                self.member_id,
                "now the leader" if is_leader else "no longer the leader",
                self.node.status().ballot,
            )
            if not is_leader:
                self.fail_all(lambda: NotLeader(self.node.leader_id))
                if self._linger_armed:
                    self._linger_armed = False
                    self._effects.append(CancelLinger())
                self._last_batch_commits = 0
                self._lingered = False
        self._effects.append(LeaderChanged(leader, is_leader))

    # ------------------------------------------------------------------ apply

    def carries_own(self, chosen: Sequence[ChosenSlot]) -> int:
        """The slot among ``chosen`` that holds the value this leader has in flight, else 0: the
        moment a quorum accepted it, before it is applied (a shell times its commits' spans by
        it; followers learn it from messages sent after)."""
        proposal = self._proposal
        if proposal is None:
            return 0
        return next((r.slot for r in chosen if r.value == proposal.values), 0)

    def apply(self, chosen: Sequence[ChosenSlot]) -> None:
        """Apply chosen slots, in order, answer the commits waiting on them, and queue what
        they wrote for the next lazy flush."""
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
                    self.stop_applying(record.slot, str(error))
                    return
                result = self.sm.apply_slot(record.slot, items)
            membership = self.node.membership
            if self.sm.metadata.cms_members != members_before:
                membership = self._reconfigure(record.slot)
            self.node.applied(record.slot, membership)
            self.commits.answer(result, self.sm.lookup)  # first: the clients need nothing else
            self._record_applied(result)
            if proposal is not None:  # its span ends: its value chosen, or another's instead
                carried = record.value == proposal.values
                self._effects.append(RoundEnded(record.slot if carried else 0))
        self.check_ready()

    def stop_applying(self, slot: int, problem: str, stored: bool = False) -> None:
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
        self._effects.append(StoppedApplying(self.stopped_applying))
        self.fail_everything(lambda: Unavailable(self.stopped_applying))
        self.check_ready()

    def _record_applied(self, result: SlotResult) -> None:
        rows = self._unflushed.add(result)
        for epoch, _ in result.snapshots:
            self.snapshot_epochs.append(epoch)
        if not self._unflushed.due_announced:
            self._unflushed.due_announced = True
            self._effects.append(FlushDue())
        if rows:
            self._effects.append(Published(rows, self.sm.epoch))

    def take_applied(self) -> AppliedBatch | None:
        """What was applied since the last call, to write lazily (one transaction)."""
        unflushed, self._unflushed = self._unflushed, Unflushed()
        return unflushed.batch(self._snapshot_encoder)

    def applied_written(self, slot: int) -> None:
        """The shell wrote the applied state up to ``slot``: the node may forget the slots
        before its last ``retain_slots`` (kept for peers that catch up)."""
        up_to = slot - self.config.retain_slots
        if up_to > 0 and up_to <= self.sm.applied_slot:
            self.node.compact(min(up_to, self.node.chosen_up_to))

    # ------------------------------------------------------------------ membership

    def membership_of(self, metadata: ClusterMetadata) -> Membership:
        return membership_of(metadata, self.config.members)

    def peer_addresses(self, metadata: ClusterMetadata) -> dict[str, str]:
        return peer_addresses(metadata, self.config.members, self.member_id)

    def _reconfigure(self, slot: int) -> Membership:
        """Slot ``slot`` changed the members: they govern from slot + α on."""
        metadata = self.sm.metadata
        alpha = self._paxos_settings.max_in_flight_slots
        membership = reconfigured(self.node.membership, metadata, slot + alpha)
        self._effects.append(PeersChanged(self.peer_addresses(metadata)))
        latest = membership.configurations[-1]
        log.info(
            "member %s: CMS members at epoch %d govern from slot %d: voters %s, learners %s",
            self.member_id,
            metadata.epoch,
            latest.from_slot,
            ",".join(sorted(latest.voters)),
            ",".join(sorted(latest.learners)) or "-",
        )
        return membership
