"""The replica's expected failures of a client request, each with the gRPC status it maps to
(the servicer converts them in one place) and, for a write, the mutation id to retry with."""

from __future__ import annotations

from epochal.mtrack import MutationId


class RequestError(Exception):
    code = "UNAVAILABLE"
    rule = ""

    def __init__(
        self, message: str, *, rule: str = "", mutation_id: MutationId | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.mutation_id = mutation_id
        if rule:
            self.rule = rule


class InvalidRequest(RequestError):
    """The request does not fit the schema or the limits: fix it, do not retry."""

    code = "INVALID_ARGUMENT"
    rule = "bad_request"


class Unavailable(RequestError):
    """Too few replicas answered; retrying (with the same mutation id) may succeed."""

    code = "UNAVAILABLE"
    rule = "unavailable"


class StalePlan(Unavailable):
    """A reply revealed a newer epoch under which the replicas that answered are not enough."""

    rule = "stale_plan"


class TimedOut(RequestError):
    code = "DEADLINE_EXCEEDED"
    rule = "timeout"


class Overloaded(RequestError):
    code = "RESOURCE_EXHAUSTED"
    rule = "overloaded"


class ClockSkewed(RequestError):
    """A client's or peer's clock is further ahead than --max-skew-ms."""

    code = "FAILED_PRECONDITION"
    rule = "clock_skew"
