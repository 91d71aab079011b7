"""Catch-up on the pure core: what a member takes from a CatchUpReply, and how long a leader
waits for the prefix its promises reported.

A reply carries no ballot and its sender is not authenticated, so a value in it is taken only
where it extends the chosen prefix (a leader's, only up to the prefix its promises reported) and
is delivered at once: none waits past a gap, to be delivered later over what the group chose
there. A leader proposes nothing until it holds that prefix, so when the peer that reported it
stops answering that it holds it, the leader runs phase 1 again instead of waiting for good."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from epochal.paxos import Promise, Role, StateTransfer
from epochal.paxos.messages import CatchUpReply, CatchUpRequest, ChosenSlot

from .paxos_net import SETTINGS, Net, take

ONE_SLOT_IN_FLIGHT = dataclasses.replace(SETTINGS, max_in_flight_slots=1)  # as the CMS runs


def forged_noop(net: Net, dst: str, slot: int) -> None:
    """The fuzz input that stopped a CMS leader: a reply nobody asked for, naming a real member
    as its sender and a no-op chosen at ``slot`` (twice), with no chosen prefix of its own."""
    record = ChosenSlot(slot=slot, value=())
    reply = CatchUpReply(
        src="b", dst=dst, chosen=(record, record), chosen_up_to=0, compacted_up_to=0
    )
    net.nodes[dst].step(reply, net.now)
    net.pump(dst)
    net.run()


def commit_one_by_one(net: Net, values: list[bytes]) -> None:
    """The CMS's way: the leader proposes the next value only once it is idle."""
    leader = net.nodes["a"]
    for value in values:
        assert leader.idle_leader, (value, leader.status())
        leader.propose([value], net.now)
        net.run()
    net.now += ONE_SLOT_IN_FLIGHT.heartbeat_interval_ms
    leader.tick(net.now)  # the last slot's chosen prefix reaches the followers
    net.run()


def test_a_value_named_ahead_of_the_log_is_not_held_so_the_leader_commits_past_its_slot() -> None:
    # Held, the no-op was delivered when the log reached slot 3: past the leader's next slot,
    # which it then never proposed (it was never idle again), and over the value chosen there.
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    commit_one_by_one(net, [b"v1"])
    for member in net.ids:
        forged_noop(net, member, slot=3)
    commit_one_by_one(net, [b"v2", b"v3", b"v4"])
    expected = [(1, (b"v1",)), (2, (b"v2",)), (3, (b"v3",)), (4, (b"v4",))]
    assert all(net.applied[member] == expected for member in net.ids), net.applied
    assert net.nodes["a"].role is Role.LEADER


def test_a_follower_holds_no_value_ahead_so_it_learns_what_the_group_chose_there() -> None:
    # Held, the no-op was delivered at slot 3 by the followers, which also acknowledged the
    # leader's Accept of v3 there as a slot already chosen: the leader applied v3, they did not.
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    commit_one_by_one(net, [b"v1"])
    for member in ("b", "c"):
        forged_noop(net, member, slot=3)
    commit_one_by_one(net, [b"v2", b"v3"])
    expected = [(1, (b"v1",)), (2, (b"v2",)), (3, (b"v3",))]
    assert all(net.applied[member] == expected for member in net.ids), net.applied


def test_a_leader_takes_no_value_for_the_slot_it_proposes_next() -> None:
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    commit_one_by_one(net, [b"v1"])
    forged_noop(net, "a", slot=2)
    assert net.nodes["a"].chosen_up_to == 1 and net.nodes["a"].idle_leader
    commit_one_by_one(net, [b"v2"])
    assert all(net.applied[member] == [(1, (b"v1",)), (2, (b"v2",))] for member in net.ids)


def test_a_reply_past_a_gap_is_asked_again_and_its_values_come_on_that_page() -> None:
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    net.down = {"c"}
    commit_one_by_one(net, [b"v1", b"v2", b"v3"])
    net.down = set()
    c = net.nodes["c"]
    # A leader's unasked value of slot 3 (a small slot c was left out of), past c's gap.
    c.step(
        CatchUpReply(
            src="a",
            dst="c",
            chosen=(ChosenSlot(slot=3, value=(b"v3",)),),
            chosen_up_to=3,
            compacted_up_to=0,
        ),
        net.now,
    )
    assert c.chosen_up_to == 0  # not held past the gap
    requests = [m for m in take(c).messages if isinstance(m, CatchUpRequest)]
    assert [(m.dst, m.from_slot) for m in requests] == [("a", 1)]
    net.queue.extend(requests)
    net.run()
    assert net.applied["c"] == [(1, (b"v1",)), (2, (b"v2",)), (3, (b"v3",))]


def deliver_until(net: Net, done: Callable[[], bool]) -> None:
    """Deliver queued messages one at a time until ``done()``."""
    while not done():
        message = net.queue.popleft()
        if message.dst not in net.down:
            net.nodes[message.dst].step(message, net.now)
            net.pump(message.dst)


def heartbeats_until_a_leader_is_idle(net: Net) -> str:
    for _ in range(100):
        net.now += ONE_SLOT_IN_FLIGHT.heartbeat_interval_ms
        for member in sorted(set(net.ids) - net.down):
            net.nodes[member].tick(net.now)
        net.run()
        idle = [m for m in sorted(set(net.ids) - net.down) if net.nodes[m].idle_leader]
        if idle:
            return idle[0]
    raise AssertionError({m: net.nodes[m].status() for m in net.ids})


def test_a_leader_whose_most_advanced_promiser_dies_campaigns_again_and_commits() -> None:
    # c was away while v1..v3 were chosen; it campaigns, b promises reporting slot 3, and b
    # dies before answering c's catch-up. a and c are a quorum; without a deadline c asked b
    # for good, proposing nothing, and a followed it.
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    net.down = {"c"}
    commit_one_by_one(net, [b"v1", b"v2", b"v3"])
    net.down = {"a"}
    c = net.nodes["c"]
    net.now += 1_000
    c.tick(net.now)
    net.pump("c")
    deliver_until(net, lambda: c.is_leader)
    assert c.chosen_up_to == 0 and not c.idle_leader  # it must learn slots 1..3 first
    net.down = {"b"}
    leader = heartbeats_until_a_leader_is_idle(net)
    net.nodes[leader].propose([b"v4"], net.now)
    net.run()
    expected = [(1, (b"v1",)), (2, (b"v2",)), (3, (b"v3",)), (4, (b"v4",))]
    assert net.applied[leader] == expected
    assert c.stats.elections_started == 2 and c.stats.catch_up_elections == 1


def test_a_forged_promise_naming_a_prefix_nobody_holds_costs_one_more_election() -> None:
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    commit_one_by_one(net, [b"v1"])
    net.down = {"a", "b"}
    c = net.nodes["c"]
    net.now += 1_000
    c.tick(net.now)
    net.run()  # c's own promise only
    ballot = c.status().ballot
    assert ballot is not None
    c.step(Promise(src="b", dst="c", ballot=ballot, accepted=(), chosen_up_to=50), net.now)
    net.pump("c")
    assert c.is_leader and not c.idle_leader  # waiting to learn slots 2..50 from b
    net.down = set()
    leader = heartbeats_until_a_leader_is_idle(net)  # b answers it holds slot 1 only
    net.nodes[leader].propose([b"v2"], net.now)
    net.run()
    assert net.applied[leader] == [(1, (b"v1",)), (2, (b"v2",))]


def test_a_leader_copying_a_peers_state_waits_as_long_as_the_peer_answers_it_holds_it() -> None:
    net = Net(settings=ONE_SLOT_IN_FLIGHT)
    net.elect("a")
    net.down = {"c"}
    commit_one_by_one(net, [b"v1", b"v2", b"v3"])
    for member in ("a", "b"):
        net.nodes[member].compact(3)  # c can only copy their state
    net.down = {"a"}
    c = net.nodes["c"]
    net.now += 1_000
    c.tick(net.now)
    net.run()
    assert c.is_leader and net.transfers["c"] == StateTransfer(peer="b", up_to=3)
    ballot = c.status().ballot
    for _ in range(10 * ONE_SLOT_IN_FLIGHT.election_timeout_ms // 10):  # a slow copy
        net.now += 10
        c.tick(net.now)
        net.run()  # b answers each retry: compacted, holding slot 3
    assert c.is_leader and c.status().ballot == ballot and c.stats.elections_started == 1
    c.install_state(3)  # the shell copied b's state
    net.apply("c", 3)
    assert c.idle_leader
