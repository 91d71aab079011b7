"""What the parts of a member share: the log, the Ready being built, the counters, the clock
reading and the role, the helpers every part uses, and what the parts ask of each other.

``PaxosNode`` (``node``) is one object built from a class per part (``acceptor``, ``learner``,
``catch_up``, ``leader``), each over ``MemberState``: a handler reaches any state with one
attribute lookup, as when the member was one class. A part calls another only through the
methods declared at the end of ``MemberState`` (for the type checker; the parts define them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochal.paxos.ballot import Ballot
from epochal.paxos.membership import Membership
from epochal.paxos.messages import AcceptedSlot, ChosenSlot, Message, SlotValue
from epochal.paxos.ready import Ready, StateTransfer
from epochal.paxos.roles import Role
from epochal.paxos.settings import PaxosSettings

if TYPE_CHECKING:
    from epochal.paxos.messages import Accepted


@dataclass(slots=True)
class Slot:
    accepted_ballot: Ballot | None = None
    accepted_value: SlotValue | None = None
    chosen_value: SlotValue | None = None
    # Learning from votes: the voters seen to accept this slot in ``votes_ballot``.
    votes_ballot: Ballot | None = None
    votes: set[str] = field(default_factory=set)


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


EMPTY_READY = Ready()


class Outbox:
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
            return EMPTY_READY
        return Ready(
            messages=tuple(self.messages),
            persist_promise=self.promise,
            persist_accepted=tuple(self.accepted[s] for s in sorted(self.accepted)),
            messages_after_persist=tuple(self.after_persist),
            chosen=tuple(self.chosen),
            dropped_values=tuple(self.dropped),
            state_transfer=self.state_transfer,
        )


class MemberState:
    """The state more than one part reads or writes (each part declares its own besides)."""

    node_id: str
    membership: Membership
    settings: PaxosSettings
    stats: Stats
    _random_fraction: Callable[[], float]
    _now_ms: int
    _out: Outbox  # the Ready being built

    _role: Role  # changed only by ``PaxosNode._change_role``, which installs its handlers
    _leader_id: str | None
    _ballot: Ballot | None  # own ballot as candidate/leader
    _election_deadline_ms: int
    _max_round_seen: int  # this member's next ballot goes above it

    _log: dict[int, Slot]
    _chosen_up_to: int
    _compacted_up_to: int
    # Every slot up to here is applied by the shell and ``membership`` holds the
    # configurations those slots made: voters are known through _applied_through + α.
    _applied_through: int
    # The applied prefix the shell has made durable (``durable``): a restart starts from it,
    # so it never goes back. The accept window counts from it (see _on_accept).
    _durable_through: int

    # The highest chosen prefix a peer reported and who reported it (leader catch-up), and
    # when the leader gives up waiting for it (see _tick_leader).
    _catch_up_target: int
    _catch_up_peer: str | None
    _catch_up_deadline_ms: int

    @property
    def is_voter(self) -> bool:
        """Whether this member votes on the next slot to be applied."""
        return self.node_id in self.membership.governing(self._applied_through + 1).voters

    @property
    def _known_through(self) -> int:
        """The last slot whose voters this member knows: it proposes nothing past it, and
        learns nothing past it from votes (a stale view could count the wrong voters)."""
        return self._applied_through + self.settings.max_in_flight_slots

    def _observe(self, ballot: Ballot) -> None:
        self._max_round_seen = max(self._max_round_seen, ballot.round)

    def _reset_election_deadline(self) -> None:
        timeout = self.settings.election_timeout_ms
        self._election_deadline_ms = self._now_ms + timeout + int(timeout * self._random_fraction())

    def _send(self, message: Message) -> None:
        self._out.messages.append(message)

    if TYPE_CHECKING:
        # What the parts ask of each other, defined in node:
        def _change_role(self, role: Role) -> None: ...
        def _become_follower(self) -> None: ...

        # in learner:
        def _follow(self, leader_id: str, ballot: Ballot) -> None: ...
        def _learn(self, ballot: Ballot, leader_chosen_up_to: int, src: str) -> None: ...
        def _count_vote(self, m: Accepted) -> None: ...
        def _learn_from_votes(self, s: int, slot: Slot) -> None: ...
        def _advance_chosen(self) -> None: ...
        def _chosen_value(self, s: int) -> SlotValue: ...

        # in catch_up:
        def _request_catch_up(self, peer: str, *, force: bool = False) -> None: ...

        # in leader:
        def _fill_slots(self) -> None: ...
