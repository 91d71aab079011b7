"""The shell's side of the Ready protocol (as raft's ``Advance``): every Ready taken is
acknowledged, in order, once performed; a shell that forgets one fails loudly, not silently."""

from __future__ import annotations

import pytest

from epochal.errors import EpochalError
from epochal.paxos import (
    Accept,
    Ballot,
    Membership,
    PaxosNode,
    PaxosSettings,
    Ready,
    ReadyProtocolError,
)
from epochal.paxos.messages import CatchUpReply, ChosenSlot

LEADER = Ballot(1, "a")


def follower(max_unadvanced_readies: int = 4) -> PaxosNode:
    membership = Membership.initial(frozenset({"a", "b", "c"}))
    settings = PaxosSettings(max_unadvanced_readies=max_unadvanced_readies)
    return PaxosNode("c", membership, settings, lambda: 0.0, 0)


def accept(node: PaxosNode, slot: int) -> Ready:
    """The leader's Accept for ``slot``; returns the Ready: write it, then vote."""
    message = Accept(src="a", dst="c", ballot=LEADER, slot=slot, value=(b"v",), chosen_up_to=0)
    node.step(message, 0)
    return node.take_ready()


def learn(node: PaxosNode, *slots: int) -> Ready:
    chosen = tuple(ChosenSlot(slot=s, value=(b"v",)) for s in slots)
    reply = CatchUpReply(
        src="a", dst="c", chosen=chosen, chosen_up_to=max(slots), compacted_up_to=0
    )
    node.step(reply, 0)
    return node.take_ready()


def test_a_shell_that_forgets_to_advance_fails_loudly_at_the_next_take() -> None:
    node = follower(max_unadvanced_readies=1)
    accept(node, 1)  # taken, never advanced: its vote would never leave
    with pytest.raises(ReadyProtocolError) as error:
        accept(node, 2)
    message = str(error.value)
    assert "1 Readies taken and not advanced (max_unadvanced_readies=1)" in message
    assert "advance(ready)" in message
    assert "make promise 1.a, 1 accepted slots durable; then send 1 acceptor replies" in message
    # A bug, not an expected condition: what handles those does not swallow it.
    assert not isinstance(error.value, EpochalError) and isinstance(error.value, AssertionError)


def test_a_shell_may_take_readies_while_their_writes_are_in_flight_then_advance_in_order() -> None:
    node = follower(max_unadvanced_readies=3)
    readies = [accept(node, slot) for slot in (1, 2, 3)]  # one transaction will write all three
    with pytest.raises(ReadyProtocolError, match="3 Readies taken and not advanced"):
        node.take_ready()
    with pytest.raises(ReadyProtocolError, match="out of order"):
        node.advance(readies[1])
    for ready in readies:
        node.advance(ready)
    assert accept(node, 4).persist_accepted  # room again
    with pytest.raises(ReadyProtocolError, match="out of order"):
        node.advance(readies[0])  # each once


def test_a_ready_is_advanced_only_once_its_chosen_slots_are_applied() -> None:
    node = follower()
    ready = learn(node, 1, 2)
    node.applied(1, node.membership)
    with pytest.raises(ReadyProtocolError, match=r"slots 1\.\.2, applied .* only through 1"):
        node.advance(ready)
    node.applied(2, node.membership)
    node.advance(ready)


def test_an_empty_ready_asks_nothing() -> None:
    node = follower(max_unadvanced_readies=1)
    for _ in range(3):
        ready = node.take_ready()
        assert ready.is_empty()
        node.advance(ready)  # allowed, and not needed
    assert Ready().obligations() == "nothing after sending its messages"
