"""Claims of multi-Paxos, each shown on the pure core with a hand-driven network."""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

import pytest

from epochal.paxos import (
    NOOP,
    Accept,
    Accepted,
    AcceptedSlot,
    Ballot,
    Configuration,
    Membership,
    Message,
    NotLeader,
    Overloaded,
    PaxosNode,
    PaxosSettings,
    Prepare,
    Promise,
    Ready,
    Role,
    StateTransfer,
)
from epochal.paxos.ballot import MAX_ROUND
from epochal.paxos.messages import MAX_SLOT, CatchUpReply, CatchUpRequest, ChosenSlot
from epochal.wire.paxos import ballot_from_proto, message_from_proto
from epochal.wire.v1 import paxos_pb2

SETTINGS = PaxosSettings(
    max_in_flight_slots=2,
    max_batch_values=3,
    max_pending_values=8,
    heartbeat_interval_ms=10,
    election_timeout_ms=100,
    retransmit_interval_ms=20,
    max_unadvanced_readies=1,  # these shells perform each Ready before taking the next
)


def take(node: PaxosNode) -> Ready:
    """Take a Ready and acknowledge it: the test is the shell, and does with it what it says."""
    ready = node.take_ready()
    node.advance(ready)
    return ready


@dataclass
class Net:
    """Delivers messages in FIFO order; persists are instant; `down` members get nothing."""

    ids: tuple[str, ...] = ("a", "b", "c")
    settings: PaxosSettings = SETTINGS
    now: int = 0
    nodes: dict[str, PaxosNode] = field(default_factory=dict)
    queue: deque[Message] = field(default_factory=deque)
    applied: dict[str, list[tuple[int, tuple[bytes, ...]]]] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    transfers: dict[str, StateTransfer] = field(default_factory=dict)
    auto_apply: bool = True  # the shell applies what is chosen at once and tells the core
    applied_through: dict[str, int] = field(default_factory=dict)
    unadvanced: dict[str, deque[Ready]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        membership = Membership.initial(frozenset(self.ids))
        for node_id in self.ids:
            self.nodes[node_id] = PaxosNode(node_id, membership, self.settings, lambda: 0.0, 0)
            self.applied[node_id] = []
            self.applied_through[node_id] = 0
            self.unadvanced[node_id] = deque()

    def pump(self, node_id: str) -> None:
        ready = self.nodes[node_id].take_ready()
        self.unadvanced[node_id].append(ready)
        self.queue.extend(ready.messages)
        self.queue.extend(ready.messages_after_persist)
        self.applied[node_id].extend((c.slot, c.value) for c in ready.chosen)
        if ready.chosen and self.auto_apply:  # applied: the core knows the voters past them
            self.apply(node_id, ready.chosen[-1].slot)
        if ready.state_transfer is not None:
            self.transfers[node_id] = ready.state_transfer
        self.advance(node_id)

    def apply(self, node_id: str, up_to: int) -> None:
        node = self.nodes[node_id]
        node.applied(up_to, node.membership)
        self.applied_through[node_id] = up_to
        self.advance(node_id)

    def advance(self, node_id: str) -> None:
        """Acknowledge, in the order taken, every Ready performed: its chosen slots applied."""
        taken = self.unadvanced[node_id]
        while taken and (
            not taken[0].chosen or taken[0].chosen[-1].slot <= self.applied_through[node_id]
        ):
            self.nodes[node_id].advance(taken.popleft())

    def run(self, max_steps: int = 10_000) -> None:
        for node_id in self.ids:
            self.pump(node_id)
        for _ in range(max_steps):
            if not self.queue:
                return
            message = self.queue.popleft()
            if message.dst in self.down:
                continue
            self.nodes[message.dst].step(message, self.now)
            self.pump(message.dst)
        raise AssertionError("network did not settle")

    def elect(self, node_id: str) -> None:
        self.now += 1_000
        self.nodes[node_id].tick(self.now)
        self.run()
        assert self.nodes[node_id].is_leader


def test_a_leader_commits_and_every_member_learns() -> None:
    net = Net()
    net.elect("a")
    net.nodes["a"].propose([b"x"], net.now)
    net.run()
    net.now += 20
    net.nodes["a"].tick(net.now)  # heartbeat carries the commit to followers
    net.run()
    for node_id in net.ids:
        assert net.applied[node_id] == [(1, (b"x",))]


def test_values_are_batched_into_slots_with_bounded_in_flight() -> None:
    net = Net()
    net.elect("a")
    net.down = {"b", "c"}  # nothing gets chosen: slots stay in flight
    net.nodes["a"].propose([b"1", b"2", b"3", b"4", b"5", b"6", b"7"], net.now)
    net.run()
    status = net.nodes["a"].status()
    assert status.in_flight_slots == 2  # alpha
    assert status.pending_values == 1  # 7 values, 3 per slot, 2 slots in flight
    with pytest.raises(Overloaded):
        net.nodes["a"].propose([b"x"] * 8, net.now)
    net.down = set()
    net.now += 20
    net.nodes["a"].tick(net.now)  # retransmits the Accepts
    net.run()
    assert [v for _, v in net.applied["a"]] == [(b"1", b"2", b"3"), (b"4", b"5", b"6"), (b"7",)]


def test_a_follower_refuses_proposals_and_names_the_leader() -> None:
    net = Net()
    net.elect("a")
    with pytest.raises(NotLeader) as error:
        net.nodes["b"].propose([b"x"], net.now)
    assert error.value.leader_id == "a"


def test_a_value_accepted_by_one_survivor_is_reproposed_by_the_next_leader() -> None:
    net = Net()
    net.elect("a")
    # a's Accept reaches b only; a dies before anything is chosen.
    net.nodes["a"].propose([b"kept"], net.now)
    for message in list(take(net.nodes["a"]).messages):
        if isinstance(message, Accept) and message.dst == "b":
            net.nodes["b"].step(message, net.now)
    take(net.nodes["b"])
    net.down = {"a"}
    net.elect("b")
    assert net.nodes["b"].stats.reproposed_values == 1
    assert net.applied["b"][0] == (1, (b"kept",))
    assert net.applied["c"] == [] or net.applied["c"][0] == (1, (b"kept",))


def test_a_hole_below_an_accepted_slot_is_filled_with_a_noop() -> None:
    net = Net()
    c = net.nodes["c"]
    # c accepted slot 2 from an earlier leader; nobody has slot 1.
    c.step(
        Accept(src="a", dst="c", ballot=Ballot(1, "a"), slot=2, value=(b"v2",), chosen_up_to=0),
        net.now,
    )
    take(c)
    net.down = {"a"}
    net.elect("b")
    assert net.applied["b"] == [(1, NOOP), (2, (b"v2",))]
    assert net.nodes["b"].stats.noop_fills == 1


def test_a_higher_ballot_makes_the_leader_step_down() -> None:
    net = Net()
    net.elect("a")
    net.nodes["a"].step(Prepare(src="b", dst="a", ballot=Ballot(9, "b"), from_slot=1), net.now)
    assert net.nodes["a"].role is Role.FOLLOWER


def test_a_restarted_acceptor_keeps_its_promise_and_accepts() -> None:
    membership = Membership.initial(frozenset({"a", "b", "c"}))
    node = PaxosNode(
        "c",
        membership,
        SETTINGS,
        lambda: 0.0,
        0,
        promised=Ballot(5, "b"),
        accepted=[AcceptedSlot(slot=3, ballot=Ballot(5, "b"), value=(b"v",))],
        chosen_up_to=2,
    )
    node.step(Prepare(src="a", dst="c", ballot=Ballot(4, "a"), from_slot=3), 0)
    ready = take(node)
    assert type(ready.messages[0]).__name__ == "Nack"
    node.step(Prepare(src="a", dst="c", ballot=Ballot(6, "a"), from_slot=3), 0)
    ready = take(node)
    assert ready.persist_promise == Ballot(6, "a")
    (promise,) = ready.messages_after_persist  # only once the promise is durable
    assert promise.accepted == (AcceptedSlot(slot=3, ballot=Ballot(5, "b"), value=(b"v",)),)
    assert promise.chosen_up_to == 2


def test_a_lagging_member_catches_up_then_needs_state_transfer_once_compacted() -> None:
    net = Net()
    net.elect("a")
    net.down = {"c"}
    for value in (b"1", b"2", b"3"):
        net.nodes["a"].propose([value], net.now)
        net.run()
    net.down = set()
    net.now += 20
    net.nodes["a"].tick(net.now)  # the heartbeat tells c it is behind; c catches up
    net.run()
    assert [s for s, _ in net.applied["c"]] == [1, 2, 3]

    net.down = {"c"}
    net.nodes["a"].propose([b"4"], net.now)
    net.run()
    net.now += 20
    net.nodes["a"].tick(net.now)  # b learns slot 4 from the heartbeat
    net.run()
    net.nodes["a"].compact(4)
    net.nodes["b"].compact(4)
    net.down = set()
    net.now += 20
    net.nodes["a"].tick(net.now)
    net.run()
    assert net.applied["c"][-1][0] == 3  # c asked a, which had compacted slot 4
    assert net.transfers["c"] == StateTransfer(peer="a", up_to=4)
    net.nodes["c"].install_state(4)  # the shell copied a's state through slot 4
    assert net.nodes["c"].chosen_up_to == 4


def test_settings_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="max_in_flight_slots"):
        PaxosSettings(max_in_flight_slots=0)
    with pytest.raises(ValueError, match="twice"):
        PaxosSettings(heartbeat_interval_ms=100, election_timeout_ms=150)
    with pytest.raises(ValueError, match="leader_votes_small_slots_up_to"):
        PaxosSettings(leader_votes_small_slots_up_to=-1)
    with pytest.raises(ValueError, match="unknown planted bugs"):
        PaxosSettings(planted_bugs=frozenset({"nope"}))


LAZY = dataclasses.replace(SETTINGS, leader_vote_delay_ms=5)


def test_a_lazy_leader_lets_its_followers_choose_and_never_writes_its_own_vote() -> None:
    net = Net(settings=LAZY)
    net.elect("a")
    net.nodes["a"].propose([b"x"], net.now)
    accepts = [m for m in take(net.nodes["a"]).messages if isinstance(m, Accept)]
    assert sorted(m.dst for m in accepts) == ["b", "c"]  # not to itself
    net.queue.extend(accepts)
    net.run()
    assert net.applied["a"] == [(1, (b"x",))]
    assert net.nodes["a"].stats.own_votes_needed == 0


def test_a_small_slot_goes_to_a_quorum_and_the_rest_get_its_value_once_chosen() -> None:
    net = Net(settings=dataclasses.replace(LAZY, leader_votes_small_slots_up_to=1))
    net.elect("a")
    net.nodes["a"].propose([b"x"], net.now, learners=["c"])
    accepts = [m for m in take(net.nodes["a"]).messages if isinstance(m, Accept)]
    # The leader votes at once; c waits to learn the slot, so c (not b) completes the quorum.
    assert sorted(m.dst for m in accepts) == ["a", "c"]
    net.queue.extend(accepts)
    net.run()
    assert net.applied["a"] == net.applied["b"] == net.applied["c"] == [(1, (b"x",))]
    assert net.nodes["a"].stats.small_slots == 1
    net.nodes["a"].propose([b"y", b"z"], net.now)  # two values: a busy log, the followers vote
    accepts = [m for m in take(net.nodes["a"]).messages if isinstance(m, Accept)]
    assert sorted(m.dst for m in accepts) == ["b", "c"]
    net.queue.extend(accepts)
    net.run()
    assert net.applied["a"][-1] == (2, (b"y", b"z"))


def test_a_small_slot_whose_quorum_is_down_goes_to_everyone_when_due() -> None:
    net = Net(settings=dataclasses.replace(LAZY, leader_votes_small_slots_up_to=1))
    net.elect("a")
    net.down = {"b"}
    net.nodes["a"].propose([b"x"], net.now)
    net.run()
    assert net.applied["a"] == []  # b was the quorum's follower, and it is down
    net.now += 5
    net.nodes["a"].tick(net.now)  # due: c gets the Accept as well
    net.run()
    assert net.applied["a"] == [(1, (b"x",))]  # a's vote and c's
    assert net.nodes["a"].stats.small_slot_fallbacks == 1
    net.nodes["a"].propose([b"y"], net.now)  # the next slot goes to everyone
    accepts = [m for m in take(net.nodes["a"]).messages if isinstance(m, Accept)]
    assert sorted(m.dst for m in accepts) == ["a", "b", "c"]


def test_a_retransmit_before_the_rest_is_due_goes_to_the_quorum_only() -> None:
    settings = dataclasses.replace(LAZY, leader_vote_delay_ms=50, leader_votes_small_slots_up_to=1)
    net = Net(settings=settings)
    net.elect("a")
    net.down = {"b"}
    net.nodes["a"].propose([b"x"], net.now)
    net.run()
    net.now += settings.retransmit_interval_ms
    net.nodes["a"].tick(net.now)
    resent = [m.dst for m in take(net.nodes["a"]).messages if isinstance(m, Accept)]
    assert resent == ["b"]  # c is not in this slot's quorum, and its turn has not come
    net.now += settings.leader_vote_delay_ms
    net.nodes["a"].tick(net.now)
    resent = [m.dst for m in take(net.nodes["a"]).messages if isinstance(m, Accept)]
    assert resent.count("c") == 1


def test_an_unasked_value_past_a_gap_asks_for_catch_up_at_the_usual_pace() -> None:
    net = Net()
    c = net.nodes["c"]
    for slot in (5, 6):  # a leader's values of two small slots; c missed slots 1-4
        value = ChosenSlot(slot=slot, value=(b"x",))
        c.step(
            CatchUpReply(src="a", dst="c", chosen=(value,), chosen_up_to=slot, compacted_up_to=0),
            net.now,
        )
    requests = [m for m in take(c).messages if isinstance(m, CatchUpRequest)]
    assert [(m.dst, m.from_slot) for m in requests] == [("a", 1)]  # one, not one per value


def test_a_lazy_leader_votes_itself_when_a_follower_is_down_then_at_once() -> None:
    net = Net(settings=LAZY)
    net.elect("a")
    net.down = {"c"}
    net.nodes["a"].propose([b"x"], net.now)
    net.run()
    assert net.applied["a"] == []  # b alone is no quorum, and the leader has not voted yet
    net.now += 5
    net.nodes["a"].tick(net.now)  # the delay passed: the leader votes
    net.run()
    assert net.applied["a"] == [(1, (b"x",))]
    assert net.nodes["a"].stats.own_votes_needed == 1
    net.nodes["a"].propose([b"y"], net.now)  # from now on it votes at once
    net.run()
    assert net.applied["a"][-1] == (2, (b"y",))
    assert net.nodes["a"].stats.own_votes_needed == 1


def test_a_learner_hears_the_votes_and_learns_before_the_leader_tells_it() -> None:
    net = Net()
    net.elect("a")
    net.nodes["a"].propose([b"x"], net.now, learners=["c"])
    net.run()  # no heartbeat tick: c can only have learned from the votes
    assert net.applied["c"] == [(1, (b"x",))]
    assert net.applied["b"] == []  # not a learner: it waits for the leader's chosen prefix


def test_a_non_voting_learner_follows_the_log_but_never_runs_for_leader_or_votes() -> None:
    net = Net(ids=("a", "b", "c", "d"))
    learner_view = Membership.initial(frozenset({"a", "b", "c"}), learners=frozenset({"d"}))
    for node in net.nodes.values():
        node.applied(0, learner_view)
    net.elect("a")
    net.nodes["a"].propose([b"x"], net.now)
    ready = take(net.nodes["a"])
    sent = (*ready.messages, *ready.messages_after_persist)
    accepts_to = {m.dst for m in sent if isinstance(m, Accept)}
    assert {"b", "c"} <= accepts_to and "d" not in accepts_to  # the learner casts no vote
    net.queue.extend(sent)
    net.run()
    net.now += 20
    net.nodes["a"].tick(net.now)  # the heartbeat carries the chosen prefix to the learner
    net.run()
    assert net.applied["d"] == [(1, (b"x",))]
    net.now += 10_000
    net.nodes["d"].tick(net.now)  # far past its election timeout
    assert not net.nodes["d"].is_voter
    assert take(net.nodes["d"]).is_empty()  # no Prepare went out
    assert net.nodes["d"].status().leader_id == "a"


def test_a_leader_proposes_no_slot_whose_voters_it_does_not_know_yet() -> None:
    # alpha = 2: slot s is governed by the configuration slot s - 2 made, so the leader may run
    # slots 1 and 2 at once, but slot 3 only after its shell applied slot 1.
    # This shell applies later than it takes Readies, so it keeps a few not yet advanced.
    net = Net(auto_apply=False, settings=dataclasses.replace(SETTINGS, max_unadvanced_readies=8))
    net.elect("a")
    net.nodes["a"].propose([b"1", b"2", b"3", b"4", b"5", b"6", b"7"], net.now)
    net.run()
    leader = net.nodes["a"]
    assert leader.chosen_up_to == 2  # chosen, but the shell has not applied them
    assert leader.status().in_flight_slots == 0 and leader.status().pending_values == 1
    net.apply("a", 1)
    net.run()
    assert leader.chosen_up_to == 3  # slot 3 went out once slot 1 was applied


def test_a_leader_runs_phase_1_again_for_a_configuration_its_promises_do_not_cover() -> None:
    net = Net(ids=("a", "b", "c", "d"))
    three = Membership.initial(frozenset({"a", "b", "c"}), learners=frozenset({"d"}))
    for node in net.nodes.values():
        node.applied(0, three)
    net.down = {"c"}
    net.elect("a")  # promises from a and b: a quorum of {a, b, c}
    leader = net.nodes["a"]
    # Slot 1 adds d: {a, b, c, d} governs from slot 3 (alpha 2); {a, b} is not a quorum of it.
    four = three.with_configuration(Configuration(from_slot=3, voters=frozenset("abcd")))
    leader.applied(1, four)
    ready = take(leader)
    prepares = {m.dst for m in ready.messages if isinstance(m, Prepare)}
    assert not leader.is_leader and prepares == {"a", "b", "c", "d"}
    net.queue.extend(ready.messages)
    net.run()
    assert leader.is_leader  # with d's promise too


def test_a_leader_removed_from_the_voters_steps_down() -> None:
    net = Net()
    net.elect("a")
    leader = net.nodes["a"]
    without_a = leader.membership.with_configuration(
        Configuration(from_slot=2, voters=frozenset({"b", "c"}), learners=frozenset({"a"}))
    )
    leader.applied(1, without_a)
    assert not leader.is_leader and not leader.is_voter


def test_a_member_that_missed_a_reconfiguration_does_not_learn_from_votes_past_it() -> None:
    # c's view: voters {a, b, c}. The truth: slot 1 made the voters {a, b, c, d, e} from slot 2
    # (alpha 1). c, a learner of slot 2 that has not applied slot 1, sees votes from a and c:
    # a quorum of the voters it believes in, two of the five that really govern slot 2.
    settings = dataclasses.replace(SETTINGS, max_in_flight_slots=1)
    old = Membership.initial(frozenset("abc"), learners=frozenset("de"))
    c = PaxosNode("c", old, settings, lambda: 0.0, 0)
    ballot = Ballot(5, "a")
    c.step(
        Accept(
            src="a", dst="c", ballot=ballot, slot=2, value=(b"v",), chosen_up_to=1, learners=("c",)
        ),
        1,
    )
    c.step(Accepted(src="c", dst="c", ballot=ballot, slot=2), 2)
    c.step(Accepted(src="a", dst="c", ballot=ballot, slot=2), 3)
    c.step(
        CatchUpReply(
            src="a",
            dst="c",
            chosen=(ChosenSlot(slot=1, value=(b"+d+e",)),),
            chosen_up_to=1,
            compacted_up_to=0,
        ),
        4,
    )
    ready = c.take_ready()
    assert [record.slot for record in ready.chosen] == [1]  # not slot 2
    new = old.with_configuration(Configuration(from_slot=2, voters=frozenset("abcde")))
    c.applied(1, new)
    c.advance(ready)
    assert c.chosen_up_to == 1  # two votes of five: not chosen
    c.step(Accepted(src="d", dst="c", ballot=ballot, slot=2), 5)
    assert c.chosen_up_to == 2  # three of five


def test_messages_refuse_slots_and_ballots_no_member_could_reach() -> None:
    """Slots and rounds are stored as signed 64-bit integers: a message past what a member
    reaches is refused when it is built (the CMS answers INVALID_ARGUMENT)."""
    with pytest.raises(ValueError, match="round"):
        Ballot(MAX_ROUND + 1, "a")
    with pytest.raises(ValueError, match="node id"):
        Ballot(1, "x" * 129)
    with pytest.raises(ValueError, match="from_slot"):
        CatchUpRequest(src="a", dst="b", from_slot=MAX_SLOT + 1)
    with pytest.raises(ValueError, match="chosen_up_to"):
        CatchUpReply(src="a", dst="b", chosen=(), chosen_up_to=2**61 + 1, compacted_up_to=0)
    assert ballot_from_proto(paxos_pb2.Ballot(round=MAX_ROUND, node_id="a")).round == MAX_ROUND
    with pytest.raises(ValueError, match="round"):
        ballot_from_proto(paxos_pb2.Ballot(round=MAX_ROUND + 1, node_id="a"))
    with pytest.raises(ValueError):
        message_from_proto(
            paxos_pb2.PaxosMessage(
                src="a", dst="b", catch_up_request=paxos_pb2.CatchUpRequest(from_slot=2**63)
            )
        )


def test_a_slot_past_the_accept_window_is_never_stored_nor_re_proposed() -> None:
    """A forged Accept or Promise naming a slot far past the chosen prefix (a leader proposes
    at most α past it) cannot make a member store it or a new leader fill every slot up to it:
    once that meant 2^62 no-ops and a process killed for its memory."""
    net = Net(settings=dataclasses.replace(SETTINGS, accept_window_slots=100))
    net.elect("a")
    far = SETTINGS.max_in_flight_slots + 101
    c = net.nodes["c"]
    c.step(
        Accept(
            src="a", dst="c", ballot=Ballot(1, "a"), slot=far, value=(b"forged",), chosen_up_to=0
        ),
        net.now,
    )
    ready = take(c)
    assert not ready.persist_accepted  # not recorded
    assert not any(isinstance(m, Accepted) for m in ready.messages_after_persist)
    # A new leader that hears of a slot at 2^62 in a promise fills nothing up to it.
    b = net.nodes["b"]
    net.down = {"a", "c"}
    net.now += 1_000
    b.tick(net.now)
    net.run()  # b's own promise
    assert b.status().ballot is not None and not b.is_leader
    b.step(
        Promise(
            src="c",
            dst="b",
            ballot=b.status().ballot,
            accepted=(AcceptedSlot(slot=MAX_SLOT, ballot=Ballot(1, "a"), value=(b"forged",)),),
            chosen_up_to=0,
        ),
        net.now,
    )
    assert b.is_leader  # at once: nothing to fill up to 2^62
    take(b)
    b.propose([b"real"], net.now)
    proposed = [m for m in take(b).messages if isinstance(m, Accept)]
    assert {(m.slot, m.value) for m in proposed} == {(1, (b"real",))}


def test_a_member_cut_off_for_long_comes_back_far_ahead_and_the_group_elects_above_it() -> None:
    """A voter cut off campaigns alone and its round climbs far past the group's; when it is
    back, its refusals carry that round and the group elects above it (rounds from peers
    are taken however far ahead), so it votes and learns again."""
    net = Net()
    net.down = {"c"}
    net.elect("a")
    c = net.nodes["c"]
    c.step(Prepare(src="c", dst="c", ballot=Ballot(1_000_000, "c"), from_slot=1), net.now)
    take(c)
    net.down = set()
    net.nodes["a"].propose([b"v"], net.now)
    for _ in range(200):
        net.now += 10  # the heartbeat interval: elections only when a leader goes quiet
        for node_id in net.ids:
            net.nodes[node_id].tick(net.now)
        net.run()
        if all(net.applied[n] for n in net.ids):
            break
    assert all(net.applied[n] == [(1, (b"v",))] for n in net.ids), net.applied
    assert min(net.nodes[n].status().promised.round for n in net.ids) > 1_000_000


def test_with_no_round_left_a_member_stays_a_follower_and_says_so() -> None:
    """A forged ballot at the end of the range leaves no higher one: the member does not
    crash building one; it counts the election it could not start."""
    net = Net()
    a = net.nodes["a"]
    a.step(Prepare(src="b", dst="a", ballot=Ballot(MAX_ROUND, "b"), from_slot=1), net.now)
    net.now += 1_000
    a.tick(net.now)
    assert a.role is Role.FOLLOWER and a.stats.rounds_exhausted == 1
