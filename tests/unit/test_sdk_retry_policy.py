"""The one retry schedule (epochal.retry) that the CMS client follows and the SDK's default
policy decides by: its decisions follow the retry table cell by cell, carry the id the table
says, and stay inside the attempt and time budgets with the backoffs README "Errors and
retries" names; its loop does what the decisions say."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from epochal import cms_client
from epochal.errors import EpochalError
from epochal.retry import Attempt, RetrySchedule, Verdict, run
from epochal.status import RETRIES, Operation, Retry, error_for

COLUMNS = (Operation.COMMIT, Operation.WRITE, Operation.READ)
NAMED = "0a0b"  # the id a failure names (packed hex, as a write's coordinator sends it)
CARRIED = "0c0d"  # the id the failed attempt carried


def policy(operation: Operation, **bounds: float) -> RetrySchedule:
    return RetrySchedule(operation, attempt_timeout_s=5.0, **({"max_attempts": 4} | bounds))


@pytest.mark.parametrize("code", sorted(RETRIES, key=lambda c: c.name))
def test_each_decision_is_the_tables_cell(code: grpc.StatusCode) -> None:
    for operation, cell in zip(COLUMNS, RETRIES[code], strict=True):
        decision = policy(operation).decide(
            1, code, elapsed_s=0.0, carried_id=CARRIED, named_id=NAMED
        )
        if cell is Retry.NO:
            assert decision.verdict is Verdict.REFUSED, (code, operation)
        elif cell is Retry.FRESH:
            assert (decision.verdict, decision.carry_id) == (Verdict.RETRY, ""), (code, operation)
        elif operation is Operation.WRITE:  # the id its failure named
            assert (decision.verdict, decision.carry_id) == (Verdict.RETRY, NAMED), code
        else:  # a commit keeps its entry id whatever the failure says
            assert (decision.verdict, decision.carry_id) == (Verdict.RETRY, CARRIED), code


def test_a_writes_retry_keeps_its_id_when_the_failure_names_none() -> None:
    decision = policy(Operation.WRITE).decide(
        1, grpc.StatusCode.UNAVAILABLE, elapsed_s=0.0, carried_id=CARRIED
    )
    assert decision.carry_id == CARRIED


def test_a_failure_of_the_clients_own_is_not_retried() -> None:
    for operation in Operation:
        assert policy(operation).decide(1, None, elapsed_s=0.0).verdict is Verdict.REFUSED


def test_the_attempt_budget_counts_every_attempt() -> None:
    retries = policy(Operation.WRITE, max_attempts=4)
    verdicts = [
        retries.decide(failures, grpc.StatusCode.UNAVAILABLE, elapsed_s=0.0).verdict
        for failures in (1, 2, 3, 4)
    ]
    assert verdicts == [Verdict.RETRY] * 3 + [Verdict.OUT_OF_ATTEMPTS]


def test_a_refusal_is_reported_as_such_even_with_no_budget_left() -> None:
    retries = policy(Operation.WRITE, max_attempts=1)
    code = grpc.StatusCode.INVALID_ARGUMENT
    assert retries.decide(1, code, elapsed_s=99.0).verdict is Verdict.REFUSED


def test_no_backoff_may_end_at_or_past_the_total_timeout() -> None:
    commits = cms_client.commit_policy(attempt_timeout_s=5.0, total_timeout_s=30.0)
    code = grpc.StatusCode.UNAVAILABLE
    assert commits.decide(1, code, elapsed_s=29.97).verdict is Verdict.RETRY
    assert commits.decide(1, code, elapsed_s=29.99).verdict is Verdict.OUT_OF_TIME
    assert commits.decide(6, code, elapsed_s=29.5).verdict is Verdict.OUT_OF_TIME


def test_an_attempts_timeout_is_cut_to_what_is_left_of_the_total() -> None:
    commits = cms_client.commit_policy(attempt_timeout_s=5.0, total_timeout_s=30.0)
    assert commits.timeout_s(0.0) == 5.0
    assert commits.timeout_s(27.0) == pytest.approx(3.0)
    assert commits.timeout_s(31.0) == 0.01
    assert policy(Operation.READ).timeout_s(1e6) == 5.0  # no total: the attempt's own


def test_the_cms_clients_bounds_and_backoffs_are_the_readmes() -> None:
    commits = cms_client.commit_policy(attempt_timeout_s=5.0, total_timeout_s=30.0)
    assert (commits.max_attempts, commits.total_timeout_s) == (None, 30.0)
    assert [commits.backoff_s(n) for n in range(1, 7)] == [0.02, 0.04, 0.08, 0.16, 0.32, 0.5]
    reads = cms_client.read_policy(attempt_timeout_s=5.0, members=3)
    assert (reads.max_attempts, reads.backoff_s(1)) == (3, 0.0)


@pytest.mark.parametrize(
    "bounds",
    [
        {"max_attempts": None},  # nothing bounds it
        {"max_attempts": 0},
        {"first_backoff_s": 2.0, "max_backoff_s": 1.0},
        {"attempt_timeout_s": 0.0},
    ],
)
def test_an_unbounded_or_inconsistent_policy_is_refused(bounds: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetrySchedule(Operation.READ, **({"attempt_timeout_s": 1.0, "max_attempts": 3} | bounds))


# ---------------------------------------------------------------------- the loop


def failure(code: grpc.StatusCode, mutation_id: str = "") -> EpochalError:
    return error_for(code, f"{code.name} for the test", mutation_id=mutation_id)


class Script:
    """An attempt that fails with the given errors in turn, then answers; it records what
    each attempt carried."""

    def __init__(self, *failures: EpochalError) -> None:
        self.failures = list(failures)
        self.seen: list[Attempt] = []

    async def __call__(self, attempt: Attempt) -> str:
        self.seen.append(attempt)
        if self.failures:
            raise self.failures.pop(0)
        return "answered"


def no_wait(operation: Operation, max_attempts: int = 4) -> RetrySchedule:
    return RetrySchedule(operation, attempt_timeout_s=1.0, max_attempts=max_attempts)


def test_a_writes_attempts_carry_the_ids_the_table_says() -> None:
    script = Script(
        failure(grpc.StatusCode.UNAVAILABLE, mutation_id=NAMED),  # same: the id it names
        failure(grpc.StatusCode.DEADLINE_EXCEEDED),  # same: names none, keeps it
        failure(grpc.StatusCode.ABORTED, mutation_id=NAMED),  # fresh
    )
    assert asyncio.run(run(no_wait(Operation.WRITE), script)) == "answered"
    assert [(a.number, a.carry_id) for a in script.seen] == [
        (1, ""),
        (2, NAMED),
        (3, NAMED),
        (4, ""),
    ]


def test_a_refusal_ends_the_loop_with_the_servers_error() -> None:
    refusal = failure(grpc.StatusCode.FAILED_PRECONDITION)
    script = Script(refusal)
    with pytest.raises(EpochalError) as raised:
        asyncio.run(run(no_wait(Operation.READ), script, exhausted=lambda *_: AssertionError()))
    assert raised.value is refusal and len(script.seen) == 1


def test_out_of_attempts_the_last_error_or_what_the_caller_makes_of_it_is_raised() -> None:
    errors = [failure(grpc.StatusCode.UNAVAILABLE) for _ in range(3)]
    with pytest.raises(EpochalError) as raised:
        asyncio.run(run(no_wait(Operation.READ, 3), Script(*errors)))
    assert raised.value is errors[-1]

    def exhausted(last: Attempt, error: EpochalError) -> EpochalError:
        return EpochalError(f"gave up after {last.number}: {error.status}")

    with pytest.raises(EpochalError, match="gave up after 2: UNAVAILABLE"):
        asyncio.run(run(no_wait(Operation.READ, 2), Script(*errors), exhausted=exhausted))


def test_before_retry_runs_between_attempts_only() -> None:
    between: list[str | None] = []
    script = Script(failure(grpc.StatusCode.RESOURCE_EXHAUSTED), failure(grpc.StatusCode.INTERNAL))
    asyncio.run(
        run(no_wait(Operation.COMMIT), script, before_retry=lambda e: between.append(e.status))
    )
    assert between == ["RESOURCE_EXHAUSTED", "INTERNAL"]
    between.clear()
    with pytest.raises(EpochalError):
        asyncio.run(
            run(
                no_wait(Operation.COMMIT, 1),
                Script(failure(grpc.StatusCode.UNAVAILABLE)),
                before_retry=lambda e: between.append(e.status),
            )
        )
    assert between == []
