"""The replica's one mapping from what a request raised to the status its client is told."""

from __future__ import annotations

import logging

import grpc

from epochal.errors import (
    Aborted,
    EpochalError,
    InvalidRequest,
    Overloaded,
    Rejected,
    TimedOut,
    Unavailable,
)
from epochal.wire.fields import MalformedInput
from epochal.wire.status import StatusTable, abort, status_of

log = logging.getLogger(__name__)

LOGGED = "logged by this replica with its traceback"

STATUS: StatusTable = {
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    Rejected: grpc.StatusCode.FAILED_PRECONDITION,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    TimedOut: grpc.StatusCode.DEADLINE_EXCEEDED,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Aborted: grpc.StatusCode.ABORTED,
}


def expected(error: BaseException) -> EpochalError:
    """What the client is told ``error`` was: itself when expected, INVALID_ARGUMENT for input
    that did not decode, and otherwise an internal error (a bug: logged with its traceback,
    never answered with its Python text)."""
    if isinstance(error, EpochalError):
        return error
    if isinstance(error, MalformedInput):
        return InvalidRequest(str(error), rule="malformed")
    log.error("a request failed unexpectedly", exc_info=error)
    return EpochalError(f"internal error ({LOGGED})", rule="internal")


def code_of(error: EpochalError) -> grpc.StatusCode:
    return status_of(error, STATUS)


async def abort_with(context: grpc.aio.ServicerContext, error: BaseException, epoch: int) -> None:
    await abort(context, expected(error), STATUS, epoch)
