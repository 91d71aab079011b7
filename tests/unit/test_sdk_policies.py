"""Retry policies as objects (epochal.policies) and a call as attempts (epochal.calls): the
default policy follows the retry table, its attempt budget and doubling backoff, reuses a
write's id only while the replicas would still take it, and keeps a commit's entry id; a custom
policy sees every attempt with its reason and is obeyed; the final error is the last attempt's,
told with every attempt."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from epochal.calls import Attempt, run
from epochal.errors import (
    AttemptRecord,
    ConnectionFailed,
    EpochalError,
    InvalidRequest,
    ReplicaOutcome,
    TimedOut,
    Unavailable,
)
from epochal.mtrack import MutationId, make_hlc
from epochal.policies import (
    DefaultRetryPolicy,
    FailedAttempt,
    NeverRetryPolicy,
    RetryDecision,
    RetryPolicy,
)
from epochal.status import Operation

NOW_MS = 1_800_000_000_000


def packed(age_ms: int) -> str:
    """A mutation id issued ``age_ms`` before NOW_MS, as a failure names it."""
    return MutationId(node=1, log=1, sequence=7, hlc=make_hlc(NOW_MS - age_ms)).pack().hex()


def failed(
    operation: Operation,
    error: EpochalError,
    *,
    number: int = 1,
    carried: str = "",
    age_s: float | None = None,
) -> FailedAttempt:
    record = AttemptRecord(number, "127.0.0.1:9001", carried, 0.0, 0.1, error)
    return FailedAttempt(
        operation=operation,
        attempt=record,
        earlier=(),
        elapsed_s=0.1,
        remaining_s=9.9,
        named_id=error.mutation_id or carried,
        named_id_age_s=age_s,
    )


def unavailable(mutation_id: str = "") -> EpochalError:
    return Unavailable("too few replicas", mutation_id=mutation_id, status="UNAVAILABLE")


def test_the_default_policy_retries_what_the_table_retries_with_a_doubling_backoff() -> None:
    policy = DefaultRetryPolicy(max_retries=3)
    decisions = [
        policy.on_failure(failed(Operation.READ, unavailable(), number=n)) for n in range(1, 5)
    ]
    assert [d.retry for d in decisions] == [True, True, True, False]
    assert [d.backoff_s for d in decisions[:3]] == [0.1, 0.2, 0.4]
    refused = InvalidRequest("bad column", status="INVALID_ARGUMENT")
    assert not policy.on_failure(failed(Operation.WRITE, refused)).retry
    own = InvalidRequest("the client's own refusal")  # no status: never retried
    assert not policy.on_failure(failed(Operation.READ, own)).retry


def test_a_write_keeps_its_id_while_the_replicas_take_it_and_gets_a_fresh_one_after() -> None:
    policy = DefaultRetryPolicy(write_timeout_s=2.0)
    young = policy.on_failure(failed(Operation.WRITE, unavailable(packed(500)), age_s=0.5))
    assert young == RetryDecision.same_id(0.1)
    old = policy.on_failure(failed(Operation.WRITE, unavailable(packed(1950)), age_s=1.95))
    assert old == RetryDecision.with_fresh_id(0.1)  # 1.95 s + the backoff reach 2 s
    no_id = policy.on_failure(failed(Operation.WRITE, unavailable()))
    assert no_id == RetryDecision.with_fresh_id(0.1)  # the coordinator named none
    aborted = EpochalError("refused for good", status="ABORTED", mutation_id=packed(10))
    assert policy.on_failure(failed(Operation.WRITE, aborted, age_s=0.01)).fresh_id


def test_a_commit_is_retried_until_the_calls_timeout_with_its_entry_id() -> None:
    policy = DefaultRetryPolicy(max_retries=0)
    leaderless = Unavailable("electing", status="UNAVAILABLE")
    decisions = [
        policy.on_failure(failed(Operation.COMMIT, leaderless, number=n, carried="entry-1"))
        for n in (1, 10, 100)
    ]
    assert all(d.retry and not d.fresh_id for d in decisions)
    assert [d.backoff_s for d in decisions] == [0.02, 0.5, 0.5]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        DefaultRetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="write_timeout_s"):
        DefaultRetryPolicy(write_timeout_s=0)
    with pytest.raises(ValueError, match="backoff_s"):
        RetryDecision(True, backoff_s=-1)


class Recording(RetryPolicy):
    """Retries ``times`` more times with the same id, recording what it was shown."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.seen: list[FailedAttempt] = []

    def on_failure(self, failed: FailedAttempt) -> RetryDecision:
        self.seen.append(failed)
        return RetryDecision.same_id() if failed.number <= self.times else RetryDecision.stop()


def attempts_failing_with(errors: list[EpochalError]) -> tuple[list[Attempt], object]:
    made: list[Attempt] = []

    async def attempt(current: Attempt) -> str:
        made.append(current)
        current.coordinator = f"node{current.number}:9000"
        if current.number <= len(errors):
            raise errors[current.number - 1]
        return "done"

    return made, attempt


def call(policy: RetryPolicy, errors: list[EpochalError], timeout_s: float = 5.0) -> str:
    _, attempt = attempts_failing_with(errors)

    async def main() -> str:
        return await run(
            Operation.WRITE,
            policy,
            timeout_s,
            attempt,  # type: ignore[arg-type]
            what="QUORUM write to ks.t",
            wall_ms=lambda: NOW_MS,
        )

    return asyncio.run(main())


def test_a_custom_policy_sees_each_attempt_and_its_reason_and_is_obeyed() -> None:
    first = TimedOut("no answer", status="DEADLINE_EXCEEDED", mutation_id=packed(100))
    errors: list[EpochalError] = [first, unavailable(packed(100)), unavailable(packed(100))]
    twice = Recording(times=2)
    with pytest.raises(Unavailable) as raised:
        call(twice, errors)
    assert [f.number for f in twice.seen] == [1, 2, 3]  # it retried twice, then stopped
    assert [f.reason for f in twice.seen] == [
        "DEADLINE_EXCEEDED/timeout",
        "UNAVAILABLE/unavailable",
        "UNAVAILABLE/unavailable",
    ]
    assert [len(f.earlier) for f in twice.seen] == [0, 1, 2]
    assert twice.seen[1].attempt.carried_id == packed(100)  # the id the first failure named
    assert twice.seen[0].named_id_age_s == pytest.approx(0.1)
    assert [r.coordinator for r in raised.value.attempts] == [
        "node1:9000",
        "node2:9000",
        "node3:9000",
    ]
    never = Recording(times=0)
    with pytest.raises(TimedOut) as once:
        call(never, errors)
    assert len(never.seen) == 1 and len(once.value.attempts) == 1
    assert call(Recording(times=2), errors[:2]) == "done"  # the third attempt succeeded


def test_the_final_error_is_the_last_attempts_told_with_every_attempt() -> None:
    outcome = ReplicaOutcome(
        "ALL",
        3,
        ("node-1", "node-2", "node-3"),
        acknowledged=("node-1", "node-2"),
        not_answering=(("node-3", "no answer within 2000 ms"),),
    )
    last = TimedOut("ALL write timed out", status="DEADLINE_EXCEEDED", replicas=outcome)
    with pytest.raises(TimedOut) as raised:
        call(
            DefaultRetryPolicy(max_retries=1, first_backoff_s=0, max_backoff_s=0),
            [
                unavailable(packed(10)),
                last,
            ],
        )
    error = raised.value
    assert error.replicas == outcome  # the last group, as the fields say
    assert error.message.startswith("ALL write timed out [QUORUM write to ks.t failed after 2")
    assert "other attempts: attempt 1 via node1:9000" in error.message
    assert [type(r.error) for r in error.attempts] == [Unavailable, TimedOut]
    assert error is not last and last.attempts == ()  # the attempt's own error is untouched


def test_the_calls_timeout_stops_a_backoff_that_would_end_past_it() -> None:
    slow = DefaultRetryPolicy(max_retries=5, first_backoff_s=1.0, max_backoff_s=1.0)
    with pytest.raises(Unavailable) as raised:
        call(slow, [unavailable()] * 6, timeout_s=0.5)
    assert len(raised.value.attempts) == 1
    assert "(the call's timeout is 0.5 s)" in raised.value.message


def test_never_retry_makes_one_attempt() -> None:
    with pytest.raises(Unavailable) as raised:
        call(NeverRetryPolicy(), [unavailable()])
    assert len(raised.value.attempts) == 1
    assert grpc.StatusCode.UNAVAILABLE.name == raised.value.status


def test_a_failure_that_names_no_id_leaves_the_carried_one_and_its_age_to_the_policy() -> None:
    first = unavailable(packed(1_500))  # the coordinator named its id: 1.5 s old
    unreachable = ConnectionFailed("no route", address="node2:9000", status="UNAVAILABLE")
    recording = Recording(times=2)
    with pytest.raises(EpochalError):
        call(recording, [first, unreachable, unavailable()])
    second = recording.seen[1]
    assert second.named_id == packed(1_500)  # carried on, though this failure named none
    assert second.named_id_age_s == pytest.approx(1.5)
    assert recording.seen[2].attempt.carried_id == packed(1_500)
    # ... and the default policy, told its age, sends the write afresh past the write timeout.
    assert DefaultRetryPolicy(write_timeout_s=1.0).on_failure(second).fresh_id


def test_the_final_error_is_the_last_a_coordinator_answered_not_a_later_silence() -> None:
    outcome = ReplicaOutcome("ALL", 3, ("a", "b", "c"), acknowledged=("a", "b"))
    counted = Unavailable("too few replicas", status="UNAVAILABLE", replicas=outcome)
    silence = ConnectionFailed("no SETTINGS frame", address="node3:9000", status="UNAVAILABLE")
    with pytest.raises(Unavailable) as raised:
        call(Recording(times=1), [counted, silence])
    error = raised.value
    assert error.replicas == outcome and not isinstance(error, ConnectionFailed)
    assert "[QUORUM write to ks.t failed after 2 attempt(s)" in error.message
    assert "attempt 1 via node1:9000]" in error.message
    assert "other attempts: attempt 2 via node2:9000" in error.message
    assert [type(r.error) for r in error.attempts] == [Unavailable, ConnectionFailed]
