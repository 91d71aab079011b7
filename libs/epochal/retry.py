"""The one retry schedule of Epochal's clients: the CMS client's commits and reads follow it, and
the SDK's default retry policy (``epochal.policies.DefaultRetryPolicy``) decides by it, so all
try again the same way.

Theory of operation
-------------------
An operation goes out as a series of attempts. After a failed attempt ``RetrySchedule.decide``
answers, in this order:

1. the retry table (``epochal.status.RETRIES``, README "Errors and retries"), by the failure's
   status and the operation: do not retry (the server looked and said no; a failure the client
   made itself has no status and is not retried either), retry with the same id, or with a
   fresh one;
2. the attempt budget (``max_attempts``): no attempt past it;
3. the time budget (``total_timeout_s``, counted from the first attempt's start): no backoff
   that would end at or past it;
4. the backoff before the next attempt: ``first_backoff_s``, doubling with each failure, at most
   ``max_backoff_s``.

The id the next attempt carries follows the table: "same" is the id the failure named (a write's
coordinator names the mutation id it assigned) or else the one already carried; "fresh" is none
(the next coordinator assigns one). A commit's entry id is always the same (the table has no
other cell for a commit). Each attempt's timeout is ``attempt_timeout_s``, cut to what is left of
the total (never under ``MIN_ATTEMPT_TIMEOUT_S``).

``decide`` is pure; ``run`` is the one loop every client runs around it. The caller's attempt
raises an ``EpochalError`` (with the status it came with) when it fails, and does its own
bookkeeping there; ``before_retry`` is for what changes between attempts (the CMS client moves to
the next member).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from epochal.errors import EpochalError
from epochal.status import Operation, Retry, code_of, retry_for

Result = TypeVar("Result")

MIN_ATTEMPT_TIMEOUT_S = 0.01


class Verdict(enum.Enum):
    RETRY = "retry"
    REFUSED = "the retry table says no"
    OUT_OF_ATTEMPTS = "no attempt left"
    OUT_OF_TIME = "no time left"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    carry_id: str = ""  # the id the next attempt carries ("": a fresh one)
    backoff_s: float = 0.0  # how long to wait before it


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int  # 1 for the first
    carry_id: str  # the id it carries ("": none yet, or a fresh one)
    timeout_s: float


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """How an operation is retried; at least one of ``max_attempts`` and ``total_timeout_s``
    bounds it."""

    operation: Operation
    attempt_timeout_s: float
    max_attempts: int | None = None
    total_timeout_s: float | None = None
    first_backoff_s: float = 0.0
    max_backoff_s: float = 0.0

    def __post_init__(self) -> None:
        if self.max_attempts is None and self.total_timeout_s is None:
            raise ValueError("a retry schedule needs max_attempts or total_timeout_s")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.attempt_timeout_s <= 0:
            raise ValueError(f"attempt_timeout_s must be positive, not {self.attempt_timeout_s}")
        if not 0 <= self.first_backoff_s <= self.max_backoff_s:
            raise ValueError(
                f"backoff from {self.first_backoff_s} s to {self.max_backoff_s} s: the first "
                "must be between 0 and the most"
            )

    def backoff_s(self, failures: int) -> float:
        """The wait after the ``failures``-th failed attempt."""
        assert failures >= 1, failures
        return min(self.first_backoff_s * 2 ** (failures - 1), self.max_backoff_s)

    def timeout_s(self, elapsed_s: float) -> float:
        """The timeout of an attempt that starts ``elapsed_s`` after the first one did."""
        if self.total_timeout_s is None:
            return self.attempt_timeout_s
        left_s = max(self.total_timeout_s - elapsed_s, MIN_ATTEMPT_TIMEOUT_S)
        return min(self.attempt_timeout_s, left_s)

    def decide(
        self,
        failures: int,
        code: grpc.StatusCode | None,
        *,
        elapsed_s: float,
        carried_id: str = "",
        named_id: str = "",
    ) -> Decision:
        """After the ``failures``-th failed attempt (status ``code``, None: the client's own
        failure), ``elapsed_s`` after the first attempt started: retry or not, with which id,
        after how long. ``named_id`` is the id the failure named; only a write's counts."""
        retry = retry_for(self.operation, code)
        if retry is Retry.NO:
            return Decision(Verdict.REFUSED)
        if self.max_attempts is not None and failures >= self.max_attempts:
            return Decision(Verdict.OUT_OF_ATTEMPTS)
        backoff_s = self.backoff_s(failures)
        if self.total_timeout_s is not None and elapsed_s + backoff_s >= self.total_timeout_s:
            return Decision(Verdict.OUT_OF_TIME)
        if retry is Retry.FRESH:
            return Decision(Verdict.RETRY, "", backoff_s)
        if self.operation is Operation.WRITE and named_id:
            return Decision(Verdict.RETRY, named_id, backoff_s)
        return Decision(Verdict.RETRY, carried_id, backoff_s)


async def run(
    policy: RetrySchedule,
    attempt: Callable[[Attempt], Awaitable[Result]],
    *,
    carry_id: str = "",
    before_retry: Callable[[EpochalError], None] | None = None,
    exhausted: Callable[[Attempt, EpochalError], EpochalError] | None = None,
) -> Result:
    """Run ``attempt`` until it returns or ``policy`` says stop: then its last error is raised
    (or, out of attempts or time, what ``exhausted`` makes of it). ``carry_id`` is the id the
    first attempt carries."""
    clock = asyncio.get_running_loop().time
    started = clock()
    number = 1
    while True:
        current = Attempt(number, carry_id, policy.timeout_s(clock() - started))
        try:
            return await attempt(current)
        except EpochalError as error:
            decision = policy.decide(
                number,
                code_of(error),
                elapsed_s=clock() - started,
                carried_id=carry_id,
                named_id=error.mutation_id,
            )
            if decision.verdict is Verdict.REFUSED:
                raise
            if decision.verdict is not Verdict.RETRY:
                if exhausted is None:
                    raise
                raise exhausted(current, error) from None
            if before_retry is not None:
                before_retry(error)
            if decision.backoff_s > 0:
                await asyncio.sleep(decision.backoff_s)
        carry_id = decision.carry_id
        number += 1
