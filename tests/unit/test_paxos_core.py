"""Claims of multi-Paxos, each shown on the pure core with a hand-driven network."""

from __future__ import annotations

import pytest

from epochal.paxos import (
    NOOP,
    Accept,
    AcceptedSlot,
    Ballot,
    Membership,
    NotLeader,
    Overloaded,
    PaxosNode,
    PaxosSettings,
    Prepare,
    Role,
    StateTransfer,
)

from .paxos_net import SETTINGS, Net, take


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
