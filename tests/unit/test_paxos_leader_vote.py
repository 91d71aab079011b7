"""The leader's own vote and small slots (``epochal.paxos.leader``, "The leader's own vote"), and
learners that hear the votes, on the pure core."""

from __future__ import annotations

import dataclasses

from epochal.paxos import (
    Accept,
)
from epochal.paxos.messages import CatchUpReply, CatchUpRequest, ChosenSlot

from .paxos_net import SETTINGS, Net, take

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
