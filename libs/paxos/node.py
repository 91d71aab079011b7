"""A multi-Paxos member with no I/O: ``PaxosNode``, the facade over its parts.

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

The parts: ``PaxosNode`` is one object built from a class per duty, each in its own module with
its part of this theory: ``acceptor`` (promises and accepts, the durable state behind them, and
their replies), ``learner`` (votes counted, chosen slots found and delivered, commits),
``catch_up`` (chosen values copied from a peer, or its state), ``leader`` (the election and
phase 1 as candidate, phase 2 as leader); ``state`` holds what they share.

Roles are follower, candidate and leader; ``roles`` has the table of legal changes between them.
As etcd's raft ``becomeLeader`` installs ``stepLeader``, a role change (``_change_role``, asserted
legal) installs the role's handlers (``ROLE_HANDLERS``): ``step`` finds a message's handler in
the installed role's table and ``tick`` and ``applied`` call the installed role's, so none of
them tests the role. A proposer's ballot is compared with the promise once, in ``step`` before
dispatch (``_refused_below_promise``).

Membership: the shell applies chosen slots and tells the core with ``applied(up_to,
membership)``; a configuration a slot s makes governs from s + α, so a member knows the voters
of every slot up to applied + α. A leader proposes nothing beyond that (``leader``), and nobody
learns a slot beyond it from votes (``learner``); a member that does not vote never campaigns.

Invariants kept here, each asserted where it could break (a broken one is a bug: it crashes):
``promised`` never decreases (``acceptor._promise``; ``step`` refuses every ballot below it,
with a Nack, before any handler runs); a slot accepted in ballot b is only replaced by an accept
in a ballot >= b (``acceptor._on_accept``); ``chosen_up_to`` only grows
(``learner._advance_chosen``) and every slot up to it has a chosen value or was compacted
(``learner._chosen_value``, wherever one is read); chosen slots are delivered exactly once, in
order (``learner._deliver``, ``install_state``); a role changes only as ``roles`` allows
(``_change_role``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from epochal.paxos.acceptor import PROPOSER_MESSAGES, Acceptor
from epochal.paxos.ballot import ZERO_BALLOT, Ballot
from epochal.paxos.catch_up import CatchUp
from epochal.paxos.errors import NotLeader, Overloaded, ReadyProtocolError
from epochal.paxos.leader import Leader
from epochal.paxos.learner import Learner
from epochal.paxos.membership import Membership
from epochal.paxos.messages import (
    Accept,
    Accepted,
    AcceptedSlot,
    CatchUpReply,
    CatchUpRequest,
    Commit,
    Message,
    Nack,
    Prepare,
    Promise,
)
from epochal.paxos.ready import Ready
from epochal.paxos.roles import Role, check_role_change
from epochal.paxos.settings import PaxosSettings
from epochal.paxos.state import EMPTY_READY, Outbox, Stats

# A message's handler in a role's table: called with the member and the message.
StepHandler = Callable[["PaxosNode", Any], None]


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


class PaxosNode(Acceptor, Learner, CatchUp, Leader):
    """One member: acceptor, learner, and proposer when leader. Not thread-safe."""

    # The installed role's handlers (see ``_change_role``).
    _step_handlers: Mapping[type[Message], StepHandler]
    _tick_role: Callable[[PaxosNode], None]
    _applied_role: Callable[[PaxosNode], None]

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
        self._out = Outbox()
        self._init_acceptor(promised, accepted, chosen_up_to)
        self._init_learner(chosen_up_to)
        # Readies taken and not yet advanced by the shell, oldest first.
        self._unadvanced: deque[Ready] = deque()
        self._init_catch_up()

        self._install_role(Role.FOLLOWER)
        self._leader_id = None
        self._ballot = None
        self._election_deadline_ms = 0
        self._reset_election_deadline()
        self._init_leader()

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
            return EMPTY_READY
        ready = self._out.freeze()
        self._out = Outbox()
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
        self._tick_role(self)

    def propose(self, values: Sequence[bytes], now_ms: int, learners: Iterable[str] = ()) -> None:
        """Queue values for the next free slots; raises NotLeader or Overloaded. ``learners``
        get every vote for the slots that carry these values (see "Learning" in ``learner``)."""
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
        handler = self._step_handlers.get(type(message))  # the installed role's
        if handler is None:
            raise TypeError(f"not a Paxos message: {type(message).__name__}")
        if isinstance(message, PROPOSER_MESSAGES) and self._refused_below_promise(message):
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
        self._learn_applied(up_to)
        self._applied_role(self)

    # ------------------------------------------------------------------ roles

    def _change_role(self, role: Role) -> None:
        """Every role change: asserted legal (``roles``), then the role's handlers installed."""
        check_role_change(self._role, role)
        self._install_role(role)

    def _install_role(self, role: Role) -> None:
        handlers = ROLE_HANDLERS[role]
        self._role = role
        self._step_handlers = handlers.step
        self._tick_role = handlers.tick
        self._applied_role = handlers.applied

    def _become_follower(self) -> None:
        self._drop_leader_state()
        self._change_role(Role.FOLLOWER)
        self._ballot = None
        self._leader_id = None
        self._reset_election_deadline()

    def _applied_as_follower(self) -> None:
        """A follower proposes nothing and runs no phase 1: slots applied change nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleHandlers:
    """What a role installs: the handler of each message kind (``step`` calls it once the
    promise check passed), its ``tick``, and what it does once slots are ``applied``."""

    step: Mapping[type[Message], StepHandler]
    tick: Callable[[PaxosNode], None]
    applied: Callable[[PaxosNode], None]


# Every member is an acceptor, a learner and a catch-up peer, whatever its role.
_EVERY_ROLE_STEP: Mapping[type[Message], StepHandler] = {
    Prepare: PaxosNode._on_prepare,
    Accept: PaxosNode._on_accept,
    Commit: PaxosNode._on_commit,
    CatchUpRequest: PaxosNode._on_catch_up_request,
}

ROLE_HANDLERS: Mapping[Role, RoleHandlers] = {
    Role.FOLLOWER: RoleHandlers(
        step={
            **_EVERY_ROLE_STEP,
            Promise: PaxosNode._ignore_promise,
            Nack: PaxosNode._ignore_nack,
            Accepted: PaxosNode._count_vote,
            CatchUpReply: PaxosNode._on_catch_up_reply,
        },
        tick=PaxosNode._tick_follower,
        applied=PaxosNode._applied_as_follower,
    ),
    Role.CANDIDATE: RoleHandlers(
        step={
            **_EVERY_ROLE_STEP,
            Promise: PaxosNode._on_promise,
            Nack: PaxosNode._on_nack,
            Accepted: PaxosNode._count_vote,
            CatchUpReply: PaxosNode._on_catch_up_reply,
        },
        tick=PaxosNode._tick_candidate,
        applied=PaxosNode._applied_as_candidate,
    ),
    Role.LEADER: RoleHandlers(
        step={
            **_EVERY_ROLE_STEP,
            Promise: PaxosNode._ignore_promise,
            Nack: PaxosNode._on_nack,
            Accepted: PaxosNode._on_accepted,
            CatchUpReply: PaxosNode._on_catch_up_reply_as_leader,
        },
        tick=PaxosNode._tick_leader,
        applied=PaxosNode._applied_as_leader,
    ),
}
