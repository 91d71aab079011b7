"""gRPC servicers of a CMS member: translate protobuf <-> domain values, call the loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from opentelemetry import trace

from epochal.cms.errors import CommitError, InvalidCommit
from epochal.cms.log_server import WatchClosed
from epochal.cms.member import CMSMemberLoop
from epochal.cms.peers import outcome_from_error
from epochal.cms.state_machine import CommitResult, ProposalItem, digest_of
from epochal.telemetry import tracer
from epochal.wire.handlers import require_parsed
from epochal.wire.metadata import MalformedInput, encode_transformation, transformation_from_proto
from epochal.wire.paxos import message_from_proto
from epochal.wire.v1 import cms_pb2

MAX_ENTRY_ID_CHARS = 128
_tracer = tracer("epochal.cms")


def parse_commit(request: cms_pb2.CommitRequest, max_transformation_bytes: int) -> ProposalItem:
    """The domain value of a commit request, encoded once; raises InvalidCommit with a message
    a person can act on."""
    entry_id = request.entry_id
    if not entry_id:
        raise InvalidCommit(
            "entry_id is required: any unique string of at most 128 characters; "
            "reuse it when you retry the same commit"
        )
    if len(entry_id) > MAX_ENTRY_ID_CHARS:
        raise InvalidCommit(f"entry_id is {len(entry_id)} characters; the limit is 128")
    if not request.HasField("transformation"):
        raise InvalidCommit("transformation is required")
    size = request.transformation.ByteSize()
    if size > max_transformation_bytes:
        raise InvalidCommit(
            f"transformation is {size} bytes; the limit is {max_transformation_bytes} "
            "(--max-transformation-bytes)"
        )
    try:
        transformation = transformation_from_proto(request.transformation)
    except MalformedInput as error:
        raise InvalidCommit(f"malformed transformation: {error}") from None
    # Re-encoded from the domain value: the canonical bytes, whatever the client sent.
    encoded = encode_transformation(transformation)
    return ProposalItem(transformation, encoded, entry_id, digest_of(encoded))


async def abort_with(context: grpc.aio.ServicerContext, error: CommitError) -> None:
    if error.rule:
        context.set_trailing_metadata((("epochal-rule", error.rule),))
    await context.abort(grpc.StatusCode[error.code], error.message)


class CMSServicer:
    def __init__(self, member: CMSMemberLoop) -> None:
        self.member = member

    async def Commit(
        self, request: cms_pb2.CommitRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.CommitResponse:
        await require_parsed(request, context)
        with _tracer.start_as_current_span("cms.commit", kind=trace.SpanKind.SERVER) as span:
            span.set_attribute("member", self.member.member_id)
            try:
                item = parse_commit(request, self.member.settings.max_transformation_bytes)
                span.set_attribute("kind", item.transformation.kind)
                result = await self.member.commit(item, request)
            except CommitError as error:
                span.set_attribute("outcome", error.rule or error.code)
                await abort_with(context, error)
                raise  # unreachable: abort raises
            _describe_span(span, self.member, result)
            return cms_pb2.CommitResponse(epoch=result.epoch, duplicate=result.duplicate)

    async def FetchLog(
        self, request: cms_pb2.FetchLogRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.FetchLogResponse:
        await require_parsed(request, context)
        with _tracer.start_as_current_span("cms.fetch_log", kind=trace.SpanKind.SERVER) as span:
            result = await self.member.fetch_log(
                request.since_epoch,
                request.max_entries,
                request.include_entry_ids,
                request.entries_only,
            )
            span.set_attribute("since_epoch", request.since_epoch)
            span.set_attribute("entries", len(result.entries))
            span.set_attribute("snapshot", result.snapshot is not None)
            return cms_pb2.FetchLogResponse(
                snapshot=result.snapshot,
                entries=result.entries,
                latest_epoch=result.latest_epoch,
                applied_slot=result.applied_slot,
                has_more=result.has_more,
            )

    async def Watch(
        self, request: cms_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cms_pb2.WatchEvent]:
        await require_parsed(request, context)
        subscription = self.member.log.subscribe()
        try:
            since = request.since_epoch
            while True:  # the backlog, page by page
                page = await self.member.fetch_log(since, 0, False)
                if page.snapshot is not None or page.entries:
                    yield cms_pb2.WatchEvent(
                        snapshot=page.snapshot, entries=page.entries, latest_epoch=page.latest_epoch
                    )
                if page.entries:
                    since = page.entries[-1].epoch
                elif page.snapshot is not None:
                    since = page.snapshot.metadata.epoch
                if not page.has_more:
                    break
            while True:  # then live events, skipping what the backlog already sent
                event = await subscription.queue.get()
                if isinstance(event, WatchClosed):
                    await context.abort(grpc.StatusCode[event.code], event.message)
                entries = [e for e in event.entries if e.epoch > since]
                if entries:
                    since = entries[-1].epoch
                    yield cms_pb2.WatchEvent(entries=entries, latest_epoch=event.latest_epoch)
        finally:
            self.member.log.unsubscribe(subscription)

    async def Describe(
        self, request: cms_pb2.DescribeRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.DescribeResponse:
        await require_parsed(request, context)
        if not self.member.started:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "this CMS member is still starting")
        return self.member.describe()


class CMSMemberServicer:
    def __init__(self, member: CMSMemberLoop) -> None:
        self.member = member

    async def Step(
        self, requests: AsyncIterator[cms_pb2.StepRequest], context: grpc.aio.ServicerContext
    ) -> cms_pb2.StepResponse:
        async for request in requests:
            await require_parsed(request, context)
            try:
                messages = [message_from_proto(m) for m in request.messages]
            except (ValueError, KeyError) as error:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad Paxos message: {error}")
            self.member.on_messages(messages)
        return cms_pb2.StepResponse()

    async def Forward(
        self, requests: AsyncIterator[cms_pb2.ForwardRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cms_pb2.ForwardResponse]:
        """Each batch is answered when all its commits are; answers leave in completion order."""
        answers: asyncio.Queue[cms_pb2.ForwardResponse | None] = asyncio.Queue()
        tasks: set[asyncio.Task[None]] = set()
        outstanding = 0

        async def answer(request: cms_pb2.ForwardRequest) -> None:
            # A known member names itself so that it learns its commits' slots from the votes.
            known = request.member_id in self.member.settings.peers
            origin = request.member_id if known else None
            futures = [self._one(c, origin) for c in request.commits]
            results = await asyncio.gather(*futures, return_exceptions=True)
            answers.put_nowait(
                cms_pb2.ForwardResponse(
                    outcomes=[_outcome(r) for r in results], batch_id=request.batch_id
                )
            )

        async def read() -> None:
            nonlocal outstanding
            try:
                async for request in requests:
                    await require_parsed(request, context)
                    outstanding += 1
                    task = asyncio.get_running_loop().create_task(answer(request))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            finally:
                answers.put_nowait(None)  # the follower closed its side

        reader = asyncio.get_running_loop().create_task(read())
        closed = False
        try:
            while not (closed and outstanding == 0):
                response = await answers.get()
                if response is None:
                    closed = True
                    continue
                outstanding -= 1
                yield response
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()

    def _one(
        self, request: cms_pb2.CommitRequest, origin: str | None
    ) -> asyncio.Future[CommitResult]:
        try:
            item = parse_commit(request, self.member.settings.max_transformation_bytes)
        except CommitError as error:
            future: asyncio.Future[CommitResult] = asyncio.get_running_loop().create_future()
            future.set_exception(error)
            return future
        return self.member.commit_forwarded(item, origin)


def _outcome(result: CommitResult | BaseException) -> cms_pb2.CommitOutcome:
    if isinstance(result, CommitError):
        return outcome_from_error(result)
    if isinstance(result, BaseException):
        raise result
    return cms_pb2.CommitOutcome(
        committed=cms_pb2.CommitResponse(epoch=result.epoch, duplicate=result.duplicate),
        batch_size=result.batch_size,
    )


def _describe_span(span: trace.Span, member: CMSMemberLoop, result: CommitResult) -> None:
    if not span.is_recording():
        return  # tracing is off: skip building the attributes on the commit path
    status = member.node.status()
    span.set_attribute("epoch", result.epoch)
    span.set_attribute("duplicate", result.duplicate)
    if result.batch_size:
        span.set_attribute("batch_size", result.batch_size)
    span.set_attribute("ballot", str(status.ballot or status.promised))
    span.set_attribute("outcome", "duplicate" if result.duplicate else "committed")
