"""Client-side exceptions, mapped from gRPC status codes in one place."""

from __future__ import annotations

import grpc


class EpochalError(Exception):
    """Base of every error the SDK raises. ``rule`` names the rule a refusal broke; ``epoch`` is
    the answering server's epoch and ``mutation_id`` (packed, hex) the id a write's retry must
    reuse, when the server said so."""

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        rule: str = "",
        epoch: int = 0,
        mutation_id: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.rule = rule
        self.epoch = epoch
        self.mutation_id = mutation_id


class InvalidRequest(EpochalError):
    """The request itself is malformed (INVALID_ARGUMENT): fix it, do not retry."""


class Rejected(EpochalError):
    """Refused (FAILED_PRECONDITION): the CMS refused a transformation, or a replica a clock
    beyond the allowed skew; ``rule`` names the rule."""


class Unavailable(EpochalError):
    """Too few members or replicas answered in time (UNAVAILABLE, DEADLINE_EXCEEDED); safe to
    retry a commit with the same entry id, a write with the same mutation id."""


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
    trailers = {key: str(value) for key, value in error.trailing_metadata() or ()}
    epoch = trailers.get("epochal-epoch", "0")
    return error_for(
        error.code(),
        error.details() or error.code().name,
        rule=trailers.get("epochal-rule", ""),
        epoch=int(epoch) if epoch.isdigit() else 0,
        mutation_id=trailers.get("epochal-mutation-id", ""),
    )


def error_for(
    code: grpc.StatusCode, message: str, *, rule: str = "", epoch: int = 0, mutation_id: str = ""
) -> EpochalError:
    """The exception for a status (an RPC's, or one a session answered in-band)."""
    kind = _BY_CODE.get(code, EpochalError)
    return kind(message, code=code, rule=rule, epoch=epoch, mutation_id=mutation_id)
