"""The Paxos core guards itself: a ballot below the promise is refused in one place, before any
handler runs, and the invariants its docstring lists fail loudly when something breaks them."""

from __future__ import annotations

import dataclasses

import pytest

from epochal.paxos import (
    Accept,
    Accepted,
    AcceptedSlot,
    Ballot,
    Commit,
    Membership,
    Message,
    Nack,
    PaxosNode,
    PaxosSettings,
    Prepare,
    Promise,
    Ready,
)
from epochal.paxos import acceptor as acceptor_module
from epochal.paxos import node as node_module
from epochal.paxos.messages import CatchUpReply, CatchUpRequest, ChosenSlot

PROMISED = Ballot(5, "a")
BELOW = Ballot(4, "b")


def acceptor(**state: object) -> PaxosNode:
    membership = Membership.initial(frozenset({"a", "b", "c"}))
    return PaxosNode("c", membership, PaxosSettings(), lambda: 0.0, 0, **state)  # type: ignore[arg-type]


def proposer_message(kind: type[Message], ballot: Ballot) -> Message:
    if kind is Prepare:
        return Prepare(src="b", dst="c", ballot=ballot, from_slot=1)
    if kind is Accept:
        return Accept(src="b", dst="c", ballot=ballot, slot=1, value=(b"v",), chosen_up_to=0)
    assert kind is Commit
    return Commit(src="b", dst="c", ballot=ballot, chosen_up_to=0)


def test_every_message_with_a_ballot_is_checked_against_the_promise_or_is_a_reply() -> None:
    """A new message kind that carries a ballot must be placed on one side or the other."""
    with_ballot = {
        kind
        for handlers in node_module.ROLE_HANDLERS.values()
        for kind in handlers.step
        if "ballot" in {f.name for f in dataclasses.fields(kind)}
    }
    replies = {Promise, Accepted, Nack}  # they name the receiver's own ballot
    assert (
        set(acceptor_module.PROPOSER_MESSAGES) == with_ballot - replies == {Prepare, Accept, Commit}
    )


@pytest.mark.parametrize("kind", [Prepare, Accept, Commit])
def test_a_proposer_ballot_below_the_promise_gets_one_nack_before_any_handler_runs(
    kind: type[Message], monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_run(node: PaxosNode, message: Message) -> None:
        raise AssertionError(f"the {kind.__name__} handler ran for a ballot below the promise")

    for handlers in node_module.ROLE_HANDLERS.values():  # whichever role is installed
        monkeypatch.setitem(handlers.step, kind, must_not_run)
    node = acceptor(promised=PROMISED)
    before = node.status()
    node.step(proposer_message(kind, BELOW), 0)
    nack = Nack(src="c", dst="b", ballot=BELOW, promised=PROMISED)
    assert node.take_ready() == Ready(messages=(nack,))
    assert node.status() == before


@pytest.mark.parametrize(
    ("kind", "replies"), [(Prepare, [Promise]), (Accept, [Accepted]), (Commit, [])]
)
def test_a_proposer_ballot_at_the_promise_reaches_its_handler(
    kind: type[Message], replies: list[type[Message]]
) -> None:
    node = acceptor(promised=PROMISED)
    node.step(proposer_message(kind, PROMISED), 0)
    ready = node.take_ready()
    assert not ready.messages  # no Nack
    assert [type(m) for m in ready.messages_after_persist] == replies


# ---------------------------------------------------------------- invariants, broken on purpose


def learned(node: PaxosNode, *slots: int) -> None:
    """``node`` learns ``slots`` chosen from a peer's catch-up reply."""
    chosen = tuple(ChosenSlot(slot=s, value=(b"v%d" % s,)) for s in slots)
    reply = CatchUpReply(
        src="a", dst="c", chosen=chosen, chosen_up_to=max(slots), compacted_up_to=0
    )
    node.step(reply, 0)


def test_promised_never_decreases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PaxosNode, "_refused_below_promise", lambda node, message: False)
    node = acceptor(promised=PROMISED)
    with pytest.raises(AssertionError, match=f"promise would go back from {PROMISED} to {BELOW}"):
        node.step(proposer_message(Prepare, BELOW), 0)


def test_an_accepted_slot_is_replaced_only_from_a_ballot_at_least_as_high() -> None:
    node = acceptor(
        promised=PROMISED,
        accepted=[AcceptedSlot(slot=1, ballot=PROMISED, value=(b"v",))],
    )
    node._promised = Ballot(1, "a")  # crafted: a promise below what the member accepted
    with pytest.raises(AssertionError, match=f"slot 1 accepted in {PROMISED}, replaced in {BELOW}"):
        node.step(proposer_message(Accept, BELOW), 0)


def test_chosen_up_to_only_grows() -> None:
    node = acceptor()
    learned(node, 1, 2)
    node._chosen_up_to = 1  # crafted: the prefix went back
    with pytest.raises(AssertionError, match="chosen_up_to went back to 1, below 2"):
        learned(node, 2)  # the slot after that prefix: a reply's values are taken only there


def test_every_slot_up_to_chosen_up_to_has_a_chosen_value_or_was_compacted() -> None:
    node = acceptor()
    learned(node, 1, 2)
    node.take_ready()
    del node._log[1]  # crafted: a chosen slot lost without compaction
    with pytest.raises(AssertionError, match=r"slot 1 .* has no chosen value"):
        node.step(CatchUpRequest(src="b", dst="c", from_slot=1), 0)
    node.compact(1)  # compacted, it is answered as such
    node.step(CatchUpRequest(src="b", dst="c", from_slot=1), 0)


def test_chosen_slots_are_delivered_exactly_once_in_order() -> None:
    node = acceptor()
    learned(node, 1, 2)
    assert [c.slot for c in node.take_ready().chosen] == [1, 2]
    node._delivered_up_to = 1  # crafted: the delivery cursor went back
    with pytest.raises(AssertionError, match="slot 2 delivered after slot 2"):
        learned(node, 3)


def test_a_state_transfer_comes_after_every_slot_delivered_before_it() -> None:
    node = acceptor()
    learned(node, 1)  # delivered, but the shell has not taken the Ready
    with pytest.raises(AssertionError, match=r"slots 1\.\. not taken before install"):
        node.install_state(5)
