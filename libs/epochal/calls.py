"""One SDK call as a series of attempts, within the call's timeout, as its retry policy decides.

Theory of operation
-------------------
``run`` starts the call's clock, then, until an attempt returns: gives the attempt what is left
of the call's timeout and the id to carry; after a failure records it (``AttemptRecord``: the
coordinator, the carried id, when and how long, the error), shows the policy a
``FailedAttempt`` and follows its ``RetryDecision`` — stop, or back off and go again with the
same id or a fresh one. A backoff that would end past the call's timeout stops the call, and so
does a policy that says stop or a failure with no time left.

When the call stops, the last attempt's error is raised — the last one a coordinator answered,
when later attempts reached none (a coordinator that cannot be reached says less than one that
counted the replicas) — told with the whole story: its message first (for a consistency
failure, the last replica group: who acknowledged, refused, did not answer), then how many
attempts over how long, then each other attempt in one line; its ``attempts`` field holds every
record. A retry thus never hides what an earlier attempt saw
(say, that a replica did not answer before the replicas began refusing the id).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import trace

from epochal.errors import AttemptRecord, EpochalError
from epochal.mtrack import MutationId, physical_ms_of
from epochal.policies import FailedAttempt, RetryPolicy
from epochal.sessions import no_answer
from epochal.status import Operation
from epochal.telemetry import attributes as attr
from epochal.telemetry.context import cancelled, failed, wanted

Result = TypeVar("Result")

EARLIER_MESSAGE_CHARS = 300  # of each earlier attempt's message in the final one

# The application's tracer provider, whenever it installs one (the SDK installs none).
_tracer = trace.get_tracer("epochal.client")


@dataclass(slots=True)
class Attempt:
    """One attempt, as the call's loop hands it out: the attempt sets ``coordinator`` once it
    has chosen one."""

    number: int  # 1 for the first
    carry_id: str  # the id it carries ("": none yet, or a fresh one)
    timeout_s: float  # what is left of the call's timeout
    coordinator: str = ""


async def run(
    operation: Operation,
    policy: RetryPolicy,
    timeout_s: float,
    attempt: Callable[[Attempt], Awaitable[Result]],
    *,
    what: str,
    attempt_timeout_s: float | None = None,
    carry_id: str = "",
    wall_ms: Callable[[], int],
    span: str = "",
    span_attributes: Mapping[str, Any] | None = None,
) -> Result:
    """Run ``attempt`` until it returns or the policy (or the time) says stop; ``what`` names
    the call in messages ("QUORUM write to shop.carts"); each attempt gets what is left of
    ``timeout_s``, at most ``attempt_timeout_s`` (None: no bound of its own); ``carry_id`` is
    the id the first attempt carries (a commit's entry id); ``wall_ms`` tells how old a
    mutation id is. When the application traces, the call is a CLIENT span named ``span``
    and each attempt a ``client.attempt`` child (whose context the attempt's request carries)."""
    if not (span and wanted()):
        return await _run(
            operation, policy, timeout_s, attempt, what, attempt_timeout_s, carry_id, wall_ms
        )
    with _tracer.start_as_current_span(
        span,
        kind=trace.SpanKind.CLIENT,
        attributes=span_attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as call_span:
        try:
            result = await _run(
                operation,
                policy,
                timeout_s,
                _traced(attempt, call_span),
                what,
                attempt_timeout_s,
                carry_id,
                wall_ms,
            )
        except EpochalError as error:
            failed(call_span, error)
            raise
        except asyncio.CancelledError:
            cancelled(call_span)
            raise
        call_span.set_attribute(attr.OUTCOME, attr.OK)
        return result


def _traced(
    attempt: Callable[[Attempt], Awaitable[Result]], call_span: trace.Span
) -> Callable[[Attempt], Awaitable[Result]]:
    """``attempt`` in a ``client.attempt`` span of its own, a child of ``call_span``."""

    async def traced(current: Attempt) -> Result:
        call_span.set_attribute(attr.ATTEMPTS, current.number)
        with _tracer.start_as_current_span(
            attr.CLIENT_ATTEMPT,
            kind=trace.SpanKind.CLIENT,
            attributes={attr.ATTEMPT: current.number},
            record_exception=False,
            set_status_on_exception=False,
        ) as attempt_span:
            try:
                result = await attempt(current)
            except EpochalError as error:
                attempt_span.set_attribute(attr.COORDINATOR, current.coordinator)
                failed(attempt_span, error)
                raise
            except asyncio.CancelledError:
                attempt_span.set_attribute(attr.COORDINATOR, current.coordinator)
                cancelled(attempt_span)
                raise
            attempt_span.set_attribute(attr.COORDINATOR, current.coordinator)
            attempt_span.set_attribute(attr.OUTCOME, attr.OK)
            return result

    return traced


async def _run(
    operation: Operation,
    policy: RetryPolicy,
    timeout_s: float,
    attempt: Callable[[Attempt], Awaitable[Result]],
    what: str,
    attempt_timeout_s: float | None,
    carry_id: str,
    wall_ms: Callable[[], int],
) -> Result:
    loop = asyncio.get_running_loop()
    started = loop.time()
    records: list[AttemptRecord] = []
    number = 1
    while True:
        begun = loop.time()
        left_s = started + timeout_s - begun
        current = Attempt(number, carry_id, min(left_s, attempt_timeout_s or left_s))
        try:
            return await attempt(current)
        except EpochalError as error:
            ended = loop.time()
            record = AttemptRecord(
                number, current.coordinator, carry_id, begun - started, ended - begun, error
            )
            records.append(record)
            remaining_s = started + timeout_s - ended
            # The id a retry would carry: the one the failure named, else the one carried.
            named_id = (error.mutation_id if operation is Operation.WRITE else "") or carry_id
            decision = policy.on_failure(
                FailedAttempt(
                    operation=operation,
                    attempt=record,
                    earlier=tuple(records[:-1]),
                    elapsed_s=ended - started,
                    remaining_s=remaining_s,
                    named_id=named_id,
                    named_id_age_s=_age_s(named_id, wall_ms())
                    if operation is Operation.WRITE
                    else None,
                )
            )
            if not decision.retry or decision.backoff_s >= remaining_s:
                raise _told(what, records, ended - started, timeout_s, decision.retry) from None
            if decision.backoff_s > 0:
                await asyncio.sleep(decision.backoff_s)
        if operation is not Operation.COMMIT:  # a commit keeps its entry id, always
            carry_id = "" if decision.fresh_id else named_id
        number += 1


def _age_s(packed_id: str, now_ms: int) -> float | None:
    """How old a write's mutation id is, by its HLC's physical part (None: no id)."""
    if not packed_id:
        return None
    try:
        hlc = MutationId.unpack(bytes.fromhex(packed_id)).hlc
    except ValueError:
        return None
    return max(now_ms - physical_ms_of(hlc), 0) / 1000


def _told(
    what: str,
    records: list[AttemptRecord],
    elapsed_s: float,
    timeout_s: float,
    out_of_time: bool,
) -> EpochalError:
    """The last attempt's error — the last one a coordinator answered, when a later attempt
    reached none — told with every attempt (the module docstring)."""
    answered = [record for record in records if not no_answer(record.error)]
    chosen = answered[-1] if answered else records[-1]
    last = chosen.error
    how = f"{what} failed after {len(records)} attempt(s) in {elapsed_s:.2f} s"
    if out_of_time:
        how += f" (the call's timeout is {timeout_s:g} s)"
    lines = [f"{last.message} [{how}; attempt {chosen.number} via {chosen.coordinator}]"]
    for record in records:
        if record is chosen:
            continue
        line = record.describe()
        if len(line) > EARLIER_MESSAGE_CHARS:
            line = line[:EARLIER_MESSAGE_CHARS] + "\u2026"
        lines.append(line)
    told = lines[0] if len(lines) == 1 else f"{lines[0]}; other attempts: {'; '.join(lines[1:])}"
    return last.with_attempts(tuple(records), told)
