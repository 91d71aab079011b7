"""Retry policies as objects: what the SDK does after a failed attempt of a write, a read or a DDL
commit.

Theory of operation
-------------------
A call (``AsyncClient.write``, ``read``, ``create_table``…) goes out as a series of attempts
(``epochal.calls``). After each failed attempt the call's profile's ``RetryPolicy`` is shown a
``FailedAttempt`` — the operation, the attempt (its number, coordinator, the id it carried, its
error) and every earlier one, the time spent and left of the call's timeout, the id the failure
named and how old that id is — and answers a ``RetryDecision``: stop, or try again after a
backoff, with the same id or a fresh one. The SDK follows the decision, within the call's
timeout: a backoff that would end past it stops the call.

``DefaultRetryPolicy`` follows the retry table (``epochal.status.RETRIES``, README "Errors and
retries") through the one retry schedule the CMS client uses too (``epochal.retry``): a status
that means "the server looked and said no" is not retried; any other is, on the next
coordinator, up to ``max_retries`` times, backing off from ``first_backoff_s`` doubling to
``max_backoff_s`` — a DDL commit instead until the call's timeout, from 20 ms to 0.5 s, as
the CMS client does. A write is retried with the mutation id its failure named — so that it is
stored once — while that id is younger than the replicas' write timeout: past it, replicas
refuse the id ("older than the write timeout … retry with a fresh id"), so the retry goes as a
fresh write (the same cells under a new id, which the replicas store as one more version of the
same values). A DDL commit always keeps its entry id.

``NeverRetryPolicy`` stops after the first failure. Write your own by subclassing
``RetryPolicy``::

    from epochal import FailedAttempt, InvalidRequest, RetryDecision, RetryPolicy

    class TwoMoreTimes(RetryPolicy):
        def on_failure(self, failed: FailedAttempt) -> RetryDecision:
            if failed.number > 2 or isinstance(failed.error, InvalidRequest):
                return RetryDecision.stop()
            return RetryDecision.same_id(backoff_s=0.05)
"""

from __future__ import annotations

import abc
import functools
from dataclasses import dataclass

from epochal.errors import AttemptRecord, EpochalError
from epochal.retry import RetrySchedule, Verdict
from epochal.status import Operation, code_of

__all__ = [
    "DefaultRetryPolicy",
    "FailedAttempt",
    "NeverRetryPolicy",
    "RetryDecision",
    "RetryPolicy",
]

# The replicas' default --write-timeout-ms: past it, a replica refuses a new write's id.
DEFAULT_WRITE_TIMEOUT_S = 2.0
COMMIT_FIRST_BACKOFF_S = 0.02  # the CMS client's (epochal.cms_client.commit_policy)
COMMIT_MAX_BACKOFF_S = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedAttempt:
    """What a retry policy is shown after a failed attempt."""

    operation: Operation  # WRITE, READ or COMMIT (DDL)
    attempt: AttemptRecord  # this attempt: number, coordinator, carried id, timing, error
    earlier: tuple[AttemptRecord, ...]  # the call's attempts before it, in order
    elapsed_s: float  # since the call started
    remaining_s: float  # of the call's timeout
    named_id: str  # the id the failure named ("": none), packed hex for a write
    named_id_age_s: float | None  # how old that id is (None: no id, or not a write)

    @property
    def number(self) -> int:
        """1 for the first attempt."""
        return self.attempt.number

    @property
    def error(self) -> EpochalError:
        return self.attempt.error

    @property
    def reason(self) -> str:
        """Why it failed, in one word pair: the status and the rule ("UNAVAILABLE/timeout")."""
        error = self.attempt.error
        return f"{error.status or type(error).__name__}/{error.rule}"


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Stop (``retry`` False), or retry after ``backoff_s`` with the same id (the one the failure
    named, else the one carried) or a fresh one (``fresh_id``: a write goes again as a new
    mutation; a commit keeps its entry id whatever this says)."""

    retry: bool
    fresh_id: bool = False
    backoff_s: float = 0.0

    def __post_init__(self) -> None:
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must not be negative, not {self.backoff_s}")

    @classmethod
    def stop(cls) -> RetryDecision:
        return cls(False)

    @classmethod
    def same_id(cls, backoff_s: float = 0.0) -> RetryDecision:
        return cls(True, False, backoff_s)

    @classmethod
    def with_fresh_id(cls, backoff_s: float = 0.0) -> RetryDecision:
        return cls(True, True, backoff_s)


class RetryPolicy(abc.ABC):
    """Decides, after each failed attempt of a call, whether to try again (see the module
    docstring). One instance may serve many calls at once: keep no per-call state in it.
    ``on_failure`` runs on the client's event loop (the sync client's background thread):
    it must return at once, never block or sleep — ask for a backoff instead."""

    @abc.abstractmethod
    def on_failure(self, failed: FailedAttempt) -> RetryDecision:
        """What to do after ``failed``."""


class NeverRetryPolicy(RetryPolicy):
    """One attempt per call."""

    def on_failure(self, failed: FailedAttempt) -> RetryDecision:
        return RetryDecision.stop()

    def __repr__(self) -> str:
        return "NeverRetryPolicy()"


class DefaultRetryPolicy(RetryPolicy):
    """The retry table, ``max_retries`` more attempts of a write or read, a doubling backoff
    (a DDL commit: until the call's timeout); a write's id is reused while younger than
    ``write_timeout_s`` (set it to the replicas'
    ``--write-timeout-ms``), and replaced by a fresh one after."""

    def __init__(
        self,
        max_retries: int = 3,
        *,
        first_backoff_s: float = 0.1,
        max_backoff_s: float = 1.0,
        write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, not {max_retries}")
        if write_timeout_s <= 0:
            raise ValueError(f"write_timeout_s must be positive, not {write_timeout_s}")
        self.max_retries = max_retries
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.write_timeout_s = write_timeout_s
        schedule = functools.partial(RetrySchedule, attempt_timeout_s=1.0)  # the call bounds it
        self._schedules = {
            operation: schedule(
                operation,
                max_attempts=max_retries + 1,
                first_backoff_s=first_backoff_s,
                max_backoff_s=max_backoff_s,
            )
            for operation in (Operation.WRITE, Operation.READ)
        }
        # A commit goes on until the call's timeout, as the CMS client's do: an election takes
        # a few seconds, and the entry id makes every retry safe.
        self._schedules[Operation.COMMIT] = schedule(
            Operation.COMMIT,
            total_timeout_s=float("inf"),
            first_backoff_s=COMMIT_FIRST_BACKOFF_S,
            max_backoff_s=COMMIT_MAX_BACKOFF_S,
        )

    def on_failure(self, failed: FailedAttempt) -> RetryDecision:
        decision = self._schedules[failed.operation].decide(
            failed.number,
            code_of(failed.error),
            elapsed_s=failed.elapsed_s,
            carried_id=failed.attempt.carried_id,
            named_id=failed.named_id,
        )
        if decision.verdict is not Verdict.RETRY:
            return RetryDecision.stop()
        if failed.operation is Operation.WRITE and decision.carry_id:
            age_s = failed.named_id_age_s
            if age_s is not None and age_s + decision.backoff_s >= self.write_timeout_s:
                # The replicas would refuse the id as older than their write timeout.
                return RetryDecision.with_fresh_id(decision.backoff_s)
        fresh = failed.operation is Operation.WRITE and not decision.carry_id
        return RetryDecision(True, fresh, decision.backoff_s)

    def __repr__(self) -> str:
        return (
            f"DefaultRetryPolicy(max_retries={self.max_retries}, first_backoff_s="
            f"{self.first_backoff_s}, max_backoff_s={self.max_backoff_s}, write_timeout_s="
            f"{self.write_timeout_s})"
        )
