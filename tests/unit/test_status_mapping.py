"""Expected errors -> gRPC statuses (one table per service) -> the SDK's errors, and back: every
error a service answers keeps its class, rule and fields across the wire — a consistency
failure's replicas' outcome too, as a binary trailer of a unary call (kept small) and in a
Session's failure."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import grpc
import pytest

from epochal.cms import status as cms_status
from epochal.cms.codec import outcome_to_proto, settle_from_outcome
from epochal.encoding import reply_or_raise
from epochal.errors import (
    Aborted,
    ClockSkew,
    CommitTimeout,
    EpochalError,
    GuardClosed,
    InvalidRequest,
    NotLeader,
    OperationRefused,
    Overloaded,
    Rejected,
    ReplicaOutcome,
    ShuttingDown,
    StalePlan,
    StreamRefused,
    TimedOut,
    Unavailable,
)
from epochal.mtrack import MutationId, make_hlc
from epochal.replica import status as replica_status
from epochal.replica.client_servicer import ReplicaServicer
from epochal.status import from_rpc_error
from epochal.wire.channels import channel as open_channel
from epochal.wire.status import (
    MAX_REPLICAS_TRAILER_BYTES,
    error_for,
    replicas_from_trailer,
    replicas_trailer,
    status_of,
    trailers_of,
)
from epochal.wire.tls import INSECURE
from epochal.wire.v1 import replica_pb2, replica_pb2_grpc

from .local_server import serving

CMS_ANSWERS = [
    (InvalidRequest("entry_id is required"), grpc.StatusCode.INVALID_ARGUMENT),
    (Rejected("table_exists", "table ks.t already exists"), grpc.StatusCode.FAILED_PRECONDITION),
    (NotLeader("cms2"), grpc.StatusCode.UNAVAILABLE),
    (ShuttingDown("cms1 is shutting down"), grpc.StatusCode.UNAVAILABLE),
    (CommitTimeout("not chosen in time"), grpc.StatusCode.UNAVAILABLE),
    (Overloaded("1000 values already pending"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Unavailable("no quorum"), grpc.StatusCode.UNAVAILABLE),
]
REPLICA_ANSWERS = [
    (InvalidRequest("no column c"), grpc.StatusCode.INVALID_ARGUMENT),
    (
        ClockSkew(remote="r", local="l", ahead_ms=9, max_skew_ms=5),
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    (OperationRefused("name the dead node"), grpc.StatusCode.FAILED_PRECONDITION),
    (GuardClosed("left START"), grpc.StatusCode.FAILED_PRECONDITION),
    (Unavailable("too few replicas", mutation_id="00ff"), grpc.StatusCode.UNAVAILABLE),
    (StalePlan("group changed"), grpc.StatusCode.UNAVAILABLE),
    (StreamRefused("no source"), grpc.StatusCode.UNAVAILABLE),
    (TimedOut("timed out"), grpc.StatusCode.DEADLINE_EXCEEDED),
    (Overloaded("too many in flight"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Aborted("the operation was aborted"), grpc.StatusCode.ABORTED),
]


@pytest.mark.parametrize(("error", "code"), CMS_ANSWERS, ids=lambda v: type(v).__name__)
def test_the_cms_answers_each_error_with_its_status(error: EpochalError, code: object) -> None:
    assert cms_status.code_of(error) is code


@pytest.mark.parametrize(("error", "code"), REPLICA_ANSWERS, ids=lambda v: type(v).__name__)
def test_the_replica_answers_each_error_with_its_status(error: EpochalError, code: object) -> None:
    assert replica_status.code_of(error) is code


def test_an_error_a_service_never_answers_is_internal(caplog: pytest.LogCaptureFixture) -> None:
    assert cms_status.code_of(Aborted("not a CMS error")) is grpc.StatusCode.INTERNAL
    assert cms_status.code_of(EpochalError("a bug")) is grpc.StatusCode.INTERNAL
    internal = replica_status.expected(RuntimeError("boom"))
    assert replica_status.code_of(internal) is grpc.StatusCode.INTERNAL
    # A bug is logged with its traceback; the caller is told it was one, not its Python text.
    assert internal.rule == "internal" and internal.message.startswith("internal error")
    assert "RuntimeError" not in internal.message and "boom" not in internal.message
    assert caplog.records[-1].exc_info is not None and "boom" in caplog.text


@pytest.mark.parametrize(
    ("error", "code"), CMS_ANSWERS + REPLICA_ANSWERS, ids=lambda v: type(v).__name__
)
def test_the_sdk_rebuilds_what_the_server_raised(error: EpochalError, code: object) -> None:
    trailers = dict(trailers_of(error, epoch=7))
    rebuilt = error_for(
        status_of(error, {**cms_status.STATUS, **replica_status.STATUS}),
        error.message,
        rule=trailers.get("epochal-rule", ""),
        epoch=int(trailers["epochal-epoch"]),
        mutation_id=trailers.get("epochal-mutation-id", ""),
        leader_id=trailers.get("epochal-leader-id", ""),
    )
    # The classes a client tells apart come back as themselves; the rest as their family.
    expected = type(error)
    if expected in (ClockSkew, OperationRefused, GuardClosed):
        expected = Rejected
    if expected is StreamRefused:
        expected = Unavailable
    if expected is Aborted:
        expected = EpochalError
    assert type(rebuilt) is expected
    assert (rebuilt.message, rebuilt.rule, rebuilt.epoch) == (error.message, error.rule, 7)
    assert rebuilt.mutation_id == error.mutation_id
    assert rebuilt.status == code.name  # type: ignore[attr-defined]
    if isinstance(error, NotLeader):
        assert rebuilt.leader_id == error.leader_id  # type: ignore[attr-defined]


def test_a_forwarded_commit_learns_the_leader_from_a_field_and_from_an_older_member() -> None:
    asyncio.run(_forwarded_not_leader())


async def _forwarded_not_leader() -> None:
    loop = asyncio.get_running_loop()
    current = loop.create_future()
    settle_from_outcome(current, outcome_to_proto(NotLeader("cms3"), 0))
    assert isinstance(current.exception(), NotLeader)
    assert current.exception().leader_id == "cms3"  # type: ignore[union-attr]

    older = outcome_to_proto(NotLeader(None), 0)
    older.error.rule, older.error.leader_id = "not_leader:cms2", ""
    legacy = loop.create_future()
    settle_from_outcome(legacy, older)
    assert current.exception() is not legacy.exception()
    assert legacy.exception().leader_id == "cms2"  # type: ignore[union-attr]


# ---------------------------------------------------------------------- the replicas' outcome

MUTATION_ID = MutationId(node=1, log=1, sequence=5, hlc=make_hlc(1_000)).pack().hex()
TIMED_OUT = TimedOut(
    "ALL write of token 7 timed out after 2000 ms: ...",
    mutation_id=MUTATION_ID,
    replicas=ReplicaOutcome(
        consistency="ALL",
        required=3,
        replicas=("node-1", "node-2", "node-3"),
        acknowledged=("node-1",),
        refused=(("node-2", "fenced: below the fence 9"),),
        not_answering=(("node-3", "no answer within 2000 ms"),),
    ),
)


class Refusing(replica_pb2_grpc.ReplicaServicer):
    """A replica whose Write fails as a coordinator's does when too few replicas answer."""

    async def Write(
        self, request: replica_pb2.WriteRequest, context: grpc.aio.ServicerContext
    ) -> replica_pb2.WriteResponse:
        await replica_status.abort_with(context, TIMED_OUT, 7)
        raise AssertionError("unreachable")


def test_a_unary_failure_carries_the_replicas_outcome_in_a_binary_trailer() -> None:
    async def scenario() -> EpochalError:
        async with (
            serving(Refusing(), replica_pb2_grpc.add_ReplicaServicer_to_server) as address,
            open_channel(address, INSECURE) as channel,
        ):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await replica_pb2_grpc.ReplicaStub(channel).Write(replica_pb2.WriteRequest())
            return from_rpc_error(failed.value)

    rebuilt = asyncio.run(scenario())
    assert type(rebuilt) is TimedOut and rebuilt.message == TIMED_OUT.message
    assert (rebuilt.mutation_id, rebuilt.epoch) == (MUTATION_ID, 7)
    assert rebuilt.replicas == TIMED_OUT.replicas


def test_a_session_failure_carries_the_replicas_outcome() -> None:
    servicer = SimpleNamespace(follower=SimpleNamespace(epoch=7))
    failure = ReplicaServicer._failure(servicer, TIMED_OUT)  # type: ignore[arg-type]
    with pytest.raises(TimedOut) as rebuilt:
        reply_or_raise(replica_pb2.SessionReply(id=1, failure=failure))
    assert rebuilt.value.replicas == TIMED_OUT.replicas
    assert rebuilt.value.message == TIMED_OUT.message
    assert rebuilt.value.mutation_id == MUTATION_ID
    without = ReplicaServicer._failure(servicer, Unavailable("no quorum"))  # type: ignore[arg-type]
    assert not without.HasField("replicas")
    with pytest.raises(Unavailable) as plain:
        reply_or_raise(replica_pb2.SessionReply(id=2, failure=without))
    assert plain.value.replicas is None


def test_the_trailer_stays_small_whatever_the_reasons_say() -> None:
    """Three refusals of 2 KiB each: their reasons are cut to fit MAX_REPLICAS_TRAILER_BYTES,
    every node still named; an outcome too large even without reasons is not sent."""
    long = "x " * 1000
    nodes = ("node-1", "node-2", "node-3")
    wordy = ReplicaOutcome("ALL", 3, nodes, refused=tuple((n, long) for n in nodes))
    encoded = replicas_trailer(wordy)
    assert 0 < len(encoded) <= MAX_REPLICAS_TRAILER_BYTES
    cut = replicas_from_trailer(encoded)
    assert cut is not None and [n for n, _ in cut.refused] == list(nodes)
    assert all(len(why) < len(long) for _, why in cut.refused)
    many = tuple(f"node-{n}" for n in range(500))
    huge = ReplicaOutcome("ALL", 500, many, not_answering=tuple((n, "silent") for n in many))
    assert replicas_trailer(huge) == b""
    assert "epochal-replicas-bin" not in dict(trailers_of(Unavailable("x", replicas=huge), 1))
    assert replicas_from_trailer(b"\xff\xff not a message") is None
