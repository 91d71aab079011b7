"""Client-side exceptions, mapped from gRPC status codes in one place."""

from __future__ import annotations

import grpc


class EpochalError(Exception):
    """Base of every error the SDK raises."""

    def __init__(
        self, message: str, *, code: grpc.StatusCode | None = None, rule: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.rule = rule


class InvalidRequest(EpochalError):
    """The request itself is malformed (INVALID_ARGUMENT): fix it, do not retry."""


class Rejected(EpochalError):
    """The CMS refused the transformation (FAILED_PRECONDITION); ``rule`` names the rule."""


class Unavailable(EpochalError):
    """No member could give an answer in time; safe to retry with the same entry id."""


class Overloaded(EpochalError):
    """RESOURCE_EXHAUSTED: back off and retry."""


_BY_CODE: dict[grpc.StatusCode, type[EpochalError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.FAILED_PRECONDITION: Rejected,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Overloaded,
}

RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)


def from_rpc_error(error: grpc.aio.AioRpcError) -> EpochalError:
    rule = ""
    for key, value in error.trailing_metadata() or ():
        if key == "epochal-rule":
            rule = str(value)
    kind = _BY_CODE.get(error.code(), EpochalError)
    return kind(error.details() or error.code().name, code=error.code(), rule=rule)
