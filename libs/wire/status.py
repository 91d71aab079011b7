"""Expected errors (``epochal.errors``) <-> gRPC statuses, for every service's gRPC layer and the
SDK. A service declares the statuses it answers in one table of its own (its ``status``
module) and aborts with ``abort``: the status, the message, and the error's fields as trailers
(``epochal-rule``, ``epochal-epoch``, ``epochal-mutation-id``, ``epochal-leader-id``, and
``epochal-replicas-bin``: a consistency failure's ``ReplicaOutcome`` as a serialized
``epochal.v1.ReplicaOutcome``). ``error_for`` turns a status and those fields back into the
family's error, for the SDK and for a CMS member answered by its leader.

Every status a server sets goes through ``abort_status`` (``abort``'s, and the bare statuses of
the handlers and streams), and every refusal a reply carries in-band (a Session failure, a peer
reply's outcome or ``malformed``, a reconcile or forwarded commit's outcome) is encoded through
``bounded_message``: a refusal may echo its input (a name, a value, a transformation), and a
status's details travel in gRPC metadata, where a client refuses more than 16 KiB (and may
refuse more than 8 KiB) — the caller then sees ``RESOURCE_EXHAUSTED`` "received metadata size
exceeds …" in place of the refusal."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NoReturn

import grpc
from google.protobuf.message import DecodeError

from epochal.errors import (
    CommitTimeout,
    EpochalError,
    InvalidRequest,
    NotLeader,
    Overloaded,
    PermissionDenied,
    Rejected,
    ReplicaOutcome,
    ShuttingDown,
    StalePlan,
    TimedOut,
    Unavailable,
)
from epochal.wire.v1 import replica_pb2

EPOCH_TRAILER = "epochal-epoch"
RULE_TRAILER = "epochal-rule"
MUTATION_ID_TRAILER = "epochal-mutation-id"
LEADER_TRAILER = "epochal-leader-id"
REPLICAS_TRAILER = "epochal-replicas-bin"  # binary (the "-bin" suffix): a serialized message

StatusTable = Mapping[type[EpochalError], grpc.StatusCode]

# The statuses of a call that got no answer from its server: the connection failed or broke
# (UNAVAILABLE; CANCELLED when the channel was closed under it) or the deadline passed. What a
# server said is an answer, whatever it said: only these say that it may be unreachable.
NO_ANSWER = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
)

# What a refusal keeps of an echoed input: each run of text without spaces (a name, a value, a
# key) to its first ECHO_CHARS characters, then "…" — enough to recognise it — and the whole
# message to MAX_MESSAGE_BYTES of UTF-8, which gRPC's percent-encoding of a status's details
# (a byte outside printable ASCII becomes three) keeps to 6 KiB, under its 8 KiB soft limit on
# metadata with room for the trailers. The runs are cut first so that a message keeps its own
# words (what was wrong, what to do) after a long echo; the whole is cut for input that has
# spaces.
ECHO_CHARS = 200
MAX_MESSAGE_BYTES = 2048
ELLIPSIS = "\u2026"
_LONG_RUN = re.compile(rf"\S{{{ECHO_CHARS + 1},}}")
# The replicas' outcome as a trailer is at most this many bytes serialized (a third more in
# base64 on the wire), which with the message's 6 KiB and the other trailers stays under the 8
# KiB: its reasons are cut shorter and shorter to fit (REASON_CHARS_TRIED), and an outcome too
# large even without them (a group of some hundred replicas) is not sent — the message still
# says what it can.
MAX_REPLICAS_TRAILER_BYTES = 1024
REASON_CHARS_TRIED = (ECHO_CHARS, 60, 0)

# The narrower errors an UNAVAILABLE answer names by its rule.
_UNAVAILABLE_BY_RULE: dict[str, type[Unavailable]] = {
    cls.RULE: cls for cls in (ShuttingDown, CommitTimeout, StalePlan)
}


def status_of(error: EpochalError, table: StatusTable) -> grpc.StatusCode:
    """The status ``table`` gives the error's class or its nearest ancestor (INTERNAL when the
    service never answers such an error: a bug)."""
    for cls in type(error).__mro__:
        code = table.get(cls)  # type: ignore[call-overload]
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


Trailers = Sequence[tuple[str, str | bytes]]


def trailers_of(error: EpochalError, epoch: int) -> tuple[tuple[str, str | bytes], ...]:
    trailers: list[tuple[str, str | bytes]] = [(EPOCH_TRAILER, str(error.epoch or epoch))]
    if error.rule:
        trailers.append((RULE_TRAILER, error.rule))
    if error.mutation_id:
        trailers.append((MUTATION_ID_TRAILER, error.mutation_id))
    if isinstance(error, NotLeader) and error.leader_id:
        trailers.append((LEADER_TRAILER, error.leader_id))
    if error.replicas is not None:
        encoded = replicas_trailer(error.replicas)
        if encoded:
            trailers.append((REPLICAS_TRAILER, encoded))
    return tuple(trailers)


def replicas_to_proto(
    outcome: ReplicaOutcome, reason_chars: int | None = None
) -> replica_pb2.ReplicaOutcome:
    """``outcome`` as its message; each reason as a refusal may say it (``bounded_message``),
    or cut to its first ``reason_chars`` characters."""

    def said(reason: str) -> str:
        if reason_chars is None or len(reason) <= reason_chars:
            return bounded_message(reason)
        return reason[:reason_chars] + ELLIPSIS if reason_chars else ""

    return replica_pb2.ReplicaOutcome(
        consistency=outcome.consistency,
        required=outcome.required,
        replicas=outcome.replicas,
        acknowledged=outcome.acknowledged,
        refused=[replica_pb2.NodeReason(node=n, reason=said(r)) for n, r in outcome.refused],
        not_answering=[
            replica_pb2.NodeReason(node=n, reason=said(r)) for n, r in outcome.not_answering
        ],
    )


def replicas_from_proto(message: replica_pb2.ReplicaOutcome) -> ReplicaOutcome:
    return ReplicaOutcome(
        consistency=message.consistency,
        required=message.required,
        replicas=tuple(message.replicas),
        acknowledged=tuple(message.acknowledged),
        refused=tuple((r.node, r.reason) for r in message.refused),
        not_answering=tuple((r.node, r.reason) for r in message.not_answering),
    )


def replicas_trailer(outcome: ReplicaOutcome) -> bytes:
    """``outcome`` serialized within MAX_REPLICAS_TRAILER_BYTES (b"": it does not fit)."""
    for reason_chars in REASON_CHARS_TRIED:
        encoded = replicas_to_proto(outcome, reason_chars).SerializeToString()
        if len(encoded) <= MAX_REPLICAS_TRAILER_BYTES:
            return encoded
    return b""


def replicas_from_trailer(value: str | bytes) -> ReplicaOutcome | None:
    """The outcome a REPLICAS_TRAILER carries (None when it is not one: a server's answer
    is read as it can be, never turned into a crash of the error path)."""
    if not isinstance(value, bytes):
        return None
    message = replica_pb2.ReplicaOutcome()
    try:
        message.ParseFromString(value)
    except DecodeError:
        return None
    return replicas_from_proto(message)


def bounded_message(message: str) -> str:
    """``message`` as a refusal may say it (see ECHO_CHARS): never longer than
    MAX_MESSAGE_BYTES as UTF-8, and always encodable."""
    if len(message) > ECHO_CHARS:
        message = _LONG_RUN.sub(lambda run: run.group()[:ECHO_CHARS] + ELLIPSIS, message)
    encoded = message.encode("utf-8", "replace")
    if len(encoded) <= MAX_MESSAGE_BYTES:
        return encoded.decode("utf-8")
    kept = MAX_MESSAGE_BYTES - len(ELLIPSIS.encode("utf-8"))
    return encoded[:kept].decode("utf-8", "ignore") + ELLIPSIS


async def abort_status(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    message: str,
    trailers: Trailers = (),
) -> NoReturn:
    """End the call with ``code`` and ``message`` (bounded): the one place a server sets a
    status's details."""
    if trailers:
        context.set_trailing_metadata(tuple(trailers))
    await context.abort(code, bounded_message(message))
    raise AssertionError("unreachable: context.abort raises")


async def abort(
    context: grpc.aio.ServicerContext, error: EpochalError, table: StatusTable, epoch: int = 0
) -> NoReturn:
    await abort_status(context, status_of(error, table), error.message, trailers_of(error, epoch))


def error_for(
    code: grpc.StatusCode,
    message: str,
    *,
    rule: str = "",
    epoch: int = 0,
    mutation_id: str = "",
    leader_id: str = "",
    replicas: ReplicaOutcome | None = None,
) -> EpochalError:
    """The error a failed answer stands for (an RPC's status, one a session answered in-band,
    or a leader's answer to a forwarded commit)."""
    fields = {
        "epoch": epoch,
        "mutation_id": mutation_id,
        "status": code.name,
        "replicas": replicas,
    }
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequest(message, rule=rule, **fields)
    if code is grpc.StatusCode.FAILED_PRECONDITION:
        return Rejected(rule, message, **fields)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(message, rule=rule, **fields)
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Overloaded(message, rule=rule, **fields)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return TimedOut(message, rule=rule, **fields)
    if code is grpc.StatusCode.UNAVAILABLE:
        if rule == NotLeader.RULE:
            return NotLeader(leader_id or None, message, **fields)
        return _UNAVAILABLE_BY_RULE.get(rule, Unavailable)(message, rule=rule, **fields)
    return EpochalError(message, rule=rule, **fields)
