"""The learner: votes counted, slots found chosen, chosen slots delivered in order, commits.

Theory of operation
-------------------
Learning: an acceptor sends its ``Accepted`` vote to the leader and to the slot's *learners* —
members the proposer named because they wait to answer a value in the slot (a follower that
forwarded a commit). A member learns a slot is chosen as soon as it has seen a quorum of votes
for the ballot in which it accepted the slot itself (a leader proposes one value per slot per
ballot, so that ballot names the value): a learner about when the leader does, without waiting
for the leader to tell it. ``Accept`` and ``Commit`` (the heartbeat) also carry the leader's
chosen prefix, for everyone else; a follower marks those slots chosen when it accepted them in
the same ballot and otherwise asks the sender for the chosen values (catch-up: ``catch_up``).

Nobody learns a slot past applied + α from votes (``_known_through``): a member that missed a
reconfiguration would count them against the wrong voters. It learns such a slot from the
leader's chosen prefix, or from the votes once it has applied the slots before (``applied``
counts them again then).

``chosen_up_to`` only grows (``_advance_chosen``) and every slot up to it has a chosen value or
was compacted (``_chosen_value``, wherever one is read); the chosen slots are handed to the
shell in ``Ready.chosen`` exactly once, in order (``_deliver``).
"""

from __future__ import annotations

from epochal.paxos.ballot import Ballot
from epochal.paxos.messages import Accepted, ChosenSlot, Commit, SlotValue
from epochal.paxos.roles import Role
from epochal.paxos.state import MemberState, Slot


class Learner(MemberState):
    _delivered_up_to: int
    # The last chosen slot handed to the shell in a Ready taken, or installed: the next
    # slot delivered must be the one after it (delivered exactly once, in order).
    _taken_through: int

    def _init_learner(self, chosen_up_to: int) -> None:
        self._chosen_up_to = chosen_up_to
        self._compacted_up_to = chosen_up_to
        self._delivered_up_to = chosen_up_to
        self._taken_through = chosen_up_to
        self._applied_through = chosen_up_to
        self._durable_through = chosen_up_to

    def _on_commit(self, m: Commit) -> None:
        self._follow(m.src, m.ballot)
        self._learn(m.ballot, m.chosen_up_to, m.src)

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

    def _learn_from_votes(self, s: int, slot: Slot) -> None:
        if slot.accepted_ballot != slot.votes_ballot or slot.accepted_value is None:
            return  # chosen, perhaps, but not with a value this member holds
        if s > self._known_through:
            return  # counted again once the slots before it are applied (``applied``)
        if self.membership.governing(s).is_quorum(slot.votes):
            slot.chosen_value = slot.accepted_value
            self._advance_chosen()

    def _learn_applied(self, up_to: int) -> None:
        """The shell applied every slot up to ``up_to`` (``applied``): the voters of α more
        slots are known, and the votes already held for them are counted now."""
        if up_to <= self._applied_through:
            return
        known_before = self._known_through
        self._applied_through = up_to
        for s in range(max(known_before, self._chosen_up_to) + 1, self._known_through + 1):
            slot = self._log.get(s)
            if slot is not None and slot.votes and slot.chosen_value is None:
                self._learn_from_votes(s, slot)

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
            self._fill_slots()  # slots chosen free room for the next proposals

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
