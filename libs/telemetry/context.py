"""W3C trace context across processes: one trace per SDK call and per commit.

Theory of operation
-------------------
A unary call carries the caller's context in gRPC metadata (``traceparent``/``tracestate``):
the channels of a process that traces get ``ContextInterceptor`` (``epochal.wire.channels``),
and every servicer method starts from the context its metadata names
(``epochal.wire.handlers``). The long-lived multiplexed streams (the SDK's ``Session``, the
replicas' ``Exchange``, the CMS's ``Forward`` and ``Step``) carry many requests of many traces
on one call, so each request message has ``traceparent``/``tracestate`` fields of its own:
``inject`` fills them from the current span, ``parent_of`` reads them back (an additive wire
change: a peer that does not know the fields leaves them empty, and its requests start traces
of their own).

Only the OpenTelemetry API is used here, so the SDK, which traces through whatever provider the
application installed (none: the API's no-op), imports nothing more. ``tracing()`` says whether
spans are recorded anywhere in this process; callers skip building spans otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from epochal.telemetry import attributes as attr

T = TypeVar("T")
_W3C = TraceContextTextMapPropagator()
TRACEPARENT = "traceparent"
_VERSION_00 = re.compile("00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
# A valid version-00 traceparent whose parent was not sampled (ids not all zero, flags 00).
_UNSAMPLED_00 = re.compile("00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-00")
TRACESTATE = "tracestate"


_installed = False  # a provider was installed (the global one is set at most once)
_follows_parent = False  # its sampler keeps a span exactly when its parent was kept


def tracing() -> bool:
    """Whether a tracer provider other than the API's default (no-op) one is installed: by
    ``epochal.telemetry.setup_tracing`` in a service, by the application around the SDK."""
    global _installed, _follows_parent
    if _installed:
        return True
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return False
    _follows_parent = _drops_unsampled_children(getattr(provider, "sampler", None))
    _installed = True
    return True


def _drops_unsampled_children(sampler: object) -> bool:
    """Whether ``sampler`` drops every span whose parent (remote or local) was not sampled:
    the SDK's ``ParentBased`` itself (not a subclass, which may decide otherwise) with its
    default ``ALWAYS_OFF`` for both unsampled-parent cases."""
    from opentelemetry.sdk.trace import sampling  # only once a provider is there

    if type(sampler) is not sampling.ParentBased:
        return False
    delegates = (
        getattr(sampler, "_remote_parent_not_sampled", None),
        getattr(sampler, "_local_parent_not_sampled", None),
    )
    return all(delegate is sampling.ALWAYS_OFF for delegate in delegates)


def wanted(parent: otel_context.Context | None = None) -> bool:
    """Whether a span started now — a child of ``parent``, else of the current span — can be
    recorded: tracing is on and, under a sampler that follows the parent's decision (the
    default), there is no parent or it was sampled. Where it cannot, the caller starts no span
    and passes the parent's context on as it is: the request's other spans are not sampled
    either, and a span the sampler would drop costs as much to create as one it keeps."""
    if not tracing():
        return False
    if not _follows_parent:
        return True
    context = trace.get_current_span(parent).get_span_context()
    return not context.is_valid or context.trace_flags.sampled


def _headers(context: trace.SpanContext) -> dict[str, str]:
    headers = {
        TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    }
    if context.trace_state:
        headers[TRACESTATE] = context.trace_state.to_header()
    return headers


_last_headers: tuple[trace.SpanContext | None, dict[str, str]] = (None, {})


def current_headers() -> dict[str, str]:
    """The current span's context as W3C headers ({} when there is no valid span). A
    coordinator sends one span's context to several replicas: the last one is kept."""
    global _last_headers
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    last, headers = _last_headers
    if last is not context:
        headers = _headers(context)
        _last_headers = (context, headers)
    return headers


def headers_of(span: trace.Span) -> dict[str, str]:
    """``span``'s context as W3C headers ({} for a span with no valid context)."""
    context = span.get_span_context()
    return _headers(context) if context.is_valid else {}


def set_headers(message: Any, headers: Mapping[str, str]) -> None:
    """Put W3C ``headers`` in a message's ``traceparent``/``tracestate`` fields."""
    if headers:
        message.traceparent = headers[TRACEPARENT]
        state = headers.get(TRACESTATE)
        if state:
            message.tracestate = state


def inject(message: Any) -> None:
    """Set ``message.traceparent`` (and ``tracestate``) from the current span, if there is
    one. A span that is not sampled is carried too: its children follow its decision."""
    set_headers(message, current_headers())


def recorded_parent_of(message: Any) -> otel_context.Context | Literal[False] | None:
    """For a request whose work starts a span and calls no one in the request's name (a
    catch-up it may cause is a trace of its own): False when no span is wanted (the sampler
    follows the parent, which was not sampled: the context need not be built), else its parent
    (None: it names none) — fewer objects per request at a low sampling ratio."""
    if not tracing():
        return False
    if _follows_parent and _UNSAMPLED_00.fullmatch(message.traceparent):
        return False
    parent = parent_of(message)
    return parent if wanted(parent) else False


def parent_of(message: Any) -> otel_context.Context | None:
    """The context a request message names as its parent (None: none, or not a valid one)."""
    traceparent = message.traceparent
    if not traceparent:
        return None
    return from_headers({TRACEPARENT: traceparent, TRACESTATE: message.tracestate})


def from_headers(headers: Mapping[str, str]) -> otel_context.Context | None:
    """The context W3C headers name (None: no valid ``traceparent`` among them). A version-00
    ``traceparent`` is parsed here (on every request of a traced process); others go to the
    W3C propagator."""
    traceparent = headers.get(TRACEPARENT, "")
    if not traceparent:
        return None
    state = headers.get(TRACESTATE, "")
    version_00 = _VERSION_00.fullmatch(traceparent)
    if version_00 is not None:
        trace_id, span_id = int(version_00[1], 16), int(version_00[2], 16)
        flags = int(version_00[3], 16)
        if not trace_id or not span_id:
            return None
        context = trace.SpanContext(
            trace_id,
            span_id,
            is_remote=True,
            trace_flags=trace.TraceFlags(flags & trace.TraceFlags.SAMPLED),
            trace_state=trace.TraceState.from_header([state]) if state else None,
        )
        return trace.set_span_in_context(trace.NonRecordingSpan(context))
    carrier = {TRACEPARENT: traceparent, **({TRACESTATE: state} if state else {})}
    extracted = _W3C.extract(carrier)
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        return None
    return extracted


def from_metadata(
    metadata: Sequence[tuple[str, str | bytes]] | None,
) -> otel_context.Context | None:
    """The context a unary call's gRPC metadata names, if any."""
    if not metadata:
        return None
    headers = {
        key: value
        for key, value in metadata
        if key in (TRACEPARENT, TRACESTATE) and isinstance(value, str)
    }
    return from_headers(headers)


def spawn_in(parent: otel_context.Context | None, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """A task running ``work`` in ``parent``'s trace context (a task copies the context it is
    created in), or in the current one when ``parent`` is None."""
    if parent is None:
        return asyncio.ensure_future(work)
    token = otel_context.attach(parent)
    try:
        return asyncio.ensure_future(work)
    finally:
        otel_context.detach(token)


_NO_TRACE = otel_context.Context()


def detached(work: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
    """A background task that belongs to no request: it starts with no trace context. A task
    copies the context it is created in, so a stream's writer, a shared fetch or a state
    transfer started lazily by one request would otherwise make everything it ever does part
    of that request's trace (and, under a parent-based sampler, unsampled with it)."""
    context = contextvars.copy_context()
    context.run(otel_context.attach, _NO_TRACE)
    return asyncio.get_running_loop().create_task(work, name=name, context=context)


@contextlib.contextmanager
def attached(parent: otel_context.Context | None) -> Iterator[None]:
    """Make ``parent`` the current context for the block (nothing when it is None)."""
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


def start_child(
    tracer: trace.Tracer,
    name: str,
    parent: otel_context.Context | None,
    *,
    kind: trace.SpanKind = trace.SpanKind.SERVER,
    attributes: Mapping[str, Any] | None = None,
) -> trace.Span:
    """A span of ``name`` whose parent is ``parent`` (None: the current span, if any)."""
    return tracer.start_span(name, context=parent, kind=kind, attributes=attributes)


def end_when_done(
    span: trace.Span,
    future: Any,
    describe: Callable[[trace.Span, Any], None] | None = None,
    code_of: Callable[[Any], grpc.StatusCode | None] | None = None,
) -> None:
    """End ``span`` when ``future`` settles: its outcome ``ok`` (``describe`` adds what the
    result says), or the error's rule and class (``code_of``: the status it is answered with),
    with an error status."""

    def done(settled: Any) -> None:
        if settled.cancelled():
            cancelled(span)
        elif settled.exception() is not None:
            error = settled.exception()
            failed(span, error, code_of(error) if code_of is not None else None)
        else:
            span.set_attribute(attr.OUTCOME, attr.OK)
            if describe is not None:
                describe(span, settled.result())
        span.end()

    future.add_done_callback(done)


def failed(span: trace.Span, error: BaseException, code: grpc.StatusCode | None = None) -> None:
    """Record ``error`` as the span's outcome (its rule, else its class), its gRPC status code
    (``code``: what a server answers it with; else the status it came with, if any), and an
    error status."""
    rule = getattr(error, "rule", "") or type(error).__name__
    span.set_attribute(attr.OUTCOME, rule)
    span.set_attribute(attr.ERROR_CLASS, type(error).__name__)
    code = code or status_code_of(error)
    if code is not None:
        span.set_attribute(attr.STATUS_CODE, code.value[0])
    span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)[:200] or rule))


def cancelled(span: trace.Span) -> None:
    """Record that the work was cancelled (the caller went away or its deadline passed)."""
    span.set_attribute(attr.OUTCOME, attr.CANCELLED)
    span.set_attribute(attr.STATUS_CODE, grpc.StatusCode.CANCELLED.value[0])
    span.set_status(trace.Status(trace.StatusCode.ERROR, "cancelled"))


def status_code_of(error: BaseException) -> grpc.StatusCode | None:
    """The gRPC status ``error`` came with: a failed call's ``code()``, the ``status`` name of
    an SDK error made from an answer (None: none, e.g. an error raised where it is recorded)."""
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code()
    if isinstance(error, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    for candidate in (getattr(error, "status", None), getattr(error, "code", None)):
        if isinstance(candidate, grpc.StatusCode):
            return candidate
        if isinstance(candidate, str) and candidate in grpc.StatusCode.__members__:
            return grpc.StatusCode[candidate]
    return None


def _with_context(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    headers = current_headers()
    if not headers:
        return details
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    for key, value in headers.items():
        metadata[key] = value
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class ContextInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds the current span's context to a unary call's metadata (installed on a process's
    channels only while it traces: an interceptor costs a little on every call)."""

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_context(client_call_details), request)


class StreamContextInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    """The same for a call with one request and a stream of answers (``Watch``). A channel
    files each interceptor under the first kind it is an instance of, so one object cannot
    serve both."""

    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_context(client_call_details), request)


def interceptors() -> list[grpc.aio.ClientInterceptor] | None:
    """A channel's interceptors in a process that traces (None otherwise)."""
    return [ContextInterceptor(), StreamContextInterceptor()] if tracing() else None
