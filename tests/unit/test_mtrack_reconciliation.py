"""Log reconciliation's plan (epochal.mtrack.reconciliation): from each replica's difference with
one pivot's summary, who holds each id; deliveries that leave every replica holding the union,
each id sent once to each replica lacking it, from a replica holding it; the reconciliation time;
the digests a low bound carries; against sets of ids drawn at random and through the real
summary protocol."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.mtrack import LogDigests, MutationId, make_hlc, reconcile
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.reconciliation import (
    Delivery,
    deliveries,
    holders,
    reconciliation_time,
    span_digests,
)
from epochal.mtrack.summary import Difference
from epochal.tcm.tokens import TokenRange

UNIVERSE = [
    MutationId(node=n, log=1, sequence=s, hlc=100 * s + n) for n in (1, 2) for s in range(1, 13)
]
NAMES = ("a", "b", "c", "d")


@st.composite
def replica_sets(draw: st.DrawFn) -> dict[str, frozenset[MutationId]]:
    count = draw(st.integers(2, 4))
    return {
        name: frozenset(draw(st.lists(st.sampled_from(UNIVERSE), max_size=len(UNIVERSE))))
        for name in NAMES[:count]
    }


def differences(sets: dict[str, frozenset[MutationId]], pivot: str) -> dict[str, Difference]:
    return {
        name: Difference(only_a=sets[pivot] - ids, only_b=ids - sets[pivot])
        for name, ids in sets.items()
        if name != pivot
    }


@given(replica_sets(), st.data())
def test_holders_are_exactly_who_holds_each_id_some_replica_lacks(sets, data) -> None:
    pivot = data.draw(st.sampled_from(sorted(sets)))
    found = holders(pivot, sets, differences(sets, pivot))
    union = frozenset().union(*sets.values())
    everywhere = frozenset.intersection(*sets.values())
    assert set(found) == union - everywhere
    for mutation_id, nodes in found.items():
        assert nodes == {name for name, ids in sets.items() if mutation_id in ids}


@given(replica_sets(), st.integers(1, 5), st.data())
def test_the_deliveries_leave_every_replica_with_the_union_each_id_sent_once(
    sets, batch, data
) -> None:
    pivot = data.draw(st.sampled_from(sorted(sets)))
    plan = deliveries(holders(pivot, sets, differences(sets, pivot)), sets, batch=batch)
    after = {name: set(ids) for name, ids in sets.items()}
    sent: list[tuple[MutationId, str]] = []
    for delivery in plan:
        assert 1 <= len(delivery.ids) <= batch and delivery.source != delivery.target
        assert set(delivery.ids) <= sets[delivery.source]  # from a replica that holds them
        assert not set(delivery.ids) & sets[delivery.target]  # to one that lacks them
        after[delivery.target] |= set(delivery.ids)
        sent += [(i, delivery.target) for i in delivery.ids]
    union = frozenset().union(*sets.values())
    assert all(ids == union for ids in after.values())
    assert len(sent) == len(set(sent))


def test_the_load_spreads_over_the_holders_and_below_keeps_what_the_round_covers() -> None:
    ids = UNIVERSE[:6]
    held = {i: frozenset({"a", "b"}) for i in ids}
    plan = deliveries(held, ("a", "b", "c"), batch=10)
    assert sorted((d.source, len(d.ids)) for d in plan) == [("a", 3), ("b", 3)]
    cut = ids[3].hlc
    below = deliveries(held, ("a", "b", "c"), batch=10, below=cut)
    assert {i for d in below for i in d.ids} == {i for i in ids if i.hlc < cut}
    with pytest.raises(ValueError, match="held by no replica"):
        deliveries({ids[0]: frozenset()}, ("a",), batch=1)
    with pytest.raises(ValueError, match="at least one id"):
        deliveries(held, ("a",), batch=0)


def test_through_the_summary_protocol() -> None:
    """Differences as the replicas' summaries and sketches find them, through their encodings."""
    sets = {
        "a": frozenset(UNIVERSE[:20]),
        "b": frozenset(UNIVERSE[2:]),
        "c": frozenset(UNIVERSE[::2]),
    }
    found = {name: reconcile(sets["a"], sets[name])[0] for name in ("b", "c")}
    plan = deliveries(holders("a", sets, found), sets, batch=4)
    union = frozenset(UNIVERSE)
    for name, ids in sets.items():
        brought = {i for d in plan if d.target == name for i in d.ids}
        assert ids | brought == union and not ids & brought


def test_holders_need_a_difference_for_every_replica_but_the_pivot() -> None:
    with pytest.raises(ValueError, match="one difference per replica"):
        holders("a", ("a", "b", "c"), {"b": Difference()})
    assert Delivery("a", "b", ()).ids == ()


def test_the_reconciliation_time_is_the_lowest_clock_less_timeout_and_slack() -> None:
    hlcs = [make_hlc(10_000, 5), make_hlc(12_000), make_hlc(9_000, 3)]
    t = reconciliation_time(hlcs, write_timeout_ms=2_000, slack_ms=500)
    assert t == make_hlc(6_500)
    assert reconciliation_time(hlcs, write_timeout_ms=2_000, slack_ms=500, fence=t + 9) == t + 9
    assert reconciliation_time([make_hlc(100)], write_timeout_ms=2_000, slack_ms=0) == 0
    with pytest.raises(ValueError, match="at least one replica"):
        reconciliation_time([], write_timeout_ms=0, slack_ms=0)


@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=5), st.integers(0, 2**40))
def test_the_reconciliation_time_never_passes_a_replica_nor_falls_below_the_fence(
    hlcs, fence
) -> None:
    t = reconciliation_time(hlcs, write_timeout_ms=1000, slack_ms=100, fence=fence)
    assert t >= fence
    assert t <= min(hlcs) or t == fence


def test_the_span_digests_start_at_each_tokens_old_bound() -> None:
    """After a merge the old bounds differ per token: each id counts from its own token's."""
    entries = [(i, 10 if i.node == 1 else 30) for i in UNIVERSE]  # node 1's at token 10
    old = RangeMarks().raised(TokenRange(0, 20), UNIVERSE[3].hlc)  # only token 10's side
    new = UNIVERSE[-1].hlc
    span = span_digests(entries, old, new)
    expected = [i for i, token in entries if (old.at(token) <= i.hlc < new)]
    assert span == LogDigests.of(expected, low_bound=0)
    assert {i.node for i in expected} == {1, 2} and len(expected) < len(UNIVERSE) - 1
    assert span != span_digests([e for e in entries if e[0] != expected[0]], old, new)
    with pytest.raises(ValueError, match="a low bound is an HLC"):
        span_digests(entries, old, -1)
