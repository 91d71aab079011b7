"""Expected errors: one family, one name each, for every layer — the pure cores raise them, each
service maps them to a gRPC status in one module (``epochal.cms.status``,
``epochal.replica.status``), and the SDK maps a status back to them in one place
(``epochal.status``). Pure: no gRPC here, so the cores can raise these.

An error carries what a caller acts on as fields, never inside its text: the rule a refusal
broke (``rule``), the leader to ask instead (``leader_id``), the answering node's epoch
(``epoch``), the mutation id a write's retry must reuse (``mutation_id``, packed hex as the SDK
sends it back). ``status`` is the gRPC status name the error came with, for errors the SDK
rebuilt from an answer ("" for one raised here). Every raise builds a new instance: an
exception is never shared by several waiters, nor changed after it was raised.

A consistency failure (a coordinator got too few answers for the level: ``Unavailable``,
``TimedOut`` or ``StalePlan`` from a replica) also carries ``replicas``, a ``ReplicaOutcome``:
the level, how many answers it needed, and which replicas acknowledged, refused (and why) or
did not answer. The SDK adds ``attempts``: every attempt of the call, each with its coordinator
and its own error, so that a retry never hides what the first attempt saw.

A broken invariant is not one of these: it is an ``assert`` or a crash.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaOutcome:
    """What the replicas of one coordinated write or read did, by node id: ``required`` answers
    were needed at ``consistency`` from ``replicas`` (the token's group); ``acknowledged``
    answered OK, ``refused`` answered no (node, reason), ``not_answering`` gave no answer
    (node, why: no answer in time, or could not be asked)."""

    consistency: str
    required: int
    replicas: tuple[str, ...]
    acknowledged: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    not_answering: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """One line: "ALL needs 3 of node-1, node-2, node-3: acknowledged node-1, node-2;
        not answering node-3 (no answer within 2000 ms)"."""
        parts = [
            f"acknowledged {', '.join(self.acknowledged)}"
            if self.acknowledged
            else "none acknowledged"
        ]
        if self.refused:
            parts.append("refused " + ", ".join(f"{n} ({why})" for n, why in self.refused))
        if self.not_answering:
            parts.append(
                "not answering " + ", ".join(f"{n} ({why})" for n, why in self.not_answering)
            )
        return (
            f"{self.consistency} needs {self.required} of {', '.join(self.replicas)}: "
            + "; ".join(parts)
        )


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One failed attempt of an SDK call: its number (1 for the first), the coordinator it went
    to (an address), the id it carried ("": none — the coordinator assigned one), when it
    started (seconds after the call did), how long it took, and its error."""

    number: int
    coordinator: str
    carried_id: str
    started_s: float
    duration_s: float
    error: EpochalError

    def describe(self) -> str:
        kind = type(self.error).__name__
        return (
            f"attempt {self.number} via {self.coordinator or 'no coordinator'} "
            f"({self.duration_s:.2f} s): {kind}: {self.error.message}"
        )


class EpochalError(Exception):
    """Base of every expected error."""

    RULE = ""  # the rule a class names when the raiser gives none

    def __init__(
        self,
        message: str,
        *,
        rule: str = "",
        epoch: int = 0,
        mutation_id: str = "",
        status: str = "",
        replicas: ReplicaOutcome | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.rule = rule or self.RULE
        self.epoch = epoch
        self.mutation_id = mutation_id
        self.status = status
        self.replicas = replicas
        self.attempts: tuple[AttemptRecord, ...] = ()

    def with_attempts(self, attempts: tuple[AttemptRecord, ...], message: str) -> EpochalError:
        """A copy of this error carrying ``attempts`` and ``message`` (the SDK's final error:
        the last attempt's, told with what the others saw)."""
        # Not copy.copy: it rebuilds from ``args``, which some constructors do not take.
        told = BaseException.__new__(type(self))
        told.__dict__.update(self.__dict__)
        told.args = (message,)
        told.message = message
        told.attempts = attempts
        return told


class InvalidRequest(EpochalError):
    """The request itself is malformed or outside the limits: fix it, do not retry."""

    RULE = "bad_request"


class PermissionDenied(EpochalError):
    """The server refused the caller's certificate for this call (PERMISSION_DENIED): the
    message names the role it needs and the roles the certificate has. Not retried."""


class Rejected(EpochalError):
    """A rule refused the request (a transformation that conflicts with the metadata, an entry id
    reused for another transformation, a topology step whose barrier was not met): ``rule``
    names it, the message says what to do instead. Not retried: the same request gets the same
    answer."""

    def __init__(self, rule: str, message: str, **fields: object) -> None:
        super().__init__(message, rule=rule, **fields)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (self.rule, self.message) == (
            other.rule,
            other.message,
        )

    def __hash__(self) -> int:
        return hash((self.rule, self.message))


class ClockSkew(Rejected):
    """A client's or peer's hybrid logical clock is further ahead of the local physical clock
    than the allowed skew."""

    def __init__(self, *, remote: str, local: str, ahead_ms: int, max_skew_ms: int) -> None:
        self.ahead_ms = ahead_ms
        self.max_skew_ms = max_skew_ms
        super().__init__(
            "clock_skew",
            f"remote clock {remote} is {ahead_ms} ms ahead of the local physical clock {local}, "
            f"beyond max_skew_ms={max_skew_ms}; check time synchronisation (NTP) on both nodes "
            f"or raise max_skew_ms",
        )


class Unavailable(EpochalError):
    """Too few members or replicas answered, or the server cannot answer yet (starting, behind,
    stopped applying the log): retrying — a commit with the same entry id, a write with the same
    mutation id — may succeed."""

    RULE = "unavailable"


class NotLeader(Unavailable):
    """This CMS member is not the leader; ``leader_id`` names the one it knows (None: none
    elected yet). Retry with the same entry id."""

    RULE = "not_leader"

    def __init__(self, leader_id: str | None, message: str = "", **fields: object) -> None:
        self.leader_id = leader_id
        super().__init__(
            message
            or f"this CMS member is not the leader (leader: {leader_id or 'none elected yet'}); "
            "retry with the same entry_id",
            **fields,  # type: ignore[arg-type]
        )


class ShuttingDown(Unavailable):
    """The server is stopping: ask another, with the same id."""

    RULE = "shutting_down"


class CommitTimeout(Unavailable):
    """A commit was not chosen in time; it may still be: retry with the same entry id."""

    RULE = "commit_timeout"


class StalePlan(Unavailable):
    """A reply revealed a newer epoch under which the replicas that answered are not enough."""

    RULE = "stale_plan"


class TimedOut(Unavailable):
    """The request's own deadline passed before enough replicas answered."""

    RULE = "timeout"


class ConnectionFailed(Unavailable):
    """The client could not reach ``address`` (no connection, or the stream to it broke before
    it answered): another node may answer. Raised by the SDK, never by a server."""

    RULE = "connection_failed"

    def __init__(self, message: str, *, address: str, **fields: object) -> None:
        self.address = address
        super().__init__(message, **fields)  # type: ignore[arg-type]


class Overloaded(EpochalError):
    """Too much is already queued (values pending in the Paxos core, requests in flight): back
    off and retry."""

    RULE = "overloaded"


class Aborted(EpochalError):
    """An operation stopped before it finished: aborted by its operator, or failed on the way
    (the message says which step and why); its status says what is left to resume or cancel."""

    RULE = "aborted"


class OperationRefused(Rejected):
    """A topology operation cannot start or go on as asked (the message says what to do
    instead)."""

    def __init__(self, message: str) -> None:
        super().__init__("operation_refused", message)


class GuardClosed(Rejected):
    """The sequence a range stream serves left its START step: nothing more may be stored."""

    def __init__(self, message: str) -> None:
        super().__init__("guard_closed", message)


class StreamRefused(Unavailable):
    """No source will serve a range stream (the message says why)."""

    RULE = "stream_refused"
