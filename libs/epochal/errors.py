"""Client-side exceptions, mapped from gRPC status codes in one place, and the one retry table
(``RETRIES``: status x operation -> retry with the same id, with a fresh id, or not at all)
that the CMS client and the SDK follow."""

from __future__ import annotations

import enum

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
    """Too few members or replicas answered in time (UNAVAILABLE, DEADLINE_EXCEEDED), or every
    retry the table allows failed; safe to retry a commit with the same entry id, a write with
    the same mutation id."""


class Overloaded(EpochalError):
    """RESOURCE_EXHAUSTED: back off and retry."""


_BY_CODE: dict[grpc.StatusCode, type[EpochalError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.FAILED_PRECONDITION: Rejected,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Overloaded,
}


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
