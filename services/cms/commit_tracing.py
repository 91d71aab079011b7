"""A commit's trace through the CMS: the member a client reached, the leader, the Paxos round.

- The member a client's ``Commit`` reached serves it in a ``cms.commit`` SERVER span, a child of
  the client's (gRPC metadata, ``epochal.wire.handlers``). Forwarded to the leader, the commit
  carries that span's context in the ``ForwardRequest`` (``traces``, by item), and the leader
  serves it in a ``cms.commit`` span of its own, a child of the follower's: one trace.
- On the member that leads, the commit's span gets an event per phase: ``queued`` (in the next
  batch), ``validated`` (the batch was checked against the metadata and proposed), ``accepted``
  (the leader learnt its slot chosen by a quorum — before it sends what tells the others, so no
  node applies the epoch earlier), ``applied`` (applied at the leader: in that step, or a loop
  step later when writes are queued, by which time a follower may have applied it too),
  ``answered`` (the caller was answered).
- A ``paxos.round`` span covers one slot this leader proposed, from its proposal to its apply
  (or abandonment), linked to the commit span of every commit it carries: a round carries many
  commits of many traces, so it is a root of its own with links, not anyone's child.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace

from epochal.cms.status import code_of
from epochal.cmscore import effects as fx
from epochal.cmscore.state_machine import CommitResult
from epochal.errors import EpochalError
from epochal.telemetry import attributes as attr
from epochal.telemetry.context import end_when_done, headers_of, tracing, wanted

_tracer = trace.get_tracer("epochal.cms")


def describe_commit(span: trace.Span, result: CommitResult, ballot: str) -> None:
    """What a commit's outcome says, on its span (``ballot``: the member's, as it answered)."""
    span.set_attribute(attr.BALLOT, ballot)
    span.set_attribute(attr.EPOCH, result.epoch)
    span.set_attribute(attr.DUPLICATE, result.duplicate)
    if result.batch_size:
        span.set_attribute(attr.BATCH_SIZE, result.batch_size)
    span.set_attribute(attr.OUTCOME, attr.DUPLICATE_COMMIT if result.duplicate else attr.COMMITTED)


class CommitTraces:
    """The spans of the commits this member queued (by entry id) and of its current round."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self._queued: dict[str, trace.Span] = {}
        self._round: trace.Span | None = None
        self._round_commits: list[trace.Span] = []
        self._round_chosen = 0  # the slot the current round's value was chosen at, once it was

    def queued(self, entry_id: str, answer: asyncio.Future[CommitResult]) -> None:
        """A commit joined the leader's queue, in its span (the current one), if it has one."""
        span = trace.get_current_span()
        if not span.is_recording():
            return
        span.add_event(attr.PHASE_QUEUED)
        self._queued[entry_id] = span
        answer.add_done_callback(lambda _: self._answered(entry_id, span))

    def _answered(self, entry_id: str, span: trace.Span) -> None:
        span.add_event(attr.PHASE_ANSWERED)
        if self._queued.get(entry_id) is span:
            del self._queued[entry_id]

    def round_in_flight(self) -> bool:
        return self._round is not None

    def round_chosen(self, slot: int) -> None:
        """A quorum accepted the current round's value at ``slot`` (0: chose another value):
        its commits' ``accepted`` event, now — before the leader tells the others, so no node
        can apply the epoch before this time; it applies it a step later or more."""
        if not slot or self._round is None or self._round_chosen:
            return
        self._round_chosen = slot
        for commit in self._round_commits:
            commit.add_event(attr.PHASE_ACCEPTED, {attr.SLOT: slot})

    def round_headers(self) -> dict[str, str]:
        """The current round's context, for the Paxos messages sent while it runs."""
        return {} if self._round is None else headers_of(self._round)

    def round_effect(self, effect: fx.RoundStarted | fx.RoundEnded) -> None:
        if isinstance(effect, fx.RoundStarted):
            self._round_started(effect)
        else:
            self._round_ended(effect)

    def _round_started(self, effect: fx.RoundStarted) -> None:
        if not tracing():
            return
        commits = [self._queued[e] for e in effect.entry_ids if e in self._queued]
        for span in commits:
            span.add_event(attr.PHASE_VALIDATED)
        self._round_commits = commits
        self._round_chosen = 0
        self._round = _tracer.start_span(
            attr.PAXOS_ROUND,
            context=otel_context.Context(),  # a root: it carries many traces' commits
            links=[trace.Link(span.get_span_context()) for span in commits],
            attributes={
                attr.BATCH_SIZE: effect.batch_size,
                attr.BALLOT: effect.ballot,
                attr.MEMBER: self.member_id,
            },
        )

    def _round_ended(self, effect: fx.RoundEnded) -> None:
        span, self._round = self._round, None
        commits, self._round_commits = self._round_commits, []
        chosen, self._round_chosen = self._round_chosen, 0
        if span is None:
            return
        if effect.slot:
            span.set_attribute(attr.SLOT, effect.slot)
            span.set_attribute(attr.OUTCOME, attr.OK)
            for commit in commits:
                if chosen != effect.slot:  # learnt otherwise (a state transfer): now, then
                    commit.add_event(attr.PHASE_ACCEPTED, {attr.SLOT: effect.slot})
                commit.add_event(attr.PHASE_APPLIED, {attr.SLOT: effect.slot})
        else:
            span.set_attribute(attr.OUTCOME, "abandoned")
        span.end()


def forwarded(
    member_id: str,
    parent: otel_context.Context | Literal[False] | None,
    kind: str,
    commit: Callable[[], asyncio.Future[CommitResult]],
    ballot: Callable[[], str],
) -> asyncio.Future[CommitResult]:
    """``commit()``'s future, served in the leader's ``cms.commit`` span, a child of the
    forwarding member's (``parent``, as ``recorded_parent_of`` read it: False for no span);
    untraced when this member does not trace."""
    if parent is False or not wanted(parent):
        return commit()
    span = _tracer.start_span(
        attr.CMS_COMMIT,
        context=parent,
        kind=trace.SpanKind.SERVER,
        attributes={attr.MEMBER: member_id, attr.TRANSFORMATION: kind, attr.FORWARDED: False},
    )
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        future = commit()
    finally:
        otel_context.detach(token)

    def describe(traced: trace.Span, result: Any) -> None:
        describe_commit(traced, result, ballot())

    end_when_done(span, future, describe, _code_of)
    return future


def _code_of(error: BaseException) -> grpc.StatusCode | None:
    """The status the follower answers its client with (the error travels back to it)."""
    return code_of(error) if isinstance(error, EpochalError) else None
