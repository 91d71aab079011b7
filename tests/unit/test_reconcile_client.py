"""The SDK's reconcile client: reconcilers' Status answers become domain values, merged so that
each range is shown as its owner reports it (the only one that knows its bound and lag), a range
nobody answering owns as the newest epoch reports it, by keyspace then range; a reconciler that
cannot be reached raises ``Unavailable`` naming its address."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from epochal.errors import Unavailable
from epochal.mtrack import make_hlc
from epochal.reconcile_client import RangeStatus, ReconcileClient, ReconcilerAnswer, merge
from epochal.runtime.processes import free_ports
from epochal.status import code_of
from epochal.tcm.tokens import TokenRange
from epochal.wire.v1 import reconciler_pb2 as pb

from .fake_reconciler import reconciler, report

BOUND = make_hlc(1_700_000_000_123, 2)
A, B, C = TokenRange(-100, 0), TokenRange(0, 100), TokenRange(100, -100)  # C wraps


def ranges_of(reconciler_id: str, **owners: str) -> tuple[RangeStatus, ...]:
    """Ranges A, B, C of keyspace ks as ``reconciler_id`` reports them: owners by range name;
    the ones it owns itself with a bound, a lag and a round."""
    reports = []
    for name, token_range in (("A", A), ("B", B), ("C", C)):
        owner = owners.get(name, "")
        mine = bool(owner) and owner == reconciler_id
        reports.append(
            RangeStatus(
                keyspace="ks",
                range=token_range,
                owner=owner,
                lease_token=7 if owner else 0,
                reported_by=reconciler_id,
                low_bound=BOUND if mine else 0,
                lag_ms=40 if mine else None,
                last_outcome="advanced" if mine else "",
                rounds=3 if mine else 0,
            )
        )
    return tuple(reports)


def answer(reconciler_id: str, epoch: int, **owners: str) -> ReconcilerAnswer:
    return ReconcilerAnswer(
        address=f"{reconciler_id}:1",
        reconciler_id=reconciler_id,
        epoch=epoch,
        ranges=ranges_of(reconciler_id, **owners),
    )


def test_each_range_is_shown_as_its_owner_reports_it() -> None:
    merged = merge([answer("r1", 30, A="r1", B="r2"), answer("r2", 30, A="r1", B="r2")]).ranges
    assert [(r.range, r.reported_by, r.rounds) for r in merged] == [
        (A, "r1", 3),  # r1's own report, with its bound
        (B, "r2", 3),  # r2's
        (C, "r1", 0),  # nobody's: the newest epoch's report (a tie: the first asked)
    ]
    assert merged[0].low_bound == BOUND and merged[0].lag_ms == 40


def test_the_owner_is_the_one_the_newest_epoch_names() -> None:
    """r1 still says it owns A at epoch 30; at epoch 31 the lease went to r3, which was not
    asked: A is shown as the newest epoch has it (owner r3, nothing known of its rounds)."""
    merged = merge([answer("r1", 30, A="r1"), answer("r2", 31, A="r3")]).ranges
    assert (merged[0].owner, merged[0].reported_by, merged[0].rounds) == ("r3", "r2", 0)


def test_ranges_are_ordered_by_keyspace_then_range_and_counted() -> None:
    other = RangeStatus(keyspace="a", range=B, owner="", lease_token=0, reported_by="r1")
    status = merge(
        [
            ReconcilerAnswer(
                address="r1:1",
                reconciler_id="r1",
                epoch=5,
                ranges=(*ranges_of("r1", C="r1", B="r2"), other),
            )
        ]
    )
    assert [(r.keyspace, r.range) for r in status.ranges] == [
        ("a", B),
        ("ks", A),
        ("ks", B),
        ("ks", C),
    ]
    assert (status.owned, status.unowned, status.max_lag_ms) == (2, 2, 40)
    assert merge([]).max_lag_ms is None


def test_the_client_asks_every_reconciler_and_answers_domain_values() -> None:
    first = pb.ReconcilerStatus(
        reconciler_id="r1",
        epoch=30,
        ranges=[
            report("ks", 0, 100, "r2", 12),
            report(
                "ks",
                -100,
                0,
                "r1",
                11,
                low_bound=BOUND,
                lag_ms=40,
                last_outcome="advanced",
                rounds=3,
                delivered=9,
            ),
        ],
    )
    second = pb.ReconcilerStatus(
        reconciler_id="r2",
        epoch=30,
        ranges=[report("ks", 0, 100, "r2", 12, rounds=1, last_outcome="delivered")],
    )

    async def scenario() -> None:
        async with (
            reconciler(first) as one,
            reconciler(second) as two,
            ReconcileClient([one, two]) as reconcilers,
        ):
            status = await reconcilers.status()
        assert [(a.address, a.reconciler_id, a.epoch) for a in status.reconcilers] == [
            (one, "r1", 30),
            (two, "r2", 30),
        ]
        assert status.ranges == (
            RangeStatus(
                keyspace="ks",
                range=A,
                owner="r1",
                lease_token=11,
                reported_by="r1",
                low_bound=BOUND,
                lag_ms=40,
                last_outcome="advanced",
                last_round_unix_ms=1_700_000_000_000,
                rounds=3,
                delivered=9,
            ),
            RangeStatus(
                keyspace="ks",
                range=B,
                owner="r2",
                lease_token=12,
                reported_by="r2",
                lag_ms=None,  # -1 on the wire: no advance yet
                last_outcome="delivered",
                last_round_unix_ms=1_700_000_000_000,
                rounds=1,
            ),
        )

    asyncio.run(scenario())


def test_an_unreachable_reconciler_raises_unavailable_naming_its_address() -> None:
    answering = pb.ReconcilerStatus(reconciler_id="r1", epoch=1)
    nobody = f"127.0.0.1:{free_ports(1)[0]}"

    async def scenario() -> None:
        async with reconciler(answering) as one, ReconcileClient([one, nobody]) as reconcilers:
            with pytest.raises(Unavailable) as unreachable:
                await reconcilers.status(timeout_s=2.0)
        assert f"reconciler {nobody}: " in unreachable.value.message
        assert code_of(unreachable.value) is grpc.StatusCode.UNAVAILABLE

    asyncio.run(scenario())
