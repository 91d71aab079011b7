"""Reconciliation leases (epochal.mtrack.leases): a replica refuses tokens below the highest it
has seen and actions whose token it has not heard renewed within the lease; a contender takes
over only when a majority saw the holder's renewals stop; a holder acts only while a majority
acknowledged a renewal sent within the lease, less a margin — so a reconciler paused past its
lease finds everything refused when it wakes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.mtrack.leases import HolderLease, TokenGuard, Verdict, may_take_over

LEASE = 1000


def test_a_paused_holder_is_refused_everywhere_once_a_successor_claimed_or_its_lease_lapsed() -> (
    None
):
    replicas = {name: TokenGuard(LEASE) for name in ("r1", "r2", "r3")}
    holder = HolderLease(token=5, lease_ms=LEASE, margin_ms=100)
    for guard in replicas.values():
        assert guard.claim(5, now_ms=0) is Verdict.OK
    holder.renewed(sent_ms=0)
    assert holder.may_act(500) and all(g.admit(5, 500) is Verdict.OK for g in replicas.values())
    # SIGSTOP at 500: no more renewals. A contender sees the renewals stop at a majority.
    idle = {name: guard.idle_ms(1200) for name, guard in replicas.items()}
    assert may_take_over(idle, 3, lease_ms=LEASE)
    successor = 9  # the epoch of its grant in the metadata log
    for name in ("r1", "r2"):
        assert replicas[name].claim(successor, now_ms=1200) is Verdict.OK
    # SIGCONT at 1500: the paused holder's own clock says stop; had it not, the replicas refuse.
    assert not holder.may_act(1500)
    assert replicas["r1"].admit(5, 1500) is Verdict.SUPERSEDED
    assert replicas["r3"].admit(5, 1500) is Verdict.LAPSED  # not claimed yet, but lapsed
    assert replicas["r3"].renew(5, 1500) is Verdict.LAPSED  # and not renewed: a new grant acts
    assert replicas["r1"].renew(5, 1500) is Verdict.SUPERSEDED
    replicas["r3"].learn(successor)  # the grant reaches it through the metadata log
    assert replicas["r3"].renew(5, 1500) is Verdict.SUPERSEDED
    assert replicas["r3"].admit(successor, 1500) is Verdict.LAPSED  # claim before acting
    assert replicas["r3"].claim(successor, 1500) is Verdict.OK
    assert replicas["r3"].admit(successor, 1501) is Verdict.OK


def test_a_holder_that_renews_keeps_its_range() -> None:
    guard = TokenGuard(LEASE)
    holder = HolderLease(token=3, lease_ms=LEASE, margin_ms=100)
    now = 0
    while now < 10 * LEASE:
        if holder.renew_due(now):
            assert guard.renew(3, now) is Verdict.OK
            holder.renewed(now)
        assert holder.may_act(now) and guard.admit(3, now) is Verdict.OK
        assert not may_take_over({"r1": guard.idle_ms(now)}, 1, lease_ms=LEASE)
        now += 50


def test_the_highest_token_rises_only_and_says_when_it_must_be_persisted() -> None:
    guard = TokenGuard(LEASE)
    assert guard.claim(4, 0) is Verdict.OK and guard.changed
    guard.changed = False
    assert guard.claim(4, 10) is Verdict.OK and not guard.changed  # a renewal
    assert guard.claim(3, 20) is Verdict.SUPERSEDED and guard.highest == 4
    guard.learn(2)
    assert guard.highest == 4 and not guard.changed
    assert guard.admit(6, 30) is Verdict.LAPSED  # a token never claimed here acts on nothing


@given(
    st.lists(
        st.tuples(st.sampled_from(["claim", "learn", "admit"]), st.integers(0, 9)), max_size=30
    )
)
def test_no_token_below_the_highest_is_ever_admitted(steps) -> None:
    guard = TokenGuard(LEASE)
    seen = 0
    for now, (step, token) in enumerate(steps):
        if step == "claim":
            granted = guard.claim(token, now) is Verdict.OK
            assert granted == (token >= seen)
            seen = max(seen, token) if granted else seen
        elif step == "learn":
            guard.learn(token)
            seen = max(seen, token)
        else:
            assert guard.admit(token, now) is not Verdict.OK or token == seen
        assert guard.highest == seen


def test_a_majority_must_see_the_renewals_stop() -> None:
    assert not may_take_over({"r1": 5000, "r2": 10, "r3": 20}, 3, lease_ms=LEASE)
    assert may_take_over({"r1": 5000, "r2": None}, 3, lease_ms=LEASE)  # r3 did not answer
    assert not may_take_over({"r1": 5000}, 3, lease_ms=LEASE)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="more than 0 ms"):
        TokenGuard(0)
    with pytest.raises(ValueError, match="margin must be under the lease"):
        HolderLease(token=1, lease_ms=100, margin_ms=100)
    assert not HolderLease(token=1, lease_ms=100, margin_ms=10).may_act(0)
