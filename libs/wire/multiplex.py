"""Many requests over one gRPC bidirectional stream, each answered by its id.

A unary call costs far more CPU than a message on an open stream (call set-up, metadata, status,
and their thread hops), so the SDK's requests to a replica (``Replica.Session``) and a
coordinator's requests to another replica (``ReplicaPeer.Exchange``) travel as messages of one
long-lived stream per peer. Both ends batch: what queued while the last batch was written goes
in the next one.

Theory of operation, client side (``Multiplexer``): ``call`` gives the request the next id,
queues it and returns a future at once; one writer task per stream sends the queue in batches,
one reader settles futures as answers arrive, in any order. A request waits at most its timeout
(a timer, not a task). When the stream breaks, every request on it fails at once with
``StreamFailed`` (the caller decides whether to retry, e.g. with the same mutation id), and the
next call opens a new stream. Requests in flight are bounded.

Server side (``serve``): each request is handed to a function that answers with a reply, or a
future of one; replies are written back in batches as they are ready. A batch that does not
parse aborts the stream with INVALID_ARGUMENT; the end of the client's stream ends the call once
every request is answered. When the server stops (``closing``), the stream takes no more
requests, answers those it took, and ends with UNAVAILABLE: the client fails whatever it had
still queued on it as UNAVAILABLE too, and retries it elsewhere.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from epochal.telemetry.context import detached
from epochal.wire.handlers import reraise_from
from epochal.wire.status import abort_status

log = logging.getLogger(__name__)

MAX_BATCH = 512
# A batch stays well under the channels' message limit (epochal.wire.channels), and so does one
# request: a message over the limit would break the stream for every request on it.
MAX_BATCH_BYTES = 16 << 20
MAX_REQUEST_BYTES = 48 << 20


def _take_batch(queue: list[Any], keep: Callable[[Any], bool]) -> list[Any]:
    """Pop the next batch off ``queue`` (at most MAX_BATCH messages and MAX_BATCH_BYTES, at
    least one message), dropping those ``keep`` refuses (expired requests)."""
    batch: list[Any] = []
    size = 0
    while queue and len(batch) < MAX_BATCH:
        message = queue[0]
        if not keep(message):
            queue.pop(0)
            continue
        message_size = message.ByteSize()
        if batch and size + message_size > MAX_BATCH_BYTES:
            break
        batch.append(queue.pop(0))
        size += message_size
    return batch


def _code_of(error: BaseException) -> grpc.StatusCode:
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code()
    return grpc.StatusCode.UNAVAILABLE


class StreamFailed(Exception):
    """The request got no answer: the stream broke, or the timeout passed."""

    def __init__(self, reason: str, *, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


def describe(error: BaseException) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details() or 'no details'}"
    return f"{type(error).__name__}: {error}"


# grpc's asyncio client, when a write fails because the peer has just ended the call, puts its own
# status, INTERNAL with these details, in place of the one the peer ended the call with (its
# UNAVAILABLE "shutting down"), which had arrived while the write was under way. ``watch`` keeps
# the first status a call ends with, so that the peer's reason survives.
CORE_LOST_STATUS = "Internal error from Core"
_CODES = {code.value[0]: code for code in grpc.StatusCode}
_first_status: weakref.WeakKeyDictionary[Any, tuple[grpc.StatusCode, str]] = (
    weakref.WeakKeyDictionary()
)


def _lost_status(code: grpc.StatusCode | None, details: str | None) -> bool:
    return code is grpc.StatusCode.INTERNAL and details == CORE_LOST_STATUS


def watch(call: Any) -> Any:
    """``call``, its first status kept for ``ended_with``. The status is read off grpc's call
    object as it is set (no public way to); where a grpc release lacks it, nothing is kept and
    ``ended_with`` says only that the stream ended under a write."""

    def keep(done: Any) -> None:
        status = getattr(getattr(done, "_cython_call", None), "_status", None)
        if status is not None:
            _first_status.setdefault(done, (_CODES.get(status.code()), status.details()))

    call.add_done_callback(keep)
    return call


async def ended_with(call: Any) -> tuple[str, grpc.StatusCode]:
    """The status the peer ended ``call`` with, as (reason, code). Where grpc replaced it with
    its INTERNAL "Internal error from Core" (a write raced the peer's end of the call), the
    status ``watch`` kept; without one, the stream ended while a batch was being written to it
    and what was written did not reach the peer: UNAVAILABLE, as any stream that went away."""
    code, details = await call.code(), await call.details()
    if _lost_status(code, details):
        code, details = _first_status.get(call, (None, None))
        if code is None or _lost_status(code, details):
            reason = "the stream ended while a batch was being written to it"
            return reason, grpc.StatusCode.UNAVAILABLE
    return f"{code.name}: {details or 'no details'}", code


async def why_broken(call: Any, error: BaseException) -> tuple[str, grpc.StatusCode]:
    """Why a stream call failed, and the status to fail its requests with. A write to a call
    the peer has already ended raises ``asyncio.InvalidStateError``, which says only that, or
    grpc's INTERNAL "Internal error from Core" (``ended_with``): the reason is the status the
    peer ended it with (its ``UNAVAILABLE: cms2 is shutting down``)."""
    ended_under_a_write = isinstance(error, asyncio.InvalidStateError) or (
        isinstance(error, grpc.aio.AioRpcError) and _lost_status(error.code(), error.details())
    )
    if ended_under_a_write and call is not None and call.done():
        return await ended_with(call)
    return describe(error), _code_of(error)


def _stream_failed(reason: str, code: grpc.StatusCode) -> Exception:
    return StreamFailed(reason, code=code)


class Multiplexer:
    """Client side of one stream (see the module docstring).

    ``open_call`` starts the stream-stream call; ``batch`` wraps a list of requests into one
    message; requests and replies carry an ``id`` field; a reply batch lists them in
    ``replies``. ``failure`` makes the exception a request fails with (default
    ``StreamFailed``); a call's ``convert`` turns its reply into its result (what it raises,
    the future raises)."""

    def __init__(
        self,
        open_call: Callable[[], Any],
        batch: Callable[[list[Any]], Any],
        *,
        max_in_flight: int,
        name: str,
        failure: Callable[[str, grpc.StatusCode], Exception] = _stream_failed,
    ) -> None:
        self._open_call = open_call
        self._batch = batch
        self._max_in_flight = max_in_flight
        self._failure = failure
        self.name = name
        self._ids = itertools.count(1)
        self._queue: list[Any] = []
        self._waiting: dict[int, tuple[asyncio.Future[Any], Callable[[Any], Any] | None]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def call(
        self, request: Any, timeout_s: float, convert: Callable[[Any], Any] | None = None
    ) -> asyncio.Future[Any]:
        """Send ``request`` (its id is set here); the future settles with the (converted)
        reply."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if len(self._waiting) >= self._max_in_flight:
            future.set_exception(
                self._failure(
                    f"{self._max_in_flight} requests already in flight to {self.name}",
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                )
            )
            return future
        if request.ByteSize() > MAX_REQUEST_BYTES:
            future.set_exception(
                self._failure(
                    f"a request of {request.ByteSize()} bytes cannot go to {self.name} (the "
                    f"limit is {MAX_REQUEST_BYTES})",
                    grpc.StatusCode.INVALID_ARGUMENT,
                )
            )
            return future
        request.id = next(self._ids)
        self._waiting[request.id] = (future, convert)
        self._queue.append(request)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = detached(self._run())  # it serves every later request too
        timer = loop.call_later(max(timeout_s, 0.001), self._expire, request.id, timeout_s)
        future.add_done_callback(lambda _: timer.cancel())
        return future

    def _expire(self, request_id: int, timeout_s: float) -> None:
        waiting = self._waiting.pop(request_id, None)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_exception(
                self._failure(
                    f"no answer from {self.name} within {timeout_s:.3f} s",
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                )
            )

    async def _run(self) -> None:
        call = None
        reader = None
        self._broken: tuple[str, grpc.StatusCode] | None = None
        try:
            call = watch(self._open_call())
            reader = asyncio.get_running_loop().create_task(self._read(call))
            while not call.done():
                await self._wake.wait()
                self._wake.clear()
                while self._queue and not call.done():
                    batch = _take_batch(self._queue, lambda r: r.id in self._waiting)
                    if batch:
                        await call.write(self._batch(batch))
            # The peer ended the call; its status says why (the reader, which would say so
            # too, may not have run since: it is cancelled below).
            reason, code = await ended_with(call)
            if self._broken is None and code is not grpc.StatusCode.OK:
                self._broken = (reason, code)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._broken = self._broken or await why_broken(call, error)
        finally:
            if reader is not None:
                reader.cancel()
            if call is not None:
                call.cancel()
            reason, code = self._broken or ("the stream ended", grpc.StatusCode.UNAVAILABLE)
            self._fail_all(reason, code)

    async def _read(self, call: Any) -> None:
        try:
            async for replies in call:
                for reply in replies.replies:
                    waiting = self._waiting.pop(reply.id, None)
                    if waiting is not None and not waiting[0].done():
                        _settle(waiting[0], waiting[1], reply)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            # Kept: a peer that refused the stream itself (INVALID_ARGUMENT) is not worth
            # retrying, one that went away is.
            self._broken = await why_broken(call, error)
            log.debug("stream to %s broke: %s", self.name, self._broken[0])
        self._wake.set()  # the writer sees the call is done, fails what waits, and ends

    def _fail_all(self, reason: str, code: grpc.StatusCode) -> None:
        waiting, self._waiting = self._waiting, {}
        self._queue.clear()
        for future, _ in waiting.values():
            if not future.done():
                future.set_exception(self._failure(f"{self.name}: {reason}", code))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _settle(future: asyncio.Future[Any], convert: Callable[[Any], Any] | None, reply: Any) -> None:
    if convert is None:
        future.set_result(reply)
        return
    try:
        future.set_result(convert(reply))
    except Exception as error:
        future.set_exception(error)


Answer = Any  # a reply message, or a future of one


def answer_with(
    future: asyncio.Future[Any],
    convert: Callable[[Any], Any],
    on_error: Callable[[BaseException], Any],
) -> asyncio.Future[Any]:
    """A future of ``convert(result)``, or of ``on_error(exception)``: ``serve`` wants futures
    that always settle with a reply."""
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def settle(done: asyncio.Future[Any]) -> None:
        if done.cancelled():
            answer.set_result(on_error(asyncio.CancelledError()))
        elif done.exception() is not None:
            answer.set_result(on_error(done.exception()))  # type: ignore[arg-type]
        else:
            answer.set_result(convert(done.result()))

    future.add_done_callback(settle)
    return answer


async def serve(
    requests: AsyncIterator[Any],
    context: grpc.aio.ServicerContext,
    handle: Callable[[Any], Answer],
    batch: Callable[[list[Any]], Any],
    closing: asyncio.Event | None = None,
    closing_reason: str = "the server is shutting down",
) -> AsyncIterator[Any]:
    """Server side of one stream (see the module docstring): an async generator of reply
    batches for a stream-stream servicer method to return."""
    answers: list[Any] = []
    wake = asyncio.Event()
    unanswered = 0
    closed = False

    def answered(future: asyncio.Future[Any]) -> None:
        nonlocal unanswered
        unanswered -= 1
        answers.append(future.result())
        wake.set()

    async def read() -> None:
        nonlocal unanswered, closed
        try:
            async for requests_batch in requests:
                for request in requests_batch.requests:
                    answer = handle(request)
                    if isinstance(answer, asyncio.Future):
                        unanswered += 1
                        answer.add_done_callback(answered)
                    else:
                        answers.append(answer)
                        wake.set()
        finally:
            closed = True
            wake.set()

    loop = asyncio.get_running_loop()
    reader = loop.create_task(read())
    stopped = loop.create_task((closing or asyncio.Event()).wait())
    stopped.add_done_callback(lambda _: reader.cancel())  # read() ends: no more requests
    try:
        while not (closed and unanswered == 0 and not answers):
            await wake.wait()
            wake.clear()
            while answers:
                yield batch(_take_batch(answers, lambda _: True))
    finally:
        reader.cancel()
        stopped.cancel()
    reraise_from(reader)  # a batch that did not parse: INVALID_ARGUMENT, after the answers
    if closing is not None and closing.is_set():
        await abort_status(context, grpc.StatusCode.UNAVAILABLE, closing_reason)
