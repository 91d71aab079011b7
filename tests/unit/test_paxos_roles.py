"""Roles are swapped handlers (etcd's raft ``becomeLeader`` installs ``stepLeader``): every role
change is checked against one table and installs the new role's handlers, through which ``step``,
``tick`` and ``applied`` dispatch."""

from __future__ import annotations

import pytest

from epochal.paxos import (
    Accept,
    Ballot,
    CatchUpRequest,
    Commit,
    PaxosNode,
    Prepare,
    Promise,
    Role,
)
from epochal.paxos.node import ROLE_HANDLERS
from epochal.paxos.roles import LEGAL_ROLE_CHANGES, check_role_change

from .paxos_net import Net

F, C, L = Role.FOLLOWER, Role.CANDIDATE, Role.LEADER


def test_the_legal_role_changes() -> None:
    changes = dict(LEGAL_ROLE_CHANGES)
    assert changes == {
        # from      to
        F: {C},  # campaigns when its election timeout passes
        C: {C, L, F},  # campaigns again; wins; meets a higher ballot or stops voting
        L: {C, F},  # phase 1 again; meets a higher ballot or stops voting
    }


@pytest.mark.parametrize(
    ("current", "new"), [(c, n) for c in Role for n in Role if n not in LEGAL_ROLE_CHANGES[c]]
)
def test_an_illegal_role_change_fails_naming_both_roles(current: Role, new: Role) -> None:
    with pytest.raises(AssertionError, match=f"from {current.value} to {new.value}"):
        check_role_change(current, new)


def test_a_follower_made_leader_without_campaigning_fails_and_keeps_its_role() -> None:
    node = Net().nodes["a"]
    with pytest.raises(AssertionError, match="illegal role change from follower to leader"):
        node._change_role(Role.LEADER)
    assert_installed(node, Role.FOLLOWER)


def assert_installed(node: PaxosNode, role: Role) -> None:
    handlers = ROLE_HANDLERS[role]
    assert node.role is role
    assert node._step_handlers is handlers.step
    assert node._tick_role is handlers.tick
    assert node._applied_role is handlers.applied


def test_each_role_installs_its_handlers() -> None:
    net = Net()
    a = net.nodes["a"]
    assert_installed(a, Role.FOLLOWER)  # from the start
    net.now += 1_000
    a.tick(net.now)  # the election timeout passed: it campaigns
    assert_installed(a, Role.CANDIDATE)
    net.run()
    assert_installed(a, Role.LEADER)
    higher = Ballot(a.status().promised.round + 1, "b")
    a.step(Commit(src="b", dst="a", ballot=higher, chosen_up_to=0), net.now)
    assert_installed(a, Role.FOLLOWER)


def test_every_role_handles_every_message_kind_and_shares_the_acceptor_and_catch_up_ones() -> None:
    assert set(ROLE_HANDLERS) == set(Role)
    assert len({frozenset(handlers.step) for handlers in ROLE_HANDLERS.values()}) == 1
    for kind in (Prepare, Accept, Commit, CatchUpRequest):
        assert len({handlers.step[kind] for handlers in ROLE_HANDLERS.values()}) == 1, kind


def test_a_promise_counts_only_for_a_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dispatch goes through the installed table: a leader's late promise is only observed."""
    net = Net()
    net.elect("a")
    a = net.nodes["a"]
    ballot = a.status().ballot
    assert ballot is not None
    monkeypatch.setattr(PaxosNode, "_become_leader", lambda node: pytest.fail("re-elected"))
    a.step(Promise(src="c", dst="a", ballot=ballot, accepted=(), chosen_up_to=0), net.now)
    assert a.is_leader and a.status().ballot == ballot
