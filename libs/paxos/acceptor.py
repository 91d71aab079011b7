"""The acceptor: promises and accepts, the durable state behind them, and its replies.

Theory of operation
-------------------
An acceptor's durable state is its promise and the slots it accepted, each with a ballot and a
value (``Slot.accepted_*``), restored by the constructor after a restart. A new promise goes to
``Ready.persist_promise`` and an accept to ``persist_accepted``; the replies that depend on them
(Promise, Accepted) go to ``messages_after_persist``, which the shell sends only once those
writes are durable: a vote counts only once it is durable, so a quorum of durable accepts is the
commit point. (The planted bug ``BUG_REPLY_BEFORE_DURABLE`` sends them at once, for the
simulator to catch.)

A proposer's ballot (Prepare, Accept, Commit) is compared with the promise once, in
``PaxosNode.step`` before any handler runs (``_refused_below_promise``, as etcd's raft compares
the term once in ``Step``): below it gets a Nack. So a handler here only sees a ballot at or
above the promise: ``promised`` never decreases (``_promise``), and a slot accepted in ballot b
is only replaced by an accept in a ballot >= b (``_on_accept``). A higher ballot from another
member makes a candidate or a leader a follower.

An acceptor neither stores nor votes for a slot more than ``accept_window_slots`` past its
durably applied prefix (see ``_on_accept``): a forged Accept or Promise naming a slot far out
cannot make it allocate without bound.
"""

from __future__ import annotations

from collections.abc import Iterable

from epochal.paxos.ballot import Ballot
from epochal.paxos.messages import (
    Accept,
    Accepted,
    AcceptedSlot,
    Commit,
    Message,
    Nack,
    Prepare,
    Promise,
)
from epochal.paxos.roles import Role
from epochal.paxos.settings import BUG_REPLY_BEFORE_DURABLE
from epochal.paxos.state import MemberState, Slot

# What a proposer sends under its ballot: each is refused below the promise, in ``step``. The
# other messages with a ballot are replies naming the receiver's own (Promise, Accepted, Nack).
ProposerMessage = Prepare | Accept | Commit
PROPOSER_MESSAGES = (Prepare, Accept, Commit)


class Acceptor(MemberState):
    _promised: Ballot

    def _init_acceptor(
        self, promised: Ballot, accepted: Iterable[AcceptedSlot], chosen_up_to: int
    ) -> None:
        self._promised = promised
        self._max_round_seen = promised.round
        self._log = {}
        for record in accepted:
            if record.slot > chosen_up_to:
                self._log[record.slot] = Slot(record.ballot, record.value)

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
                slot = self._log[m.slot] = Slot()
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
