"""The CMS's one mapping from the errors a commit or a call ends with to gRPC statuses."""

from __future__ import annotations

import grpc

from epochal.errors import EpochalError, InvalidRequest, Overloaded, Rejected, Unavailable
from epochal.wire.status import StatusTable, abort, status_of

STATUS: StatusTable = {
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    Rejected: grpc.StatusCode.FAILED_PRECONDITION,
    Unavailable: grpc.StatusCode.UNAVAILABLE,  # not the leader, shutting down, not chosen in time
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def code_of(error: EpochalError) -> grpc.StatusCode:
    return status_of(error, STATUS)


async def abort_with(context: grpc.aio.ServicerContext, error: EpochalError) -> None:
    await abort(context, error, STATUS)
