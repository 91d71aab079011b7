"""Expected errors (``epochal.errors``) <-> gRPC statuses, for every service's gRPC layer and the
SDK. A service declares the statuses it answers in one table of its own (its ``status``
module) and aborts with ``abort``: the status, the message, and the error's fields as trailers
(``epochal-rule``, ``epochal-epoch``, ``epochal-mutation-id``, ``epochal-leader-id``).
``error_for`` turns a status and those fields back into the family's error, for the SDK and
for a CMS member answered by its leader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

import grpc

from epochal.errors import (
    CommitTimeout,
    EpochalError,
    InvalidRequest,
    NotLeader,
    Overloaded,
    Rejected,
    ShuttingDown,
    StalePlan,
    TimedOut,
    Unavailable,
)

EPOCH_TRAILER = "epochal-epoch"
RULE_TRAILER = "epochal-rule"
MUTATION_ID_TRAILER = "epochal-mutation-id"
LEADER_TRAILER = "epochal-leader-id"

StatusTable = Mapping[type[EpochalError], grpc.StatusCode]

# The statuses of a call that got no answer from its server: the connection failed or broke
# (UNAVAILABLE; CANCELLED when the channel was closed under it) or the deadline passed. What a
# server said is an answer, whatever it said: only these say that it may be unreachable.
NO_ANSWER = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
)

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


def trailers_of(error: EpochalError, epoch: int) -> tuple[tuple[str, str], ...]:
    trailers = [(EPOCH_TRAILER, str(error.epoch or epoch))]
    if error.rule:
        trailers.append((RULE_TRAILER, error.rule))
    if error.mutation_id:
        trailers.append((MUTATION_ID_TRAILER, error.mutation_id))
    if isinstance(error, NotLeader) and error.leader_id:
        trailers.append((LEADER_TRAILER, error.leader_id))
    return tuple(trailers)


async def abort(
    context: grpc.aio.ServicerContext, error: EpochalError, table: StatusTable, epoch: int = 0
) -> NoReturn:
    context.set_trailing_metadata(trailers_of(error, epoch))
    await context.abort(status_of(error, table), error.message)
    raise AssertionError("unreachable: context.abort raises")


def error_for(
    code: grpc.StatusCode,
    message: str,
    *,
    rule: str = "",
    epoch: int = 0,
    mutation_id: str = "",
    leader_id: str = "",
) -> EpochalError:
    """The error a failed answer stands for (an RPC's status, one a session answered in-band,
    or a leader's answer to a forwarded commit)."""
    fields = {"epoch": epoch, "mutation_id": mutation_id, "status": code.name}
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequest(message, rule=rule, **fields)
    if code is grpc.StatusCode.FAILED_PRECONDITION:
        return Rejected(rule, message, **fields)
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Overloaded(message, rule=rule, **fields)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return TimedOut(message, rule=rule, **fields)
    if code is grpc.StatusCode.UNAVAILABLE:
        if rule == NotLeader.RULE:
            return NotLeader(leader_id or None, message, **fields)
        return _UNAVAILABLE_BY_RULE.get(rule, Unavailable)(message, rule=rule, **fields)
    return EpochalError(message, rule=rule, **fields)
