"""Register servicers so that every call gets a status that says what happened.

- **Bad bytes**: grpcio's generated ``add_*Servicer_to_server`` let a deserialisation failure
  surface as UNKNOWN or INTERNAL with no useful message. Here each request deserialiser returns
  a ``BadRequest`` instead of raising, and the guard answers it INVALID_ARGUMENT naming the
  message type before the method runs — for a client stream, at the first message that does
  not parse, after the messages before it were handled (a method that reads its stream on a
  task of its own passes the abort on with ``reraise_from``). Methods never see a
  ``BadRequest``.
- **Not ready**: a server passes one ``refusal(method)`` per service, consulted before every
  call; while it names a reason (the server is still starting, or shutting down) the call is
  answered UNAVAILABLE with that reason, which every client retries on another server
  (``epochal.status.RETRIES``). A method never runs against state that is not there yet.
- **Who may call**: the caller's certificate's roles are checked against the method first
  (``epochal.wire.roles``, the server's ``guard``), and for ``CMS.Commit`` against the kind of
  its transformation once it parsed; a refusal is PERMISSION_DENIED naming the role needed.
- **Bugs**: an exception a method does not turn into a status itself is logged with its
  traceback and answered INTERNAL naming the method, not the exception (gRPC would answer
  UNKNOWN, the status a transport failure also gets, and log it without saying which call;
  a bug's Python text says nothing a caller can act on). gRPC's own exceptions (an abort,
  a call that ended under the method) are gRPC's to handle, and pass through.
- **Traces**: in a process that traces, a call whose request is not a stream runs in the trace
  context its metadata carries (``epochal.telemetry.context``), in a SERVER span named
  ``rpc.<service>/<method>`` unless the servicer lists the method in ``TRACED_METHODS`` (it
  starts a span of its own, a child of that context). A stream of requests carries a context
  per message, which the method reads itself.
- **Stopping**: ``finished_before`` ends a long-lived stream's reading when the server stops,
  so that the stream ends with a status instead of holding the stop to its deadline, where
  gRPC would cancel it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError
from opentelemetry import trace

from epochal.telemetry import attributes as attr
from epochal.telemetry.context import attached, from_metadata, tracing, wanted
from epochal.wire.roles import DEFAULT_GUARD, Guard
from epochal.wire.status import abort_status

log = logging.getLogger(__name__)

Refusal = Callable[[str], str | None]  # method name -> why it cannot answer now, or None


def always_open(method: str) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class BadRequest:
    type_name: str
    error: str


def _lenient(message_class: Any) -> Any:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except (DecodeError, ValueError) as error:
            return BadRequest(message_class.DESCRIPTOR.full_name, str(error) or "undecodable bytes")

    return parse


def add_servicer(
    server: grpc.aio.Server,
    service: ServiceDescriptor,
    servicer: object,
    refusal: Refusal = always_open,
    guard: Guard = DEFAULT_GUARD,
) -> None:
    handlers = {}
    traced_methods: frozenset[str] = getattr(servicer, "TRACED_METHODS", frozenset())
    for method in service.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        function = getattr(servicer, method.name)
        full_name = f"/{service.full_name}/{method.name}"
        streaming_in = method.client_streaming
        if method.server_streaming:
            guarded = _guard_stream(function, full_name, refusal, guard, streaming_in)
        else:
            guarded = _guard_unary(function, full_name, refusal, guard, streaming_in)
        if tracing() and not streaming_in and not service.full_name.startswith("grpc."):
            # Around the guard, so that the span sees the status the guard answers with.
            guarded = _in_callers_trace(
                guarded, full_name, method.name in traced_methods, method.server_streaming
            )
        if method.client_streaming and method.server_streaming:
            make = grpc.stream_stream_rpc_method_handler
        elif method.client_streaming:
            make = grpc.stream_unary_rpc_method_handler
        elif method.server_streaming:
            make = grpc.unary_stream_rpc_method_handler
        else:
            make = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            guarded,
            request_deserializer=_lenient(request_class),
            response_serializer=response_class.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )


def _in_callers_trace(
    function: Callable[..., Any], full_name: str, own_span: bool, streaming_out: bool
) -> Callable[..., Any]:
    """``function`` run in the trace context of the call's metadata: in a SERVER span of the
    method, or (``own_span``) as the parent of the span the method starts itself."""
    tracer = trace.get_tracer("epochal.rpc")
    name = f"{attr.RPC_PREFIX}{full_name.lstrip('/')}"

    @contextlib.contextmanager
    def context_of(context: grpc.aio.ServicerContext) -> Iterator[None]:
        parent = from_metadata(context.invocation_metadata())
        if own_span or not wanted(parent):
            with attached(parent):
                yield
            return
        with tracer.start_as_current_span(
            name,
            context=parent,
            kind=trace.SpanKind.SERVER,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            error: BaseException | None = None
            try:
                yield
            except BaseException as raised:  # an abort, a cancel; recorded, then passed on
                error = raised
                raise
            finally:
                _describe_call(span, context, error)

    if streaming_out:

        async def streamed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with context_of(context):
                responses = function(request, context)
                if inspect.isawaitable(responses):
                    await responses
                    return
                async for response in responses:
                    yield response

        return streamed

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with context_of(context):
            return await function(request, context)

    return unary


def _describe_call(
    span: trace.Span, context: grpc.aio.ServicerContext, error: BaseException | None
) -> None:
    """The call's outcome on its span: the status the method (or the guard) answered with, or
    CANCELLED when the caller went away (or its deadline passed) before an answer."""
    code = context.code()
    if not isinstance(code, grpc.StatusCode):
        if isinstance(error, asyncio.CancelledError | GeneratorExit):  # a stream closed early
            code = grpc.StatusCode.CANCELLED
        elif error is not None:
            code = grpc.StatusCode.UNKNOWN
        else:
            code = grpc.StatusCode.OK
    if code is grpc.StatusCode.OK:
        span.set_attribute(attr.OUTCOME, attr.OK)
        return
    span.set_attribute(attr.STATUS_CODE, code.value[0])
    span.set_attribute(attr.OUTCOME, code.name)
    details = context.details()
    if isinstance(details, bytes):
        details = details.decode(errors="replace")
    span.set_status(trace.Status(trace.StatusCode.ERROR, details or code.name))


def _guard_unary(
    function: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]],
    full_name: str,
    refusal: Refusal,
    guard: Guard,
    streaming_in: bool,
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        request = await _admitted(refusal, guard, full_name, request, context, streaming_in)
        try:
            return await function(request, context)
        except grpc.aio.BaseError:
            raise  # an abort (the method's own status), or a call that had ended: gRPC's
        except Unparsable as error:
            await abort_status(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except Exception as error:
            await _answer_bug(context, full_name, error)

    return handle


def _guard_stream(
    function: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]],
    full_name: str,
    refusal: Refusal,
    guard: Guard,
    streaming_in: bool,
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        request = await _admitted(refusal, guard, full_name, request, context, streaming_in)
        try:
            responses = function(request, context)
            if inspect.isawaitable(responses):  # it writes its responses (context.write)
                await responses
                return
            async for response in responses:
                yield response
        except grpc.aio.BaseError:
            raise  # as above
        except Unparsable as error:
            await abort_status(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except Exception as error:
            await _answer_bug(context, full_name, error)

    return handle


async def _admitted(
    refusal: Refusal,
    guard: Guard,
    full_name: str,
    request: Any,
    context: grpc.aio.ServicerContext,
    streaming_in: bool,
) -> Any:
    """The request (or, for a client stream, its messages) once the caller may call the
    method (``epochal.wire.roles``: before anything about the server's state is said), the
    server is open and the request parsed (a method never sees bytes that did not parse), and
    the caller may make this request (a commit: of its kind)."""
    denied = guard.method_refusal(full_name, context)
    if denied is not None:
        await abort_status(context, grpc.StatusCode.PERMISSION_DENIED, denied)
    reason = refusal(full_name.rpartition("/")[2])
    if reason is not None:
        await abort_status(context, grpc.StatusCode.UNAVAILABLE, reason)
    if streaming_in:
        return _parsed(request, context)
    await require_parsed(request, context)
    denied = guard.request_refusal(full_name, request, context)
    if denied is not None:
        await abort_status(context, grpc.StatusCode.PERMISSION_DENIED, denied)
    return request


class Unparsable(Exception):
    """A client stream's message that did not parse; the guard answers INVALID_ARGUMENT."""

    def __init__(self, request: BadRequest) -> None:
        super().__init__(f"request is not a valid {request.type_name}: {request.error}")


async def _parsed(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
    """A client stream's messages; the first that does not parse raises ``Unparsable`` in
    whichever task reads it. The call is aborted in the method's own task, by the guard (a
    method that reads on a task of its own passes it on with ``reraise_from``): an abort from
    another task, with the method still answering, leaves the call hanging."""
    async for request in requests:
        if isinstance(request, BadRequest):
            raise Unparsable(request)
        yield request


async def _answer_bug(context: grpc.aio.ServicerContext, full_name: str, error: Exception) -> None:
    if isinstance(error, NotImplementedError):
        await abort_status(
            context, grpc.StatusCode.UNIMPLEMENTED, f"{full_name} is not implemented here"
        )
    log.error("%s failed unexpectedly", full_name, exc_info=error)
    await abort_status(
        context,
        grpc.StatusCode.INTERNAL,
        f"internal error in {full_name} (logged by the server with its traceback)",
    )


def reraise_from(task: asyncio.Task[Any]) -> None:
    """Raise what a method's own reading task raised (``Unparsable``, a bug) in the method's
    task, where the guard turns it into the call's status."""
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


async def require_parsed(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, BadRequest):
        await abort_status(
            context,
            grpc.StatusCode.INVALID_ARGUMENT,
            f"request is not a valid {request.type_name}: {request.error}",
        )


async def finished_before(work: Coroutine[Any, Any, Any], closing: asyncio.Event) -> bool:
    """Run ``work`` (a stream's reading loop) until it ends (True; what it raised is raised) or
    ``closing`` is set first (False: it is cancelled), so that a long-lived stream ends when its
    server stops instead of holding the shutdown to its deadline."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(work)
    closed = loop.create_task(closing.wait())
    try:
        await asyncio.wait((task, closed), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        closed.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False
