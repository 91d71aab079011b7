"""A multi-Paxos member with no I/O.

Theory of operation
-------------------
The member is fed messages (``step``), clock readings (``tick``) and values to propose
(``propose``); it never reads a clock, sleeps, sends or writes. Each call may leave work in a
``Ready`` (``take_ready``) that the shell performs in this order:

1. send ``messages`` (Prepare, Accept, Commit, catch-up: proposer and learner traffic);
2. make ``persist_promise`` and ``persist_accepted`` durable, after every earlier Ready's;
3. only then send ``messages_after_persist`` (Promise, Accepted: an acceptor's vote counts only
   once it is durable — a quorum of durable accepts is the commit point);
4. apply the ``chosen`` slots, in order, telling the core with ``applied``;
5. acknowledge the Ready with ``advance(ready)``.

Messages addressed to this member itself go through the same path: the leader is also an
acceptor and its own vote is a message it sends itself, so its disk write overlaps the
followers' instead of preceding them.

The shell's side (etcd's raft ``Advance``): the core cannot see the shell's disk or network,
so the shell says what it did. ``advance(ready)`` acknowledges one Ready performed in full;
Readies are advanced in the order they were taken. A shell may take the next Ready before the
last one is advanced — the CMS queues the writes of every Ready of one loop step and makes them
durable in one transaction, applying what they delivered a step later; the simulator's disk
completes each write after a delay — but at most ``max_unadvanced_readies`` at once:
``take_ready`` beyond that raises ReadyProtocolError naming the oldest Ready's work. So a shell
that drops a Ready (its write, its replies, its applies, or the acknowledgement) fails loudly
rather than leaving a leader without votes or a log without its next slot. ``advance`` raises
the same error for a Ready out of order or one whose chosen slots were not reported applied.
Besides the Readies, the shell reports its own state when it changes: ``applied(up_to,
membership)`` after applying chosen slots (a leader proposes nothing whose voters it does not
know), ``durable(up_to)`` once its applied state through ``up_to`` is durable (a write of its
own, in no Ready; the accept window counts from it), ``compact(up_to)`` when it forgets slots it
applied durably, and ``install_state(up_to)`` followed by ``applied`` and ``durable`` when it
copied a peer's state (after taking every Ready, so no slot comes twice).

Roles are follower, candidate and leader. A candidate picks a ballot above every round it has
seen and runs phase 1 once for every slot after its chosen prefix; with promises from a quorum
of every configuration governing that span it becomes leader, re-proposes the highest-ballot
value it learned for each open slot (a no-op where none was accepted), then runs phase 2 per
slot. At most ``max_in_flight_slots`` (α) slots are proposed and not chosen; values queue and
are batched into the next free slot. Any higher ballot makes a candidate or leader a follower.
A leader whose promises report a chosen prefix beyond its own copies it from the member that
reported it before it proposes; when that member stops answering that it holds it for an
election timeout (it is down, lost applied slots it had not written, or the promise was
forged), the leader runs phase 1 again rather than wait for good.

Learning: an acceptor sends its ``Accepted`` vote to the leader and to the slot's *learners* —
members the proposer named because they wait to answer a value in the slot (a follower that
forwarded a commit). A member learns a slot is chosen as soon as it has seen a quorum of votes
for the ballot in which it accepted the slot itself (a leader proposes one value per slot per
ballot, so that ballot names the value): a learner about when the leader does, without waiting
for the leader to tell it. ``Accept`` and ``Commit`` (the heartbeat) also carry the leader's
chosen prefix, for everyone else; a follower marks those slots chosen when it accepted them in
the same ballot and otherwise asks the sender for the chosen values (catch-up). A reply's values
are taken only where they extend the chosen prefix (a leader's, only up to the prefix its
promises reported): a value held past a gap would be delivered later over whatever the group
chose there. A member that asks for slots the peer has compacted is told so and must copy the
peer's state (``StateTransfer``).

The leader's own vote (``leader_vote_delay_ms`` > 0): the followers of a 3-member group are a
quorum by themselves, so the leader need not make its own acceptance durable for every slot. It
sends the Accept to the followers only and votes itself for a slot still not chosen after the
delay; from then on it votes at once, and every ``OWN_VOTE_PROBE_SLOTS`` slots it tries letting
the followers decide again. A small slot (at most ``leader_votes_small_slots_up_to`` values: the
log is quiet) is the other way round: the leader votes at once, its write being free while it
would only wait, and sends the Accept to just enough followers for a quorum with its own vote,
those that wait to learn the slot first. On a machine whose members share CPUs or a disk, every
extra acceptor's fsync and messages slow the ones the quorum waits for. The other followers get
the slot's value in a ``CatchUpReply`` once it is chosen, or the Accept if it is not chosen after
``leader_vote_delay_ms`` (and then, like a late own vote, every slot goes to everyone until the
next probe). Safety does not depend on it: a vote, the leader's or not, counts
only once it is durable, and an acceptor that never votes is allowed by Paxos.

Membership: the shell applies chosen slots and tells the core with ``applied(up_to,
membership)``; a configuration a slot s makes governs from s + α. A leader therefore knows the
voters of every slot up to applied + α and proposes nothing beyond that — a re-proposal found in
phase 1 past it waits (parked) until the slots before it are applied, and new values wait too.
When a newly known configuration is not covered by the leader's promises it runs phase 1 again;
when it no longer votes it steps down; a member that does not vote never campaigns. Nobody
learns a slot past applied + α from votes either: a member that missed a reconfiguration would
count them against the wrong voters (it learns such a slot from the leader's chosen prefix, or
from the votes once it has applied the slots before). So a leader that was elected on a stale
view (its promises show chosen slots it has not applied) learns them before it proposes under
configurations it does not know.

Invariants kept here, each asserted where it could break (a broken one is a bug: it crashes):
``promised`` never decreases (``_promise``; ``step`` refuses every ballot below it, with a Nack,
before any handler runs); a slot accepted in ballot b is only replaced by an accept in a ballot
>= b (``_on_accept``); ``chosen_up_to`` only grows (``_advance_chosen``) and every slot up to it
has a chosen value or was compacted (``_chosen_value``, wherever one is read); chosen slots are
delivered exactly once, in order (``_deliver``, ``install_state``).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from epochal.paxos.ballot import MAX_ROUND, ZERO_BALLOT, Ballot
from epochal.paxos.errors import NotLeader, Overloaded, ReadyProtocolError
from epochal.paxos.membership import Membership
from epochal.paxos.messages import (
    NOOP,
    Accept,
    Accepted,
    AcceptedSlot,
    CatchUpReply,
    CatchUpRequest,
    ChosenSlot,
    Commit,
    Message,
    Nack,
    Prepare,
    Promise,
    SlotValue,
)
from epochal.paxos.ready import Ready, StateTransfer
from epochal.paxos.settings import BUG_REPLY_BEFORE_DURABLE, BUG_SKIP_REPROPOSAL, PaxosSettings

# What a proposer sends under its ballot: each is refused below the promise, in ``step``. The
# other messages with a ballot are replies naming the receiver's own (Promise, Accepted, Nack).
ProposerMessage = Prepare | Accept | Commit
_PROPOSER_MESSAGES = (Prepare, Accept, Commit)


class Role(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(slots=True)
class _Slot:
    accepted_ballot: Ballot | None = None
    accepted_value: SlotValue | None = None
    chosen_value: SlotValue | None = None
    # Learning from votes: the voters seen to accept this slot in ``votes_ballot``.
    votes_ballot: Ballot | None = None
    votes: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Proposal:
    value: SlotValue
    sent_ms: int
    learners: tuple[str, ...] = ()
    acks: set[str] = field(default_factory=set)
    # Voters the Accept did not go to (see "The leader's own vote"): the leader itself when
    # its vote waits, or the followers a small slot's quorum did not need. They get it if the
    # slot is still not chosen at ``left_out_due_ms``; followers get its value once it is.
    left_out: frozenset[str] = frozenset()
    left_out_due_ms: int | None = None


@dataclass(slots=True)
class Stats:
    """Counters for coverage and metrics (plain state; no clock or I/O)."""

    elections_started: int = 0
    leader_changes: int = 0
    reproposed_values: int = 0
    noop_fills: int = 0
    slots_proposed: int = 0
    values_proposed: int = 0
    catch_up_requests: int = 0
    state_transfers: int = 0
    own_votes_needed: int = 0  # lazy own votes the followers did not make unnecessary
    small_slots: int = 0  # slots sent to a quorum only
    small_slot_fallbacks: int = 0  # of those, slots that had to be sent to everyone
    rounds_exhausted: int = 0  # elections not started: no round is left above the highest seen
    catch_up_elections: int = 0  # phase 1 again: the prefix the promises reported did not come


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStatus:
    node_id: str
    role: Role
    leader_id: str | None
    ballot: Ballot | None
    promised: Ballot
    chosen_up_to: int
    in_flight_slots: int
    pending_values: int


_EMPTY_READY = Ready()
# With lazy own votes, how many slots the leader votes at once after it had to (see
# _after_choosing) before it lets the followers decide again.
OWN_VOTE_PROBE_SLOTS = 64


class _Outbox:
    """Accumulates one Ready."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.after_persist: list[Message] = []
        self.promise: Ballot | None = None
        self.accepted: dict[int, AcceptedSlot] = {}
        self.chosen: list[ChosenSlot] = []
        self.dropped: list[bytes] = []
        self.state_transfer: StateTransfer | None = None

    def is_empty(self) -> bool:
        return not (
            self.messages
            or self.after_persist
            or self.promise is not None
            or self.accepted
            or self.chosen
            or self.dropped
            or self.state_transfer is not None
        )

    def freeze(self) -> Ready:
        if self.is_empty():
            return _EMPTY_READY
        return Ready(
            messages=tuple(self.messages),
            persist_promise=self.promise,
            persist_accepted=tuple(self.accepted[s] for s in sorted(self.accepted)),
            messages_after_persist=tuple(self.after_persist),
            chosen=tuple(self.chosen),
            dropped_values=tuple(self.dropped),
            state_transfer=self.state_transfer,
        )


class PaxosNode:
    """One member: acceptor, learner, and proposer when leader. Not thread-safe."""

    def __init__(
        self,
        node_id: str,
        membership: Membership,
        settings: PaxosSettings,
        random_fraction: Callable[[], float],
        now_ms: int,
        *,
        promised: Ballot = ZERO_BALLOT,
        accepted: Iterable[AcceptedSlot] = (),
        chosen_up_to: int = 0,
    ) -> None:
        """Start, or restart from durable state: the promise, the accepted slots, and the
        prefix of slots already applied (compacted) by the shell."""
        self.node_id = node_id
        self.membership = membership
        self.settings = settings
        self.stats = Stats()
        self._random_fraction = random_fraction
        self._now_ms = now_ms
        self._out = _Outbox()

        self._promised = promised
        self._max_round_seen = promised.round
        self._log: dict[int, _Slot] = {}
        for record in accepted:
            if record.slot > chosen_up_to:
                self._log[record.slot] = _Slot(record.ballot, record.value)
        self._chosen_up_to = chosen_up_to
        self._compacted_up_to = chosen_up_to
        self._delivered_up_to = chosen_up_to
        # The last chosen slot handed to the shell in a Ready taken, or installed: the next
        # slot delivered must be the one after it (delivered exactly once, in order).
        self._taken_through = chosen_up_to
        # Readies taken and not yet advanced by the shell, oldest first.
        self._unadvanced: deque[Ready] = deque()
        # Every slot up to here is applied by the shell and ``membership`` holds the
        # configurations those slots made: voters are known through _applied_through + α.
        self._applied_through = chosen_up_to
        # The applied prefix the shell has made durable (``durable``): a restart starts from it,
        # so it never goes back. The accept window counts from it (see _on_accept).
        self._durable_through = chosen_up_to
        self._parked: dict[int, SlotValue] = {}  # re-proposals beyond the known configurations
        self._catch_up_retry_ms = 0
        # The highest chosen prefix a peer reported and who reported it (leader catch-up), and
        # when the leader gives up waiting for it (see _tick_leader).
        self._catch_up_target = 0
        self._catch_up_peer: str | None = None
        self._catch_up_deadline_ms = 0

        self._role = Role.FOLLOWER
        self._leader_id: str | None = None
        self._ballot: Ballot | None = None  # own ballot as candidate/leader
        self._election_deadline_ms = 0
        self._reset_election_deadline()

        self._promises: dict[str, Promise] = {}
        self._prepare_from = 0
        self._prepare_sent_ms = 0
        self._proposals: dict[int, _Proposal] = {}
        # Values waiting for a slot, each with the members that want to learn it.
        self._queue: deque[tuple[bytes, frozenset[str]]] = deque()
        self._next_slot = 0
        self._next_heartbeat_ms = 0
        self._own_vote_waits = settings.leader_vote_delay_ms > 0
        self._slots_since_own_vote = 0

    # ------------------------------------------------------------------ public view

    @property
    def role(self) -> Role:
        return self._role

    @property
    def is_leader(self) -> bool:
        return self._role is Role.LEADER

    @property
    def leader_id(self) -> str | None:
        return self._leader_id

    @property
    def chosen_up_to(self) -> int:
        return self._chosen_up_to

    @property
    def in_flight_slots(self) -> int:
        return len(self._proposals)

    @property
    def idle_leader(self) -> bool:
        """Leader with nothing proposed or queued and its whole chosen prefix delivered: the
        state the CMS validates a new batch against is exactly the tail of the log."""
        return (
            self._role is Role.LEADER
            and not self._proposals
            and not self._queue
            and self._next_slot == self._chosen_up_to + 1
        )

    def status(self) -> NodeStatus:
        return NodeStatus(
            node_id=self.node_id,
            role=self._role,
            leader_id=self._leader_id,
            ballot=self._ballot,
            promised=self._promised,
            chosen_up_to=self._chosen_up_to,
            in_flight_slots=len(self._proposals),
            pending_values=len(self._queue),
        )

    def take_ready(self) -> Ready:
        """The work left by the calls since the last one (see "The shell's side" above).
        Raises ReadyProtocolError when ``max_unadvanced_readies`` are taken and not advanced."""
        limit = self.settings.max_unadvanced_readies
        if len(self._unadvanced) >= limit:
            raise ReadyProtocolError(
                f"{self.node_id}: {len(self._unadvanced)} Readies taken and not advanced "
                f"(max_unadvanced_readies={limit}). A shell performs each Ready — sends its "
                "messages, makes persist_promise and persist_accepted durable, then sends "
                "messages_after_persist, applies chosen — and then calls advance(ready), in "
                f"the order taken. The oldest asks to {self._unadvanced[0].obligations()}"
            )
        if self._out.is_empty():
            return _EMPTY_READY
        ready = self._out.freeze()
        self._out = _Outbox()
        if ready.chosen:
            self._taken_through = ready.chosen[-1].slot
        self._unadvanced.append(ready)
        return ready

    def advance(self, ready: Ready) -> None:
        """The shell performed ``ready`` in full: its messages sent, its writes durable (and
        every earlier Ready's), its acceptor replies sent, its chosen slots applied (each told
        with ``applied``), its state transfer started. Readies are advanced in the order taken;
        an empty one asks nothing. Raises ReadyProtocolError when the shell breaks that."""
        if ready.is_empty():
            return
        if not self._unadvanced or ready is not self._unadvanced[0]:
            oldest = self._unadvanced[0].obligations() if self._unadvanced else None
            raise ReadyProtocolError(
                f"{self.node_id}: advance(ready) out of order: Readies are advanced in the "
                "order taken, each once; "
                + (f"the oldest not advanced asks to {oldest}" if oldest else "none is taken")
            )
        if ready.chosen and ready.chosen[-1].slot > self._applied_through:
            raise ReadyProtocolError(
                f"{self.node_id}: advance(ready) before its chosen slots are applied: it "
                f"delivered slots {ready.chosen[0].slot}..{ready.chosen[-1].slot}, applied "
                f"(told with applied) only through {self._applied_through}"
            )
        self._unadvanced.popleft()

    # ------------------------------------------------------------------ inputs

    def tick(self, now_ms: int) -> None:
        self._now_ms = max(self._now_ms, now_ms)
        if self._role is Role.LEADER:
            self._tick_leader()
        elif self._now_ms >= self._election_deadline_ms:
            if self.is_voter:
                self._start_election()
            else:  # a learner follows the log; only voters run for leader
                self._reset_election_deadline()
        elif self._role is Role.CANDIDATE:
            self._retransmit_prepare()

    def propose(self, values: Sequence[bytes], now_ms: int, learners: Iterable[str] = ()) -> None:
        """Queue values for the next free slots; raises NotLeader or Overloaded. ``learners``
        get every vote for the slots that carry these values (see "Learning")."""
        self._now_ms = max(self._now_ms, now_ms)
        if self._role is not Role.LEADER:
            raise NotLeader(self._leader_id)
        if len(self._queue) + len(values) > self.settings.max_pending_values:
            raise Overloaded(
                f"{len(self._queue)} values already pending "
                f"(limit {self.settings.max_pending_values}); retry later"
            )
        wanting = frozenset(learners) - {self.node_id}
        self._queue.extend((value, wanting) for value in values)
        self._fill_slots()

    def step(self, message: Message, now_ms: int) -> None:
        self._now_ms = max(self._now_ms, now_ms)
        handler = _HANDLERS.get(type(message))
        if handler is None:
            raise TypeError(f"not a Paxos message: {type(message).__name__}")
        if isinstance(message, _PROPOSER_MESSAGES) and self._refused_below_promise(message):
            return
        handler(self, message)

    def compact(self, up_to: int) -> None:
        """Forget slots up to ``up_to``: the shell has applied them durably."""
        assert up_to <= self._delivered_up_to, (up_to, self._delivered_up_to)
        if up_to <= self._compacted_up_to:
            return
        for slot in [s for s in self._log if s <= up_to]:
            del self._log[slot]
        self._compacted_up_to = up_to

    def install_state(self, up_to: int) -> None:
        """The shell copied a peer's state through slot ``up_to``."""
        if up_to <= self._chosen_up_to:
            return
        # Slots delivered and not yet taken would reach the shell after the state that holds
        # them: delivered twice, out of order. The shell takes every Ready before installing.
        assert not self._out.chosen, f"slots {self._out.chosen[0].slot}.. not taken before install"
        self.stats.state_transfers += 1
        for slot in [s for s in self._log if s <= up_to]:
            del self._log[slot]
        self._chosen_up_to = self._compacted_up_to = self._delivered_up_to = up_to
        self._taken_through = up_to
        self._catch_up_retry_ms = 0
        self._advance_chosen()  # the shell follows with ``applied`` for the installed state

    def durable(self, up_to: int) -> None:
        """The shell made its applied state durable through slot ``up_to`` (a restart would
        start from there or later)."""
        assert up_to <= self._applied_through, (up_to, self._applied_through)
        self._durable_through = max(self._durable_through, up_to)

    def applied(self, up_to: int, membership: Membership) -> None:
        """The shell applied every slot up to ``up_to``; ``membership`` has the configurations
        they made (see "Membership" above)."""
        self.membership = membership
        if up_to > self._applied_through:
            known_before = self._known_through
            self._applied_through = up_to
            # Votes for slots whose voters just became known, counted now.
            for s in range(max(known_before, self._chosen_up_to) + 1, self._known_through + 1):
                slot = self._log.get(s)
                if slot is not None and slot.votes and slot.chosen_value is None:
                    self._learn_from_votes(s, slot)
        if self._role is Role.FOLLOWER:
            return
        if not self.is_voter:
            self._become_follower()  # removed: another voter takes over after its timeout
            return
        if self._role is Role.CANDIDATE:
            return
        promised = set(self._promises)
        if not all(c.is_quorum(promised) for c in self.membership.spanning(self._prepare_from)):
            self._start_election()  # a configuration the promises do not cover: phase 1 again
            return
        self._send_parked()
        self._fill_slots()

    @property
    def is_voter(self) -> bool:
        """Whether this member votes on the next slot to be applied."""
        return self.node_id in self.membership.governing(self._applied_through + 1).voters

    @property
    def _known_through(self) -> int:
        """The last slot whose voters this member knows: it proposes nothing past it, and
        learns nothing past it from votes (a stale view could count the wrong voters)."""
        return self._applied_through + self.settings.max_in_flight_slots

    # ------------------------------------------------------------------ acceptor

    def _refused_below_promise(self, m: ProposerMessage) -> bool:
        """The one check of a proposer's ballot against the promise, made in ``step`` before
        any handler runs (as etcd's raft compares the term once in ``Step``): a ballot below
        it is refused with a Nack naming the promise, so the proposer steps down and campaigns
        above it. Either way its round is observed: this member's next ballot goes above it."""
        self._observe(m.ballot)
        if m.ballot >= self._promised:
            return False
        self._send(Nack(src=self.node_id, dst=m.src, ballot=m.ballot, promised=self._promised))
        return True

    def _on_prepare(self, m: Prepare) -> None:
        self._promise(m.ballot, m.src)
        if m.src != self.node_id:
            self._reset_election_deadline()
        accepted = tuple(
            AcceptedSlot(slot=s, ballot=slot.accepted_ballot, value=slot.accepted_value)
            for s, slot in sorted(self._log.items())
            if s >= m.from_slot
            and slot.accepted_ballot is not None
            and slot.accepted_value is not None
        )
        reply = Promise(
            src=self.node_id,
            dst=m.src,
            ballot=m.ballot,
            accepted=accepted,
            chosen_up_to=self._chosen_up_to,
        )
        self._send_acceptor_reply(reply)

    def _on_accept(self, m: Accept) -> None:
        self._promise(m.ballot, m.src)
        self._follow(m.src, m.ballot)
        if m.slot > self._durable_through + self.settings.accept_window_slots:
            # Too far ahead of what this member has durably applied (see accept_window_slots):
            # no vote, no record; it learns the leader's prefix and catches up first. Durably
            # applied, because that prefix never goes back, even across a crash that loses
            # what was applied but not yet written: so every record an acceptor holds is within
            # the window of the prefix it reports in any later Promise (chosen_up_to >= it),
            # which is what lets _merge_promises ignore records beyond.
            self._learn(m.ballot, m.chosen_up_to, m.src)
            return
        slot = self._log.get(m.slot)
        already_chosen = m.slot <= self._compacted_up_to or (
            slot is not None and slot.chosen_value is not None
        )
        if not already_chosen:
            # A leader proposes one value per slot per ballot, and promised <= m.ballot here,
            # so this never replaces an accept of a higher ballot.
            if slot is None:
                slot = self._log[m.slot] = _Slot()
            assert slot.accepted_ballot is None or slot.accepted_ballot <= m.ballot, (
                f"slot {m.slot} accepted in {slot.accepted_ballot}, replaced in {m.ballot}"
            )
            slot.accepted_ballot = m.ballot
            slot.accepted_value = m.value
            self._out.accepted[m.slot] = AcceptedSlot(slot=m.slot, ballot=m.ballot, value=m.value)
        # Learners get the vote first: each has a client waiting for this slot. A slot known
        # chosen is acknowledged without accepting (it may have come in a CatchUpReply, with
        # no Accept, so promised may be below the ballot that chose it). That vote can only
        # complete a quorum for the chosen value: this member has promised nothing above
        # m.ballot, nor has a proposer still leading m.ballot, so every higher ballot's promise
        # quorum meets a quorum of m.ballot in a member that really accepted there, and by the
        # usual Paxos induction every higher ballot proposed m.ballot's value.
        for recipient in (*(n for n in m.learners if n != m.src), m.src):
            self._send_acceptor_reply(
                Accepted(src=self.node_id, dst=recipient, ballot=m.ballot, slot=m.slot)
            )
        self._learn(m.ballot, m.chosen_up_to, m.src)
        if not already_chosen and slot is not None and slot.votes:
            self._learn_from_votes(m.slot, slot)  # votes that came before the Accept

    def _on_commit(self, m: Commit) -> None:
        self._follow(m.src, m.ballot)
        self._learn(m.ballot, m.chosen_up_to, m.src)

    def _promise(self, ballot: Ballot, src: str) -> None:
        # ``promised`` never decreases: ``step`` refused every ballot below it.
        assert ballot >= self._promised, f"promise would go back from {self._promised} to {ballot}"
        if ballot > self._promised:
            self._promised = ballot
            self._out.promise = ballot
            if src != self.node_id and self._role is not Role.FOLLOWER:
                self._become_follower()

    def _send_acceptor_reply(self, reply: Message) -> None:
        if BUG_REPLY_BEFORE_DURABLE in self.settings.planted_bugs:
            self._out.messages.append(reply)
        else:
            self._out.after_persist.append(reply)

    # ------------------------------------------------------------------ learner

    def _follow(self, leader_id: str, ballot: Ballot) -> None:
        if leader_id == self.node_id:
            return
        if self._role is not Role.FOLLOWER:
            self._become_follower()
        self._leader_id = leader_id
        self._reset_election_deadline()

    def _learn(self, ballot: Ballot, leader_chosen_up_to: int, src: str) -> None:
        if leader_chosen_up_to <= self._chosen_up_to:
            return
        # Walk forward from the chosen prefix only: a slot past a gap cannot be delivered
        # before the gap is filled, and catch-up brings both.
        s = self._chosen_up_to + 1
        while s <= leader_chosen_up_to:
            slot = self._log.get(s)
            if slot is None or (slot.chosen_value is None and slot.accepted_ballot != ballot):
                break
            if slot.chosen_value is None:
                slot.chosen_value = slot.accepted_value
            s += 1
        self._advance_chosen()
        if self._chosen_up_to < leader_chosen_up_to:
            self._request_catch_up(src)

    def _count_vote(self, m: Accepted) -> None:
        """A member other than the leader of ``m.ballot`` learns from the votes themselves.
        Votes for a slot it has no Accept for are dropped (it learns that slot from the
        leader's chosen prefix instead), which keeps this bounded by the log."""
        slot = self._log.get(m.slot)
        if m.slot <= self._chosen_up_to or slot is None or slot.chosen_value is not None:
            return
        if slot.votes_ballot != m.ballot:
            if slot.votes_ballot is not None and m.ballot < slot.votes_ballot:
                return
            slot.votes_ballot = m.ballot
            slot.votes = set()
        slot.votes.add(m.src)
        self._learn_from_votes(m.slot, slot)

    def _learn_from_votes(self, s: int, slot: _Slot) -> None:
        if slot.accepted_ballot != slot.votes_ballot or slot.accepted_value is None:
            return  # chosen, perhaps, but not with a value this member holds
        if s > self._known_through:
            return  # counted again once the slots before it are applied (``applied``)
        if self.membership.governing(s).is_quorum(slot.votes):
            slot.chosen_value = slot.accepted_value
            self._advance_chosen()

    def _advance_chosen(self) -> None:
        # ``chosen_up_to`` only grows: it never falls below what was delivered from it.
        assert self._delivered_up_to <= self._chosen_up_to, (
            f"chosen_up_to went back to {self._chosen_up_to}, below {self._delivered_up_to}"
        )
        while True:
            slot = self._log.get(self._chosen_up_to + 1)
            if slot is None or slot.chosen_value is None:
                break
            self._chosen_up_to += 1
        while self._delivered_up_to < self._chosen_up_to:
            self._delivered_up_to += 1
            self._deliver(self._delivered_up_to)
        if self._role is Role.LEADER:
            self._fill_slots()

    def _deliver(self, s: int) -> None:
        """Hand slot ``s`` to the shell in the next Ready: exactly once, in order."""
        last = self._out.chosen[-1].slot if self._out.chosen else self._taken_through
        assert s == last + 1, f"slot {s} delivered after slot {last}"
        self._out.chosen.append(ChosenSlot(slot=s, value=self._chosen_value(s)))

    def _chosen_value(self, s: int) -> SlotValue:
        """Every slot up to ``chosen_up_to`` has a chosen value, or was compacted."""
        slot = self._log.get(s)
        assert s > self._compacted_up_to and slot is not None and slot.chosen_value is not None, (
            f"slot {s} (chosen up to {self._chosen_up_to}, compacted up to "
            f"{self._compacted_up_to}) has no chosen value"
        )
        return slot.chosen_value

    def _request_catch_up(self, peer: str, *, force: bool = False) -> None:
        if peer == self.node_id or (not force and self._now_ms < self._catch_up_retry_ms):
            return
        self.stats.catch_up_requests += 1
        self._catch_up_retry_ms = self._now_ms + self.settings.retransmit_interval_ms
        self._send(CatchUpRequest(src=self.node_id, dst=peer, from_slot=self._chosen_up_to + 1))

    def _on_catch_up_request(self, m: CatchUpRequest) -> None:
        if m.from_slot <= self._compacted_up_to:
            reply = CatchUpReply(
                src=self.node_id,
                dst=m.src,
                chosen=(),
                chosen_up_to=self._chosen_up_to,
                compacted_up_to=self._compacted_up_to,
            )
        else:
            last = min(self._chosen_up_to, m.from_slot + self.settings.max_catch_up_slots - 1)
            chosen = []
            for s in range(m.from_slot, last + 1):
                chosen.append(ChosenSlot(slot=s, value=self._chosen_value(s)))
            reply = CatchUpReply(
                src=self.node_id,
                dst=m.src,
                chosen=tuple(chosen),
                chosen_up_to=self._chosen_up_to,
                compacted_up_to=0,
            )
        self._send(reply)

    def _on_catch_up_reply(self, m: CatchUpReply) -> None:
        leading = self._role is Role.LEADER
        if leading and m.src == self._catch_up_peer and m.chosen_up_to >= self._catch_up_target:
            # The peer still holds what it reported (pages, or its state to copy, will come):
            # the leader waits on for it (_tick_leader).
            self._catch_up_deadline_ms = self._now_ms + self.settings.election_timeout_ms
        if not m.chosen:
            if m.compacted_up_to > self._chosen_up_to:
                self._out.state_transfer = StateTransfer(peer=m.src, up_to=m.compacted_up_to)
            return
        # Values only where they extend the chosen prefix, delivered at once ("Learning"). Held
        # past a gap, a value was delivered once the gap filled, over what the group chose
        # there, and on a leader past the next slot it proposes, which it then never proposed
        # (the CMS proposes only from an idle leader): a forged reply naming a slot ahead of the
        # log stopped a CMS leader so. A leader takes none past the prefix its promises
        # reported; it learns the slots it proposes from their votes. A real reply starts at
        # the slot asked for, and a value past a gap comes again on the page asked for next. A
        # forged reply naming exactly the next slot, as a real one would, only authenticated
        # peers keep out (epochal.paxos.ballot).
        wanted = min(m.chosen_up_to, self._catch_up_target) if leading else m.chosen_up_to
        for record in m.chosen:
            if record.slot <= self._chosen_up_to:
                continue
            if record.slot != self._chosen_up_to + 1 or (leading and record.slot > wanted):
                break
            self._log.setdefault(record.slot, _Slot()).chosen_value = record.value
            self._advance_chosen()
        if self._chosen_up_to < wanted:
            # A page of an answer to our request: ask for the next one at once. Otherwise (a
            # leader's unasked value of one slot, past a gap here) ask at the usual pace, so
            # that each such value does not start a chain of requests of its own.
            paged = m.chosen[-1].slot < m.chosen_up_to
            self._request_catch_up(m.src, force=paged)

    # ------------------------------------------------------------------ candidate

    def _start_election(self) -> None:
        if self._max_round_seen >= MAX_ROUND:
            # Only a forged ballot gets here (one election adds one round: 2^62 of them would
            # take longer than anything runs); no higher ballot exists, so this member cannot
            # lead. It says so in its stats; the operator override recovers the group.
            self.stats.rounds_exhausted += 1
            self._reset_election_deadline()
            return
        self.stats.elections_started += 1
        self._drop_leader_state()
        self._role = Role.CANDIDATE
        self._leader_id = None
        self._ballot = Ballot(self._max_round_seen + 1, self.node_id)
        self._observe(self._ballot)
        self._promises = {}
        self._prepare_from = self._chosen_up_to + 1
        self._reset_election_deadline()
        self._send_prepare(self._voters_for_prepare())

    def _voters_for_prepare(self) -> frozenset[str]:
        voters: set[str] = set()
        for configuration in self.membership.spanning(self._prepare_from):
            voters |= configuration.voters
        return frozenset(voters)

    def _send_prepare(self, targets: Iterable[str]) -> None:
        assert self._ballot is not None
        self._prepare_sent_ms = self._now_ms
        for target in sorted(targets):
            self._send(
                Prepare(
                    src=self.node_id, dst=target, ballot=self._ballot, from_slot=self._prepare_from
                )
            )

    def _retransmit_prepare(self) -> None:
        if self._now_ms - self._prepare_sent_ms >= self.settings.retransmit_interval_ms:
            self._send_prepare(self._voters_for_prepare() - self._promises.keys())

    def _on_promise(self, m: Promise) -> None:
        self._observe(m.ballot)
        if self._role is not Role.CANDIDATE or m.ballot != self._ballot:
            return
        self._promises[m.src] = m
        promised = set(self._promises)
        if all(c.is_quorum(promised) for c in self.membership.spanning(self._prepare_from)):
            self._become_leader()

    def _on_nack(self, m: Nack) -> None:
        self._observe(m.promised)
        if self._role is not Role.FOLLOWER and m.ballot == self._ballot and m.promised > m.ballot:
            self._become_follower()

    # ------------------------------------------------------------------ leader

    def _become_leader(self) -> None:
        assert self._ballot is not None
        self._role = Role.LEADER
        self._leader_id = self.node_id
        self.stats.leader_changes += 1
        best, max_chosen, most_advanced = self._merge_promises()
        last_slot = max([max_chosen, *best])
        for s in range(max_chosen + 1, last_slot + 1):
            self._parked[s] = self._reproposal_value(best.get(s))
        self._send_parked()
        self._next_slot = last_slot + 1
        self._catch_up_target, self._catch_up_peer = max_chosen, most_advanced
        self._catch_up_deadline_ms = self._now_ms + self.settings.election_timeout_ms
        if self._chosen_up_to < max_chosen:
            self._request_catch_up(most_advanced, force=True)
        self._broadcast_commit()
        self._fill_slots()

    def _merge_promises(self) -> tuple[dict[int, AcceptedSlot], int, str]:
        """Highest-ballot accepted value per open slot, the highest chosen prefix reported,
        and who reported it."""
        max_chosen = self._chosen_up_to
        most_advanced = self.node_id
        for promise in self._promises.values():
            if promise.chosen_up_to > max_chosen:
                max_chosen, most_advanced = promise.chosen_up_to, promise.src
        best: dict[int, AcceptedSlot] = {}
        # A slot chosen past max_chosen + window would have been accepted by a quorum of
        # acceptors, each within the window of its applied prefix (_on_accept); one of them
        # promised here, reporting a prefix at least that applied one. So a record beyond is
        # no acceptor's (a forged one), and is ignored.
        horizon = max_chosen + self.settings.accept_window_slots
        for promise in self._promises.values():
            for record in promise.accepted:
                if record.slot <= max_chosen or record.slot > horizon:
                    continue
                current = best.get(record.slot)
                if current is None or record.ballot > current.ballot:
                    best[record.slot] = record
        return best, max_chosen, most_advanced

    def _reproposal_value(self, record: AcceptedSlot | None) -> SlotValue:
        if record is None or BUG_SKIP_REPROPOSAL in self.settings.planted_bugs:
            self.stats.noop_fills += 1
            return NOOP
        self.stats.reproposed_values += len(record.value)
        if not record.value:
            self.stats.noop_fills += 1
        return record.value

    def _send_parked(self) -> None:
        for slot in sorted(self._parked):
            if slot > self._known_through:
                break
            self._send_proposal(slot, self._parked.pop(slot))

    def _fill_slots(self) -> None:
        alpha = self.settings.max_in_flight_slots
        while (
            self._queue
            and not self._parked
            and len(self._proposals) < alpha
            and self._next_slot <= self._known_through
        ):
            batch, learners = self._take_batch()
            self.stats.values_proposed += len(batch)
            self._send_proposal(self._next_slot, batch, learners)
            self._next_slot += 1

    def _take_batch(self) -> tuple[SlotValue, frozenset[str]]:
        batch: list[bytes] = []
        learners: set[str] = set()
        size = 0
        while self._queue and len(batch) < self.settings.max_batch_values:
            value, wanting = self._queue[0]
            if batch and size + len(value) > self.settings.max_batch_bytes:
                break
            self._queue.popleft()
            batch.append(value)
            learners |= wanting
            size += len(value)
        return tuple(batch), frozenset(learners)

    def _send_proposal(
        self, slot: int, value: SlotValue, learners: frozenset[str] = frozenset()
    ) -> None:
        self.stats.slots_proposed += 1
        proposal = self._proposals[slot] = _Proposal(
            value=value, sent_ms=self._now_ms, learners=tuple(sorted(learners))
        )
        configuration = self.membership.governing(slot)
        voters = configuration.voters
        if self._own_vote_waits and self.node_id in voters:
            up_to = self.settings.leader_votes_small_slots_up_to
            if not 0 < len(value) <= up_to:  # a no-op fill goes to everyone
                proposal.left_out = frozenset({self.node_id})
            else:
                # A small slot (a quiet log): the leader votes at once, and only as many
                # followers as a quorum needs get the Accept, those waiting to learn it first.
                quorum = {self.node_id}
                for follower in sorted(voters - quorum, key=lambda v: (v not in learners, v)):
                    if configuration.is_quorum(quorum):
                        break
                    quorum.add(follower)
                proposal.left_out = voters - quorum
                if proposal.left_out:
                    self.stats.small_slots += 1
            if proposal.left_out:
                proposal.left_out_due_ms = self._now_ms + self.settings.leader_vote_delay_ms
        self._send_accepts(slot, voters - proposal.left_out)

    def _send_accepts(self, slot: int, targets: Iterable[str]) -> None:
        assert self._ballot is not None
        proposal = self._proposals[slot]
        # Learners last: a learner waits for the other voters' votes, which cross one more hop.
        for target in sorted(targets, key=lambda t: (t in proposal.learners, t)):
            self._send(
                Accept(
                    src=self.node_id,
                    dst=target,
                    ballot=self._ballot,
                    slot=slot,
                    value=proposal.value,
                    chosen_up_to=self._chosen_up_to,
                    learners=proposal.learners,
                )
            )

    def _on_accepted(self, m: Accepted) -> None:
        if self._role is not Role.LEADER or m.ballot != self._ballot:
            self._count_vote(m)
            return
        proposal = self._proposals.get(m.slot)
        if proposal is None:
            return
        proposal.acks.add(m.src)
        if not self.membership.governing(m.slot).is_quorum(proposal.acks):
            return
        del self._proposals[m.slot]
        self._after_choosing(proposal)
        if m.slot > self._compacted_up_to:
            slot = self._log.setdefault(m.slot, _Slot())
            if slot.chosen_value is None:
                slot.chosen_value = proposal.value
        self._advance_chosen()
        # Followers left out get the value of a slot they never saw.
        for voter in sorted(proposal.left_out - {self.node_id}):
            self._send(
                CatchUpReply(
                    src=self.node_id,
                    dst=voter,
                    chosen=(ChosenSlot(slot=m.slot, value=proposal.value),),
                    chosen_up_to=self._chosen_up_to,
                    compacted_up_to=0,
                )
            )

    def _after_choosing(self, proposal: _Proposal) -> None:
        """Lazy own votes (``leader_vote_delay_ms``): count slots since the leader last had
        to vote, and after ``OWN_VOTE_PROBE_SLOTS`` of them try letting the followers decide
        again — once they answer again that costs nothing; while they do not, one slot in that
        many waits the delay."""
        if self.settings.leader_vote_delay_ms <= 0 or self._own_vote_waits:
            return
        self._slots_since_own_vote += 1
        if self._slots_since_own_vote >= OWN_VOTE_PROBE_SLOTS:
            self._own_vote_waits = True

    def _send_left_out_if_due(self, slot: int, proposal: _Proposal) -> None:
        """The slot was not chosen in time without the voters left out: they get the Accept
        (the leader votes, or the rest of the followers hear of it), and every slot goes to
        everyone from now on, until the next probe."""
        due = proposal.left_out_due_ms
        if due is None or self._now_ms < due:
            return
        left_out, proposal.left_out = proposal.left_out, frozenset()
        proposal.left_out_due_ms = None
        if self.node_id in left_out:
            self.stats.own_votes_needed += 1
        else:
            self.stats.small_slot_fallbacks += 1
        self._own_vote_waits = False
        self._slots_since_own_vote = 0
        self._send_accepts(slot, left_out)

    def _tick_leader(self) -> None:
        # A slot's learners learn it from its votes; everyone else from the chosen prefix that
        # the next Accept or these heartbeats carry.
        if self._now_ms >= self._next_heartbeat_ms:
            self._broadcast_commit()
        if self._catch_up_peer is not None and self._chosen_up_to < self._catch_up_target:
            if self._now_ms >= self._catch_up_deadline_ms:
                # The peer no longer answers that it holds the prefix it reported: it is down,
                # lost applied slots it had not written, or never held them (a forged Promise).
                # Until the leader has them it proposes nothing, so it runs phase 1 again; the
                # new promises say what the members hold now, and their accepted values.
                self.stats.catch_up_elections += 1
                self._start_election()
                return
            # Nobody sends the leader heartbeats, so it retries its own catch-up.
            self._request_catch_up(self._catch_up_peer)
        for slot, proposal in sorted(self._proposals.items()):
            if self._now_ms - proposal.sent_ms >= self.settings.retransmit_interval_ms:
                proposal.sent_ms = self._now_ms
                missing = self.membership.governing(slot).voters - proposal.acks
                self._send_accepts(slot, missing - proposal.left_out)  # theirs come when due
            self._send_left_out_if_due(slot, proposal)

    def _broadcast_commit(self) -> None:
        assert self._ballot is not None
        self._next_heartbeat_ms = self._now_ms + self.settings.heartbeat_interval_ms
        for target in sorted(self.membership.everyone(self._chosen_up_to + 1) - {self.node_id}):
            self._send(
                Commit(
                    src=self.node_id,
                    dst=target,
                    ballot=self._ballot,
                    chosen_up_to=self._chosen_up_to,
                )
            )

    # ------------------------------------------------------------------ helpers

    def _become_follower(self) -> None:
        self._drop_leader_state()
        self._role = Role.FOLLOWER
        self._ballot = None
        self._leader_id = None
        self._reset_election_deadline()

    def _drop_leader_state(self) -> None:
        self._out.dropped.extend(value for value, _ in self._queue)
        self._queue.clear()
        self._proposals.clear()
        self._parked.clear()
        self._promises = {}

    def _observe(self, ballot: Ballot) -> None:
        self._max_round_seen = max(self._max_round_seen, ballot.round)

    def _reset_election_deadline(self) -> None:
        timeout = self.settings.election_timeout_ms
        self._election_deadline_ms = self._now_ms + timeout + int(timeout * self._random_fraction())

    def _send(self, message: Message) -> None:
        self._out.messages.append(message)


_HANDLERS: dict[type, Callable[[PaxosNode, Message], None]] = {
    Prepare: PaxosNode._on_prepare,  # type: ignore[dict-item]
    Promise: PaxosNode._on_promise,  # type: ignore[dict-item]
    Nack: PaxosNode._on_nack,  # type: ignore[dict-item]
    Accept: PaxosNode._on_accept,  # type: ignore[dict-item]
    Accepted: PaxosNode._on_accepted,  # type: ignore[dict-item]
    Commit: PaxosNode._on_commit,  # type: ignore[dict-item]
    CatchUpRequest: PaxosNode._on_catch_up_request,  # type: ignore[dict-item]
    CatchUpReply: PaxosNode._on_catch_up_reply,  # type: ignore[dict-item]
}
