"""Reconfiguration through the log and the bounds on what a message may name, on the pure core."""

from __future__ import annotations

import dataclasses

import pytest

from epochal.paxos import (
    Accept,
    Accepted,
    AcceptedSlot,
    Ballot,
    Configuration,
    Membership,
    PaxosNode,
    Prepare,
    Promise,
    Role,
)
from epochal.paxos.ballot import MAX_ROUND
from epochal.paxos.messages import MAX_SLOT, CatchUpReply, CatchUpRequest, ChosenSlot
from epochal.wire.paxos import ballot_from_proto, message_from_proto
from epochal.wire.v1 import paxos_pb2

from .paxos_net import SETTINGS, Net, take


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
