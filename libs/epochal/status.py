"""The SDK's one place between gRPC statuses and ``epochal.errors``: an answer's status, message
and trailers become the error of the family the server raised, a consistency failure with the
replicas' outcome (``from_rpc_error``, over ``epochal.wire.status.error_for``); and the one
retry table (``RETRIES``: status x operation -> retry with the same id, with a fresh id, or not
at all) that the CMS client and the SDK follow."""

from __future__ import annotations

import enum

import grpc

from epochal.errors import EpochalError
from epochal.wire.status import (
    EPOCH_TRAILER,
    LEADER_TRAILER,
    MUTATION_ID_TRAILER,
    REPLICAS_TRAILER,
    RULE_TRAILER,
    error_for,
    replicas_from_trailer,
)


def from_rpc_error(error: grpc.aio.AioRpcError) -> EpochalError:
    metadata = tuple(error.trailing_metadata() or ())
    trailers = {key: str(value) for key, value in metadata if not key.endswith("-bin")}
    replicas = next((value for key, value in metadata if key == REPLICAS_TRAILER), None)
    epoch = trailers.get(EPOCH_TRAILER, "0")
    return error_for(
        error.code(),
        error.details() or error.code().name,
        rule=trailers.get(RULE_TRAILER, ""),
        epoch=int(epoch) if epoch.isdigit() else 0,
        mutation_id=trailers.get(MUTATION_ID_TRAILER, ""),
        leader_id=trailers.get(LEADER_TRAILER, ""),
        replicas=replicas_from_trailer(replicas) if replicas is not None else None,
    )


def code_of(error: EpochalError) -> grpc.StatusCode | None:
    """The status an error came with (None: raised by the client itself)."""
    return grpc.StatusCode[error.status] if error.status else None


# ---------------------------------------------------------------------- the retry table


class Operation(enum.Enum):
    """What a client sends, as the retry table sees it."""

    COMMIT = "commit"  # a CMS commit (DDL is one): it carries its entry id
    WRITE = "write"  # a replica write: its retry carries the mutation id its failure named
    READ = "read"  # a read, FetchLog, Describe: changes nothing


class Retry(enum.Enum):
    SAME = "retry with the same id"  # a read: retry it as it is
    FRESH = "retry with a fresh id"
    NO = "do not retry"


_SAME, _FRESH, _NO = Retry.SAME, Retry.FRESH, Retry.NO
_COLUMNS = (Operation.COMMIT, Operation.WRITE, Operation.READ)

# What a client does after a failed attempt, by status and operation; the CMS client and the SDK
# both follow it, and README.md ("Errors and retries") shows it. Theory: a commit's entry id and
# a write's mutation id make a repeat of either harmless (the CMS answers a known entry id with
# its first epoch; a replica stores a mutation id once), and a read changes nothing. So every
# status that may mean "this attempt did not complete" is retried: a server that was starting,
# stopping or overloaded, and a server that died mid-call — which the client sees, depending on
# the moment, as UNAVAILABLE, CANCELLED, DEADLINE_EXCEEDED, INTERNAL ("Internal error from
# Core") or UNKNOWN. A status that means "the server looked and said no" gets the same answer
# again: not retried. ABORTED on a write is kept for a refusal of that mutation id for good
# (what the reconciler's fence will answer, DESIGN.md "Reconciler"), so the write goes again as
# a new one.
# A write's "same id" is the id its failure named (trailer epochal-mutation-id); a write whose
# coordinator died before naming one has none to reuse, so its retry gets a fresh id from the
# next coordinator (the same cells, at worst stored under two ids).
#                                              commit  write   read
RETRIES: dict[grpc.StatusCode, tuple[Retry, Retry, Retry]] = {
    grpc.StatusCode.CANCELLED: (_SAME, _SAME, _SAME),
    grpc.StatusCode.UNKNOWN: (_SAME, _SAME, _SAME),
    grpc.StatusCode.INVALID_ARGUMENT: (_NO, _NO, _NO),
    grpc.StatusCode.DEADLINE_EXCEEDED: (_SAME, _SAME, _SAME),
    grpc.StatusCode.NOT_FOUND: (_NO, _NO, _NO),
    grpc.StatusCode.ALREADY_EXISTS: (_NO, _NO, _NO),
    grpc.StatusCode.PERMISSION_DENIED: (_NO, _NO, _NO),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (_SAME, _SAME, _SAME),
    grpc.StatusCode.FAILED_PRECONDITION: (_NO, _NO, _NO),
    grpc.StatusCode.ABORTED: (_SAME, _FRESH, _SAME),
    grpc.StatusCode.OUT_OF_RANGE: (_NO, _NO, _NO),
    grpc.StatusCode.UNIMPLEMENTED: (_NO, _NO, _NO),
    grpc.StatusCode.INTERNAL: (_SAME, _SAME, _SAME),
    grpc.StatusCode.UNAVAILABLE: (_SAME, _SAME, _SAME),
    grpc.StatusCode.DATA_LOSS: (_NO, _NO, _NO),
    grpc.StatusCode.UNAUTHENTICATED: (_NO, _NO, _NO),
}
assert set(RETRIES) == set(grpc.StatusCode) - {grpc.StatusCode.OK}, "every failure has a row"


def retry_for(operation: Operation, code: grpc.StatusCode | None) -> Retry:
    """The table's answer (``code`` None: a failure the client made itself — not retried)."""
    if code is None or code is grpc.StatusCode.OK:
        return Retry.NO
    return RETRIES[code][_COLUMNS.index(operation)]
