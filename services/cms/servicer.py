"""gRPC servicers of a CMS member: translate protobuf <-> domain values, call the loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from typing import Literal

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace

from epochal.cms.codec import (
    describe_to_proto,
    fetch_response_to_proto,
    item_from_proto,
    outcome_to_proto,
    parse_commit,
    watch_event_to_proto,
)
from epochal.cms.commit_tracing import describe_commit, forwarded
from epochal.cms.member import CMSMemberLoop
from epochal.cms.metrics import CMSMetrics
from epochal.cms.status import abort_with, code_of
from epochal.cmscore.state_machine import CommitResult
from epochal.errors import EpochalError, InvalidRequest, ShuttingDown, Unavailable
from epochal.telemetry import attributes as attr
from epochal.telemetry import tracer
from epochal.telemetry.context import failed, recorded_parent_of, wanted
from epochal.wire.handlers import finished_before, reraise_from
from epochal.wire.paxos import message_from_proto
from epochal.wire.v1 import cms_pb2

_tracer = tracer("epochal.cms")


class CMSServicer:
    # Their own SERVER spans, children of the caller's (epochal.wire.handlers).
    TRACED_METHODS = frozenset({"Commit", "FetchLog"})

    def __init__(self, member: CMSMemberLoop, metrics: CMSMetrics | None = None) -> None:
        self.member = member
        self.metrics = metrics

    async def Commit(
        self, request: cms_pb2.CommitRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.CommitResponse:
        commit_span = (
            _tracer.start_as_current_span(
                attr.CMS_COMMIT,
                kind=trace.SpanKind.SERVER,
                record_exception=False,
                set_status_on_exception=False,
            )
            if wanted()
            else contextlib.nullcontext(trace.INVALID_SPAN)
        )
        started = time.monotonic()
        kind = request.transformation.WhichOneof("kind") or ""
        with commit_span as span:
            span.set_attribute(attr.MEMBER, self.member.member_id)
            try:
                item = parse_commit(request, self.member.settings.max_transformation_bytes)
                span.set_attribute(attr.TRANSFORMATION, item.transformation.kind)
                span.set_attribute(attr.ENTRY_ID, item.entry_id)
                result = await self.member.commit(item)
            except EpochalError as error:
                if span.is_recording():
                    failed(span, error, code_of(error))
                if self.metrics is not None:
                    self.metrics.committed(kind, error, time.monotonic() - started)
                await abort_with(context, error)
                raise  # unreachable: abort raises
            except asyncio.CancelledError:  # the client went away: a failure, as it saw it
                if self.metrics is not None:
                    self.metrics.committed(
                        kind, Unavailable("cancelled"), time.monotonic() - started
                    )
                raise
            if self.metrics is not None:
                self.metrics.committed(kind, None, time.monotonic() - started)
            if span.is_recording():  # tracing is off: skip building the attributes
                describe_commit(span, result, _ballot(self.member))
            return cms_pb2.CommitResponse(epoch=result.epoch, duplicate=result.duplicate)

    async def FetchLog(
        self, request: cms_pb2.FetchLogRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.FetchLogResponse:
        fetch_span = (
            _tracer.start_as_current_span(attr.CMS_FETCH_LOG, kind=trace.SpanKind.SERVER)
            if wanted()
            else contextlib.nullcontext(trace.INVALID_SPAN)
        )
        with fetch_span as span:
            result = await self.member.fetch_log(
                request.since_epoch,
                request.max_entries,
                request.include_entry_ids,
                request.entries_only,
            )
            span.set_attribute(attr.SINCE_EPOCH, request.since_epoch)
            span.set_attribute(attr.ENTRIES, len(result.entries))
            span.set_attribute(attr.SNAPSHOT, result.snapshot is not None)
            return fetch_response_to_proto(result)

    async def Watch(
        self, request: cms_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cms_pb2.WatchEvent]:
        subscription = self.member.log.subscribe()
        try:
            since = request.since_epoch
            while True:  # the backlog, page by page
                page = await self.member.fetch_log(since, 0, False)
                if page.snapshot is not None or page.entries:
                    yield watch_event_to_proto(page.entries, page.latest_epoch, page.snapshot)
                if page.entries:
                    since = page.entries[-1].epoch
                elif page.snapshot is not None:
                    since = page.snapshot.row.epoch
                if not page.has_more:
                    break
            while True:  # then live events, skipping what the backlog already sent
                event = await subscription.queue.get()
                if isinstance(event, EpochalError):
                    await abort_with(context, event)
                entries = [e for e in event.entries if e.epoch > since]
                if entries:
                    since = entries[-1].epoch
                    yield watch_event_to_proto(entries, event.latest_epoch)
        finally:
            self.member.log.unsubscribe(subscription)

    async def Describe(
        self, request: cms_pb2.DescribeRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.DescribeResponse:
        return describe_to_proto(self.member.describe())


class CMSMemberServicer:
    def __init__(self, member: CMSMemberLoop) -> None:
        self.member = member

    async def Step(
        self, requests: AsyncIterator[cms_pb2.StepRequest], context: grpc.aio.ServicerContext
    ) -> cms_pb2.StepResponse:
        """A peer's Paxos messages, until it closes the stream or this member stops."""
        if not await finished_before(self._take_steps(requests, context), self.member.closing):
            await abort_with(context, ShuttingDown(_shutting_down(self.member)))
        return cms_pb2.StepResponse()

    async def _take_steps(
        self, requests: AsyncIterator[cms_pb2.StepRequest], context: grpc.aio.ServicerContext
    ) -> None:
        async for request in requests:
            try:
                messages = [message_from_proto(m) for m in request.messages]
            except (ValueError, KeyError) as error:
                await abort_with(context, InvalidRequest(f"bad Paxos message: {error}"))
            parent = recorded_parent_of(request)  # False: an unsampled round's, left unread
            if parent is not None and parent is not False:
                with _tracer.start_as_current_span(
                    attr.CMS_STEP,
                    context=parent,
                    kind=trace.SpanKind.SERVER,
                    attributes={
                        attr.MEMBER: self.member.member_id,
                        attr.MESSAGES: sorted({type(m).__name__ for m in messages}),
                    },
                ):
                    self.member.on_messages(messages)
            else:
                self.member.on_messages(messages)

    async def Forward(
        self, requests: AsyncIterator[cms_pb2.ForwardRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cms_pb2.ForwardResponse]:
        """Answers, as they settle, the forwarded commits this leader does not carry in a slot.
        A follower that names itself is a learner of the slots that carry its commits and
        learns their outcome from the votes; one that does not is answered everything."""
        answers: dict[int, list[cms_pb2.CommitOutcome]] = {}  # batch id -> outcomes
        wake = asyncio.Event()
        unsettled = 0
        closed = False

        def settled(
            batch_id: int, index: int, learns: bool, future: asyncio.Future[CommitResult]
        ) -> None:
            nonlocal unsettled
            unsettled -= 1
            error = future.exception()
            if error is None:
                result = future.result()
                if learns and result.slot:
                    wake.set()
                    return  # the follower learns it by applying that slot
                outcome = outcome_to_proto(result, index)
            elif isinstance(error, EpochalError):
                outcome = outcome_to_proto(error, index)
            else:
                raise error  # a bug: let the loop's exception handler report it
            answers.setdefault(batch_id, []).append(outcome)
            wake.set()

        async def read() -> None:
            nonlocal unsettled, closed
            try:
                async for request in requests:
                    known = request.member_id in self.member.settings.peers
                    origin = request.member_id if known else None
                    traces = request.traces
                    for index, proto in enumerate(request.items):
                        parent = recorded_parent_of(traces[index]) if index < len(traces) else None
                        future = self._one(proto, origin, parent)
                        unsettled += 1
                        future.add_done_callback(
                            functools.partial(settled, request.batch_id, index, known)
                        )
            finally:
                closed = True
                wake.set()

        loop = asyncio.get_running_loop()
        reader = loop.create_task(read())
        # This member stopping: take no more commits; those taken are answered (the drain
        # settles them), then the stream ends.
        closing = loop.create_task(self.member.closing.wait())
        closing.add_done_callback(lambda _: reader.cancel())
        try:
            while not (closed and unsettled == 0 and not answers):
                await wake.wait()
                wake.clear()
                ready, answers = answers, {}
                for batch_id, outcomes in ready.items():
                    yield cms_pb2.ForwardResponse(outcomes=outcomes, batch_id=batch_id)
        finally:
            reader.cancel()
            closing.cancel()
        reraise_from(reader)  # a request that did not parse: INVALID_ARGUMENT
        if self.member.closing.is_set():
            await abort_with(context, ShuttingDown(_shutting_down(self.member)))

    def _one(
        self,
        proto: cms_pb2.ProposalItem,
        origin: str | None,
        parent: otel_context.Context | Literal[False] | None,
    ) -> asyncio.Future[CommitResult]:
        try:
            item = item_from_proto(proto)
        except EpochalError as error:
            future: asyncio.Future[CommitResult] = asyncio.get_running_loop().create_future()
            future.set_exception(error)
            return future
        return forwarded(
            self.member.member_id,
            parent,
            item.transformation.kind,
            lambda: self.member.commit_forwarded(item, origin),
            lambda: _ballot(self.member),
        )


def _shutting_down(member: CMSMemberLoop) -> str:
    return f"{member.member_id} is shutting down; try another member"


def _ballot(member: CMSMemberLoop) -> str:
    status = member.node.status()
    return str(status.ballot or status.promised)
