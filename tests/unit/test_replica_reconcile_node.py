"""What a replica does for a reconciler (epochal.replica.reconcile_node), in process on a real
SQLite file: the lease rules — an action needs a claim renewed within the lease, a lapsed lease is
not renewed, a token below a newer claim or a grant in the metadata log is refused — and the
range summary's per-token low bounds and upper end."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from epochal.mtrack import LogDigests, make_hlc
from epochal.mtrack.marks import Mark, RangeMarks
from epochal.mtrack.range_calls import RangeRef
from epochal.replica import reconcile_node
from epochal.replica.coordinator import Coordinator
from epochal.replica.local_replica import LocalReplica, Outcome
from epochal.replica.reconcile_node import ReconcileNode, Refused
from epochal.replica.reconcile_store import MarkKind
from epochal.replica.storage import ReplicaStorage
from epochal.tcm.leases import GrantReconcileLease
from epochal.tcm.tokens import MAX_TOKEN, TokenRange
from epochal.wire.channels import Channels

from .local_node import RING, cluster, mutation, replica, submit
from .seed_ring import Cluster

LEASE_MS = 1_000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    ticking = Clock()
    monkeypatch.setattr(reconcile_node, "_now_ms", ticking)
    return ticking


def node(storage: ReplicaStorage, made: Cluster) -> tuple[ReconcileNode, LocalReplica]:
    local = replica(storage, made)
    coordinator = Coordinator(local.settings, local.follower, local, Channels(), local.metrics)
    return (
        ReconcileNode(local.settings, local, local.follower, coordinator, storage, local.metrics),
        local,
    )


def ref(made: Cluster, token: int, replicas: tuple[str, ...] | None = None) -> RangeRef:
    every = tuple(made.ids.values()) if replicas is None else replicas
    return RangeRef(made.md.epoch, "tr", RING, token, every)


def refused(call: object) -> Refused:
    with pytest.raises(Refused) as caught:
        asyncio.run(call)  # type: ignore[arg-type]
    return caught.value


def test_an_action_needs_a_claim_renewed_within_the_lease(storage, clock) -> None:
    made = cluster()
    reconciler, _ = node(storage, made)
    hlc = make_hlc(1_000)
    first = refused(reconciler.fence(ref(made, 7), hlc))
    assert first.outcome is Outcome.LAPSED and "not claimed" in first.message
    asyncio.run(reconciler.state(ref(made, 7), claim=True, lease_ms=LEASE_MS))
    assert asyncio.run(reconciler.fence(ref(made, 7), hlc)).outcome is Outcome.OK
    clock.ms += LEASE_MS  # a pause as long as the lease: nothing it sent since was renewed
    late = refused(reconciler.fence(ref(made, 7), hlc + 1))
    assert late.outcome is Outcome.LAPSED
    renewal = refused(reconciler.state(ref(made, 7), claim=True, lease_ms=LEASE_MS))
    assert renewal.outcome is Outcome.LAPSED  # only a new grant may act now
    asyncio.run(reconciler.state(ref(made, 8), claim=True, lease_ms=LEASE_MS))
    assert asyncio.run(reconciler.fence(ref(made, 8), hlc + 1)).outcome is Outcome.OK
    assert reconciler.fence_of(ref(made, 8)) == hlc + 1


def test_a_replica_behind_answers_a_state_call_within_its_deadline(storage, clock) -> None:
    """A reconciler's state call has a short deadline (``--state-timeout-ms``): a replica that
    cannot catch up to the call's epoch in that time answers BEHIND — a refusal, which ends the
    round — rather than nothing, which would leave it out of the round as if cut off."""
    made = cluster()
    reconciler, local = node(storage, made)
    ahead = replace(ref(made, 7), epoch=made.md.epoch + 1)
    assert local.settings.catch_up_timeout_ms >= 2_000
    started = time.monotonic()
    behind = refused(reconciler.state(ahead, claim=True, lease_ms=LEASE_MS, wait_s=0.05))
    assert behind.outcome is Outcome.BEHIND
    assert time.monotonic() - started < 1.0, "within the call's wait, not the catch-up timeout"


def test_a_newer_claim_or_grant_supersedes_an_older_token(storage, clock) -> None:
    made = cluster()
    reconciler, local = node(storage, made)
    asyncio.run(reconciler.state(ref(made, 7), claim=True, lease_ms=LEASE_MS))
    asyncio.run(reconciler.state(ref(made, 9), claim=True, lease_ms=LEASE_MS))  # a successor
    old = refused(reconciler.summary(ref(made, 7), RangeMarks(), 0, (), 0))
    assert old.outcome is Outcome.SUPERSEDED and "highest seen here is 9" in old.message
    refused(reconciler.state(ref(made, 7), claim=True, lease_ms=LEASE_MS))
    # A grant committed to the log is a token too, before anyone claims it here.
    made.apply(GrantReconcileLease(keyspace="tr", range=RING, holder="r2", replaces=0))
    local.follower._set(made.md, ())
    grant_epoch = made.md.epoch
    assert grant_epoch > 9
    stale = refused(reconciler.summary(ref(made, 9), RangeMarks(), 0, (), 0))
    assert f"highest seen here is {grant_epoch}" in stale.message
    state = asyncio.run(reconciler.state(ref(made, grant_epoch), claim=True, lease_ms=LEASE_MS))
    assert state.lease_token == grant_epoch and state.lease_idle_ms == 0


def test_a_range_summary_counts_ids_from_the_bounds_per_token_up_to_below(storage, clock) -> None:
    made = cluster()
    reconciler, local = node(storage, made)
    writes = [
        mutation(made, 1, make_hlc(1_000), token=10),
        mutation(made, 2, make_hlc(3_000), token=10),
        mutation(made, 3, make_hlc(1_000), token=500),
        mutation(made, 4, make_hlc(3_000), token=500),
        mutation(made, 5, make_hlc(9_000), token=500),
    ]

    async def scenario() -> None:
        for write in writes:
            assert (await submit(local, write)).outcome is Outcome.OK
        await reconciler.state(ref(made, 1), claim=True, lease_ms=LEASE_MS)
        bounds = RangeMarks((Mark(TokenRange(0, 100), make_hlc(2_000)),))
        digests, sketch = await reconciler.summary(
            ref(made, 1), bounds, make_hlc(5_000), [(1, 1)], 9
        )
        assert digests == LogDigests.of([writes[1].id, writes[2].id, writes[3].id])
        assert sketch is not None and set(sketch.ids or ()) == {
            writes[1].id,
            writes[2].id,
            writes[3].id,
        }
        state = await reconciler.state(ref(made, 1), sizes=True)
        assert state.log_entries == 5 and state.log_bytes > 0 and state.fence == 0
        assert storage.reconcile.marks("tr", MarkKind.LOW_BOUND).pieces == ()

    asyncio.run(scenario())


def test_a_window_ends_after_its_ids_from_the_bounds_or_a_start(storage, clock) -> None:
    made = cluster()
    reconciler, local = node(storage, made)
    # Ids at 1..6 s, on both sides of the whole ring's wrap (two segments), token 10 bounded.
    writes = [
        mutation(made, n, make_hlc(n * 1_000), token=10 if n % 2 else MAX_TOKEN - n)
        for n in range(1, 7)
    ]

    async def scenario() -> None:
        for write in writes:
            assert (await submit(local, write)).outcome is Outcome.OK
        window = await reconciler.state(
            ref(made, 1),
            claim=True,
            lease_ms=LEASE_MS,
            window_ids=2,
            window_from=(0, make_hlc(2_500), make_hlc(5_000)),
        )
        # From the bound: ids at 1 and 2 s lie below the third's time; from 2.5 s: 3 and 4 s;
        # from 5 s: only two ids (5 and 6 s) above, so no end.
        assert window.window_ends == (make_hlc(3_000), make_hlc(5_000), 0)
        # One segment (a non-wrapping piece) answers the same way.
        assert storage.data.window_end("tr", [(0, 100, 0)], 1) == make_hlc(3_000)
        assert storage.data.window_end("tr", [(0, 100, make_hlc(4_000))], 1) == 0
        # The replica's own low bound at a token counts: ids below it are not in a window.
        with storage.reconcile.transaction() as cursor:
            marks = storage.reconcile.stage(
                cursor, "tr", MarkKind.LOW_BOUND, TokenRange(0, 100), make_hlc(4_000)
            )
        storage.reconcile.committed("tr", MarkKind.LOW_BOUND, marks)
        window = await reconciler.state(ref(made, 1), window_ids=2, window_from=(0,))
        assert window.window_ends == (make_hlc(5_000),)  # 2 s, 4 s below it; 1 s, 3 s bounded
        with pytest.raises(Refused, match="window_ids"):
            await reconciler.state(ref(made, 1), window_ids=0, window_from=(0,))
        with pytest.raises(Refused, match="at most 4 windows"):
            await reconciler.state(ref(made, 1), window_ids=2, window_from=(0,) * 5)
        with pytest.raises(Refused, match=r"0\.\.2\^63-1") as caught:
            await reconciler.state(ref(made, 1), window_ids=2, window_from=(2**63,))
        assert caught.value.outcome is Outcome.MALFORMED

    asyncio.run(scenario())


def test_a_range_not_of_tokens_or_of_an_untracked_keyspace_is_refused(storage, clock) -> None:
    made = cluster()
    reconciler, _ = node(storage, made)
    bad = refused(reconciler.state(RangeRef(made.md.epoch, "tr", TokenRange(1, 2**63), 1)))
    assert bad.outcome is Outcome.MALFORMED
    unknown = refused(reconciler.state(RangeRef(made.md.epoch, "nope", RING, 1)))
    assert unknown.outcome is Outcome.UNKNOWN_TABLE
    lease = refused(reconciler.state(ref(made, 1), claim=True, lease_ms=0))
    assert lease.outcome is Outcome.MALFORMED


def test_a_fence_names_the_rounds_replicas_and_a_changed_set_is_refused(storage, clock) -> None:
    """A round that did not see a replica join must not fence or advance: the replica the round
    never saw would miss what the bound collects."""
    made = cluster()
    reconciler, _ = node(storage, made)
    asyncio.run(reconciler.state(ref(made, 7), claim=True, lease_ms=LEASE_MS))
    stale = refused(reconciler.fence(ref(made, 7, replicas=("node-9",)), make_hlc(1_000)))
    assert stale.outcome is Outcome.NOT_A_REPLICA and "start the round again" in stale.message
    assert reconciler.fence_of(ref(made, 7)) == 0
