"""What the reconciler does with each way a call to a replica can fail (epochal.reconciler.status),
against stub ``ReplicaReconcile`` servers on 127.0.0.1 driven through the real ReplicaClient and
a real Round: only no answer — the connection failed, the channel closed, the deadline passed,
or a replica that hangs — leaves a replica out of the round (and only that counts towards a
cohort without it); an overloaded replica ends the round and the deliveries back off; a replica
that refuses ends the round with its reason; a replica lacking the method (another version)
ends the round, logged once per replica and method. Every gRPC status has a case."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from epochal.mtrack import LogDigests, make_hlc
from epochal.mtrack.leases import HolderLease
from epochal.mtrack.range_calls import RangeRef
from epochal.reconciler.leases import Leases, Target
from epochal.reconciler.pacing import Pacer, RangePace
from epochal.reconciler.replica_client import ReplicaClient
from epochal.reconciler.rounds import Round, RoundResult
from epochal.reconciler.status import (
    REACTIONS,
    Reaction,
    ReplicaOverloaded,
    ReplicaRefused,
    Unreachable,
    VersionMismatch,
)
from epochal.tcm.tokens import TokenRange
from epochal.wire.channels import Channels
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc

from .local_server import serving

RANGE = TokenRange(0, 1_000)
REF = RangeRef(1, "ks", RANGE, 1, ("a", "b", "c"))
FAILURES = sorted(set(grpc.StatusCode) - {grpc.StatusCode.OK}, key=lambda c: c.value[0])
STATE_TIMEOUT_S = 0.3
RPC_TIMEOUT_S = 5.0
EXPECTED: dict[Reaction, type[Exception]] = {
    Reaction.LEAVE_OUT: Unreachable,
    Reaction.BACK_OFF: ReplicaOverloaded,
    Reaction.REFUSED: ReplicaRefused,
    Reaction.VERSION: VersionMismatch,
}
OUTCOMES = {
    Reaction.LEAVE_OUT: "partial",
    Reaction.BACK_OFF: "overloaded",
    Reaction.REFUSED: "refused",
    Reaction.VERSION: "version_mismatch",
}


class StubReplica(replica_pb2_grpc.ReplicaReconcileServicer):
    """A replica's reconcile service that answers every state call with ``failing`` (None: a
    replica with an empty log of the range; ``hang``: never answers), and summaries of nothing."""

    def __init__(
        self,
        failing: grpc.StatusCode | None = None,
        *,
        hang: bool = False,
        garbled: bool = False,
        outcome: int = pb.OK,
        delay_s: float = 0.0,
        hlc: int | None = None,
        trailers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.outcome = outcome  # a refusal in the reply (LAPSED, ...), after ``delay_s``
        self.hlc = hlc  # the clock it reports (None: its own)
        self.delay_s = delay_s
        self.failing = failing
        self.hang = hang
        self.garbled = garbled  # answers with a low bound that is no HLC
        self.trailers = trailers
        self.calls = 0

    async def RangeState(
        self, request: pb.RangeStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.RangeStateResponse:
        self.calls += 1
        if self.hang:
            await asyncio.Event().wait()  # stopped: the call ends at its deadline
        if self.failing is not None:
            context.set_trailing_metadata(self.trailers)
            await context.abort(self.failing, f"the stub answers {self.failing.name}")
        await asyncio.sleep(self.delay_s)
        if self.outcome != pb.OK:
            return pb.RangeStateResponse(outcome=self.outcome, message="the stub refuses")
        return pb.RangeStateResponse(
            outcome=pb.OK,
            hlc=make_hlc(time.time_ns() // 1_000_000) if self.hlc is None else self.hlc,
            window_ends=[0] * len(request.window_from),
            low_bounds=[pb.RangeMark(hlc=(1 << 64) - 1)] if self.garbled else [],
        )

    async def RangeSummary(
        self, request: pb.RangeSummaryRequest, context: grpc.aio.ServicerContext
    ) -> pb.RangeSummaryResponse:
        return pb.RangeSummaryResponse(outcome=pb.OK, summary=LogDigests.of([]).encode())


@contextlib.asynccontextmanager
async def replicas(c: StubReplica | None) -> AsyncIterator[dict[str, str]]:
    """Replicas a and b that answer, and c as given (None: a server without the reconcile
    service at all, as a replica of another version would be)."""
    add = replica_pb2_grpc.add_ReplicaReconcileServicer_to_server
    async with contextlib.AsyncExitStack() as stack:
        addresses = {
            "a": await stack.enter_async_context(serving(StubReplica(), add)),
            "b": await stack.enter_async_context(serving(StubReplica(), add)),
            "c": await stack.enter_async_context(
                serving(c, add) if c is not None else serving(object())
            ),
        }
        yield addresses


def client(channels: Channels) -> ReplicaClient:
    return ReplicaClient(channels, timeout_s=RPC_TIMEOUT_S, state_timeout_s=STATE_TIMEOUT_S)


async def one_round(addresses: dict[str, str], pacer: Pacer) -> RoundResult:
    channels = Channels()
    try:
        lease = HolderLease(token=1, lease_ms=10_000, margin_ms=2_000)
        lease.renewed(time.monotonic() * 1000)
        round_ = Round(
            REF,
            addresses,
            client(channels),
            lease,
            pacer,
            lambda: True,
            500,  # write timeout
            1_000,  # slack
            100,  # batch
            50,  # window
            250,  # interval
            advance=False,
        )
        return await round_.run()
    finally:
        await channels.close()


async def state_of_c(c: StubReplica | None) -> Exception:
    async with replicas(c) as addresses:
        channels = Channels()
        try:
            await client(channels).state(addresses["c"], REF, claim=True, lease_ms=10_000)
        except Exception as error:
            return error
        finally:
            await channels.close()
    raise AssertionError("the state call succeeded")


@pytest.mark.parametrize("code", FAILURES, ids=lambda c: c.name)
def test_each_status_of_a_state_call_is_its_error_of_the_family(code: grpc.StatusCode) -> None:
    error = asyncio.run(state_of_c(StubReplica(code)))
    reaction = REACTIONS[code]
    assert type(error) is EXPECTED[reaction], (code, error)
    assert error.status == code.name  # type: ignore[attr-defined]
    assert "127.0.0.1:" in str(error), "the error names the replica"
    if reaction is not Reaction.LEAVE_OUT:
        assert f"the stub answers {code.name}" in str(error), "and what it said"


@pytest.mark.parametrize("code", FAILURES, ids=lambda c: c.name)
def test_only_a_replica_that_gave_no_answer_is_left_out_of_the_round(
    code: grpc.StatusCode,
) -> None:
    async def scenario() -> tuple[RoundResult, Pacer]:
        pacer = Pacer(1_000)
        async with replicas(StubReplica(code)) as addresses:
            return await one_round(addresses, pacer), pacer

    result, pacer = asyncio.run(scenario())
    reaction = REACTIONS[code]
    assert result.outcome == OUTCOMES[reaction], (code, result.outcome, result.detail)
    if reaction is Reaction.LEAVE_OUT:
        # a and b compared their logs without c, and the range counts as split from c
        assert result.unreachable == ("c",) and result.sides == (("a", "b"),)
        pace = RangePace(advance_s=5.0)
        pace.after(100.0, result, advance=False, sizes=False)
        assert pace.split_since == {("a", "b"): 100.0}
        assert pace.silent == {("a", "b"): frozenset("c")}  # left out for giving no answer
    else:
        # c answered: not left out, no side formed; the clock of a side that left c out for
        # giving no answer stops (a missed deadline later must not fold at once), while one
        # apart from c by reach (c answers the reconciler, not its peers) runs on
        assert result.unreachable == () and result.sides == () and not result.whole
        assert "127.0.0.1:" in result.detail
        assert set(result.answered) == {"a", "b", "c"}
        silent = RangePace(
            advance_s=5.0, split_since={("a", "b"): 1.0}, silent={("a", "b"): frozenset("c")}
        )
        silent.after(100.0, result, advance=False, sizes=False)
        assert silent.split_since == {}
        by_reach = RangePace(
            advance_s=5.0, split_since={("a", "b"): 1.0}, silent={("a", "b"): frozenset()}
        )
        by_reach.after(100.0, result, advance=False, sizes=False)
        assert by_reach.split_since == {("a", "b"): 1.0}
    assert pacer.share == (0.5 if reaction is Reaction.BACK_OFF else 1.0)


def test_a_refusal_keeps_the_rule_the_replica_named() -> None:
    stub = StubReplica(grpc.StatusCode.INVALID_ARGUMENT, trailers=(("epochal-rule", "malformed"),))
    error = asyncio.run(state_of_c(stub))
    assert isinstance(error, ReplicaRefused) and error.outcome == "malformed"


def test_a_replica_that_hangs_is_left_out_once_its_state_deadline_passes() -> None:
    async def scenario() -> tuple[RoundResult, float]:
        async with replicas(StubReplica(hang=True)) as addresses:
            started = time.monotonic()
            result = await one_round(addresses, Pacer(1_000))
            return result, time.monotonic() - started

    result, seconds = asyncio.run(scenario())
    assert result.outcome == "partial" and result.unreachable == ("c",)
    assert seconds < RPC_TIMEOUT_S, "the state call's own deadline, not every call's"


def test_a_replica_of_another_version_ends_rounds_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> list[RoundResult]:
        async with replicas(None) as addresses:
            channels = Channels()
            try:
                shared = client(channels)
                for _ in range(2):
                    with pytest.raises(VersionMismatch) as raised:
                        await shared.state(addresses["c"], REF)
                    assert raised.value.method == "epochal.v1.ReplicaReconcile/RangeState"
            finally:
                await channels.close()
            return [await one_round(addresses, Pacer(1_000)) for _ in range(2)]

    with caplog.at_level(logging.ERROR, logger="epochal.reconciler.replica_client"):
        results = asyncio.run(scenario())
    assert [r.outcome for r in results] == ["version_mismatch"] * 2
    assert all(r.unreachable == () for r in results)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines  # once per client (the test's, and each round's): not per call
    assert all("ReplicaReconcile/RangeState" in line and "127.0.0.1:" in line for line in lines)


def test_a_reply_that_does_not_read_is_the_replicas_refusal() -> None:
    """A state reply this reconciler cannot read (another version's, or a bug's) ends the round
    as refused, naming the replica — not a traceback in the worker, not a replica left out."""
    for garbled in (StubReplica(garbled=True), StubReplica(hlc=(1 << 64) - 1)):
        error = asyncio.run(state_of_c(garbled))
        assert isinstance(error, ReplicaRefused) and error.outcome == "malformed_reply", error

    async def scenario() -> RoundResult:
        async with replicas(StubReplica(garbled=True)) as addresses:
            return await one_round(addresses, Pacer(1_000))

    result = asyncio.run(scenario())
    assert result.outcome == "refused" and "malformed_reply" in result.detail
    assert result.unreachable == () and set(result.answered) == {"a", "b", "c"}


class EpochOnly:
    """The follower a lease renewal reads: only the epoch."""

    epoch = 1


def test_a_renewal_counts_the_majority_without_waiting_on_a_replica_that_hangs() -> None:
    """Renewing a lease while one replica hangs (stopped): "ok" once two of three renewed,
    long before the state deadline (one renewal pass must not take a deadline per range)."""

    async def renew(c: StubReplica, every: bool = False) -> tuple[str, float]:
        async with replicas(c) as addresses:
            channels = Channels()
            try:
                leases = Leases(
                    "rec-1",
                    EpochOnly(),  # type: ignore[arg-type]
                    None,  # type: ignore[arg-type]
                    ReplicaClient(channels, timeout_s=RPC_TIMEOUT_S, state_timeout_s=3.0),
                    None,  # type: ignore[arg-type]
                    lease_ms=10_000,
                    margin_ms=4_000,
                    max_ranges=0,
                )
                lease = HolderLease(token=1, lease_ms=10_000, margin_ms=4_000)
                started = time.monotonic()
                outcome = await leases.renew(Target("ks", RANGE, addresses), lease, every=every)
                return outcome, time.monotonic() - started
            finally:
                await channels.close()

    outcome, seconds = asyncio.run(renew(StubReplica(hang=True)))
    assert outcome == "ok" and seconds < 2.0, seconds
    # Taking a lease hears every replica out: one that saw the token lapse, answering last,
    # is heard (the caller then grants a new token instead of taking one that is refused).
    lapsed = StubReplica(outcome=pb.LAPSED, delay_s=0.3)
    assert asyncio.run(renew(lapsed, every=True))[0] == "lapsed"
