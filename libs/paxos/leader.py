"""The proposer: election and phase 1 as candidate, phase 2 as leader.

Theory of operation
-------------------
A candidate picks a ballot above every round it has seen and runs phase 1 once for every slot
after its chosen prefix; with promises from a quorum of every configuration governing that span
it becomes leader, re-proposes the highest-ballot value it learned for each open slot (a no-op
where none was accepted), then runs phase 2 per slot. At most ``max_in_flight_slots`` (α) slots
are proposed and not chosen; values queue and are batched into the next free slot. Any higher
ballot makes a candidate or leader a follower. A leader whose promises report a chosen prefix
beyond its own copies it from the member that reported it before it proposes; when that member
stops answering that it holds it for an election timeout (it is down, lost applied slots it had
not written, or the promise was forged), the leader runs phase 1 again rather than wait for good.

A leader knows the voters of every slot up to applied + α and proposes nothing beyond that — a
re-proposal found in phase 1 past it waits (parked) until the slots before it are applied, and
new values wait too. When a newly known configuration is not covered by the leader's promises it
runs phase 1 again; when it no longer votes it steps down; a member that does not vote never
campaigns. So a leader that was elected on a stale view (its promises show chosen slots it has
not applied) learns them before it proposes under configurations it does not know.

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

The handlers here are installed with the role (``node``, ``ROLE_HANDLERS``): a follower's and a
candidate's tick run the election timer, a leader's the heartbeats and retransmissions; only a
candidate takes a Promise, and only a leader counts a vote toward its own proposal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from epochal.paxos.ballot import MAX_ROUND, Ballot
from epochal.paxos.messages import (
    NOOP,
    Accept,
    Accepted,
    AcceptedSlot,
    CatchUpReply,
    ChosenSlot,
    Commit,
    Nack,
    Prepare,
    Promise,
    SlotValue,
)
from epochal.paxos.roles import Role
from epochal.paxos.settings import BUG_SKIP_REPROPOSAL
from epochal.paxos.state import MemberState, Slot

# With lazy own votes, how many slots the leader votes at once after it had to (see
# _after_choosing) before it lets the followers decide again.
OWN_VOTE_PROBE_SLOTS = 64


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


class Leader(MemberState):
    _parked: dict[int, SlotValue]  # re-proposals beyond the known configurations
    _promises: dict[str, Promise]
    _prepare_from: int
    _prepare_sent_ms: int
    _proposals: dict[int, _Proposal]
    # Values waiting for a slot, each with the members that want to learn it.
    _queue: deque[tuple[bytes, frozenset[str]]]
    _next_slot: int
    _next_heartbeat_ms: int
    _own_vote_waits: bool
    _slots_since_own_vote: int

    def _init_leader(self) -> None:
        self._parked = {}
        self._promises = {}
        self._prepare_from = 0
        self._prepare_sent_ms = 0
        self._proposals = {}
        self._queue = deque()
        self._next_slot = 0
        self._next_heartbeat_ms = 0
        self._own_vote_waits = self.settings.leader_vote_delay_ms > 0
        self._slots_since_own_vote = 0

    # ------------------------------------------------------------------ election (phase 1)

    def _tick_follower(self) -> None:
        if self._now_ms >= self._election_deadline_ms:
            self._on_election_timeout()

    def _tick_candidate(self) -> None:
        if self._now_ms >= self._election_deadline_ms:
            self._on_election_timeout()
        else:
            self._retransmit_prepare()

    def _on_election_timeout(self) -> None:
        if self.is_voter:
            self._start_election()
        else:  # a learner follows the log; only voters run for leader
            self._reset_election_deadline()

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
        self._change_role(Role.CANDIDATE)
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
        """A candidate's handler."""
        self._observe(m.ballot)
        if m.ballot != self._ballot:
            return
        self._promises[m.src] = m
        promised = set(self._promises)
        if all(c.is_quorum(promised) for c in self.membership.spanning(self._prepare_from)):
            self._become_leader()

    def _ignore_promise(self, m: Promise) -> None:
        """A follower's and a leader's handler: no campaign waits for it; its round is seen."""
        self._observe(m.ballot)

    def _on_nack(self, m: Nack) -> None:
        """A candidate's and a leader's handler: its own ballot refused, it steps down."""
        self._observe(m.promised)
        if m.ballot == self._ballot and m.promised > m.ballot:
            self._become_follower()

    def _ignore_nack(self, m: Nack) -> None:
        """A follower's handler: it has no ballot to step down from; the round is seen."""
        self._observe(m.promised)

    def _applied_as_candidate(self) -> None:
        if not self.is_voter:
            self._become_follower()  # removed: another voter takes over after its timeout

    # ------------------------------------------------------------------ leader (phase 2)

    def _become_leader(self) -> None:
        assert self._ballot is not None
        self._change_role(Role.LEADER)
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
        """A leader's handler (a follower or a candidate only counts votes, ``_count_vote``)."""
        if m.ballot != self._ballot:
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
            slot = self._log.setdefault(m.slot, Slot())
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

    def _applied_as_leader(self) -> None:
        if not self.is_voter:
            self._become_follower()  # removed: another voter takes over after its timeout
            return
        promised = set(self._promises)
        if not all(c.is_quorum(promised) for c in self.membership.spanning(self._prepare_from)):
            self._start_election()  # a configuration the promises do not cover: phase 1 again
            return
        self._send_parked()
        self._fill_slots()

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

    def _drop_leader_state(self) -> None:
        self._out.dropped.extend(value for value, _ in self._queue)
        self._queue.clear()
        self._proposals.clear()
        self._parked.clear()
        self._promises = {}
