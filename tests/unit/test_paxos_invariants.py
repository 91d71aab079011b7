"""The Paxos core guards itself: a ballot below the promise is refused in one place, before any
handler runs, and the invariants its docstring lists fail loudly when something breaks them."""

from __future__ import annotations

import dataclasses

import pytest

from epochal.paxos import (
    Accept,
    Accepted,
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
from epochal.paxos import node as node_module

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
        for kind in node_module._HANDLERS
        if "ballot" in {f.name for f in dataclasses.fields(kind)}
    }
    replies = {Promise, Accepted, Nack}  # they name the receiver's own ballot
    assert set(node_module._PROPOSER_MESSAGES) == with_ballot - replies == {Prepare, Accept, Commit}


@pytest.mark.parametrize("kind", [Prepare, Accept, Commit])
def test_a_proposer_ballot_below_the_promise_gets_one_nack_before_any_handler_runs(
    kind: type[Message], monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_run(node: PaxosNode, message: Message) -> None:
        raise AssertionError(f"the {kind.__name__} handler ran for a ballot below the promise")

    monkeypatch.setitem(node_module._HANDLERS, kind, must_not_run)
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
