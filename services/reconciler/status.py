"""The reconciler's one mapping from how a replica's call failed to an error of the family
(``epochal.errors``), and what a round does about it.

A call to a replica fails in one of two ways: the replica answered with a refusal in its reply
(``outcome`` and ``message``: ``refusal``), or the call ended with a gRPC status (``failure``).
Either becomes one of four errors, by the ``REACTIONS`` table — every status has a row:

* ``Unreachable`` — no answer came: the connection failed or broke (UNAVAILABLE, CANCELLED) or
  the deadline passed (DEADLINE_EXCEEDED). Only this leaves a replica out of a round, and only
  being left out counts towards ``--cohort-after-ms``: the others fold without it.
* ``ReplicaOverloaded`` — RESOURCE_EXHAUSTED, or a reply's OVERLOADED: the round ends and the
  deliveries back off (``Pacer.back_off``); the replica answered, so it is not cut off.
* ``ReplicaRefused`` — the replica looked and said no (a reply's outcome, or a status such as
  INVALID_ARGUMENT, FAILED_PRECONDITION, PERMISSION_DENIED): the round ends with its reason.
* ``VersionMismatch`` — UNIMPLEMENTED: a replica of another version that lacks the method; the
  round ends, and the client logs it once per replica and method.

A status's message, rule and epoch are read as the SDK reads them (``epochal.status``).
"""

from __future__ import annotations

import enum

import grpc

from epochal.errors import EpochalError, Overloaded, Rejected, Unavailable
from epochal.status import from_rpc_error
from epochal.wire.status import NO_ANSWER


class Reaction(enum.Enum):
    LEAVE_OUT = "left out of the round: unreachable"
    BACK_OFF = "the round ends, deliveries back off: overloaded"
    REFUSED = "the round ends with the replica's reason"
    VERSION = "the round ends: the replica lacks the method"


_OUT, _BACK, _NO, _VERSION = (
    Reaction.LEAVE_OUT,
    Reaction.BACK_OFF,
    Reaction.REFUSED,
    Reaction.VERSION,
)

# What a round does when a call to a replica ends with a status. Theory: a replica is left out
# — and, left out long enough, folded without — only when nothing came back from it. Whatever it
# said is an answer: it is there, and leaving it out would fold a cohort without a replica that
# was answering all along. UNKNOWN and INTERNAL are answers too (an exception at the replica, or
# a replica that died mid-call: its next call finds the connection gone, UNAVAILABLE).
REACTIONS: dict[grpc.StatusCode, Reaction] = {
    grpc.StatusCode.CANCELLED: _OUT,  # the channel was closed under the call
    grpc.StatusCode.UNKNOWN: _NO,
    grpc.StatusCode.INVALID_ARGUMENT: _NO,
    grpc.StatusCode.DEADLINE_EXCEEDED: _OUT,
    grpc.StatusCode.NOT_FOUND: _NO,
    grpc.StatusCode.ALREADY_EXISTS: _NO,
    grpc.StatusCode.PERMISSION_DENIED: _NO,
    grpc.StatusCode.RESOURCE_EXHAUSTED: _BACK,
    grpc.StatusCode.FAILED_PRECONDITION: _NO,
    grpc.StatusCode.ABORTED: _NO,
    grpc.StatusCode.OUT_OF_RANGE: _NO,
    grpc.StatusCode.UNIMPLEMENTED: _VERSION,
    grpc.StatusCode.INTERNAL: _NO,
    grpc.StatusCode.UNAVAILABLE: _OUT,  # no connection, or the replica stopping or isolated
    grpc.StatusCode.DATA_LOSS: _NO,
    grpc.StatusCode.UNAUTHENTICATED: _NO,
}
assert set(REACTIONS) == set(grpc.StatusCode) - {grpc.StatusCode.OK}, "every failure has a row"
assert {code for code, r in REACTIONS.items() if r is _OUT} == NO_ANSWER, "left out: no answer"


class Unreachable(Unavailable):
    """No answer came from ``replica``: it is left out of the round."""

    RULE = "unreachable"

    def __init__(self, replica: str, reason: str, **fields: object) -> None:
        super().__init__(f"{replica} unreachable: {reason}", **fields)  # type: ignore[arg-type]
        self.replica = replica


class ReplicaOverloaded(Overloaded):
    """``replica`` is overloaded: the round ends and deliveries back off."""

    def __init__(self, replica: str, reason: str, **fields: object) -> None:
        super().__init__(f"{replica} overloaded: {reason}", **fields)  # type: ignore[arg-type]
        self.replica = replica


class ReplicaRefused(Rejected):
    """``replica`` refused the call: ``outcome`` names why as the replica put it (a reply's
    outcome, lower case, or the rule or status of a failed call), ``detail`` says it."""

    def __init__(self, replica: str, outcome: str, detail: str, **fields: object) -> None:
        super().__init__(outcome, f"{replica} refused ({outcome}): {detail}", **fields)
        self.replica = replica
        self.outcome = outcome
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class VersionMismatch(ReplicaRefused):
    """``replica`` does not implement ``method``: another version of the replica."""

    def __init__(self, replica: str, method: str, detail: str, **fields: object) -> None:
        super().__init__(
            replica,
            "version_mismatch",
            f"it does not implement {method} (a replica of another version?): {detail}",
            **fields,
        )
        self.method = method


def failure(replica: str, method: str, error: grpc.aio.AioRpcError) -> EpochalError:
    """The error a call to ``replica`` that ended with ``error``'s status stands for."""
    code = error.code()
    answered = from_rpc_error(error)  # its message, rule and epoch, as the SDK reads them
    fields = {"epoch": answered.epoch, "status": code.name}
    reaction = REACTIONS[code]
    if reaction is Reaction.LEAVE_OUT:
        return Unreachable(replica, f"{code.name}: {answered.message}", **fields)
    if reaction is Reaction.BACK_OFF:
        return ReplicaOverloaded(replica, answered.message, **fields)
    if reaction is Reaction.VERSION:
        return VersionMismatch(replica, method, answered.message, **fields)
    return ReplicaRefused(replica, (answered.rule or code.name).lower(), answered.message, **fields)


def refusal(replica: str, outcome: str, message: str) -> EpochalError:
    """The error a reply that names ``outcome`` (not OK, lower case) stands for."""
    if outcome == "overloaded":
        return ReplicaOverloaded(replica, message)
    return ReplicaRefused(replica, outcome, message)
