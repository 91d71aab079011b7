"""The span of one request a replica serves for a coordinator (or a reconciler's delivery): a
SERVER span on every replica a write or read reached, the coordinator itself included, a child
of the coordinator's span (its context travels in the request: ``epochal.telemetry.context``).
It lasts until the answer is ready (a write's group commit included) and says what it was."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry import trace

from epochal.replica.local_replica import Outcome, PeerReply
from epochal.telemetry import attributes as attr
from epochal.telemetry.context import end_when_done, failed, wanted

_tracer = trace.get_tracer("epochal.replica")

SPAN_OF_KIND = {
    "apply": attr.REPLICA_APPLY,
    "deliver": attr.REPLICA_APPLY,
    "read": attr.REPLICA_LOCAL_READ,
    "fetch": attr.REPLICA_FETCH,
}


def _describe(span: trace.Span, reply: PeerReply) -> None:
    span.set_attribute(attr.EPOCH, reply.epoch)
    if reply.outcome is not Outcome.OK:
        span.set_attribute(attr.OUTCOME, reply.outcome.value)


def served(
    kind: str,
    node_id: str,
    parent: otel_context.Context | None,
    serve: Callable[[], asyncio.Future[PeerReply]],
    *,
    repair: bool = False,
) -> asyncio.Future[PeerReply]:
    """``serve()``'s future, in a span of ``kind``'s work whose parent is ``parent`` (None: the
    current span: the coordinator's own, for its local replica). Untraced when this process
    does not trace."""
    if not wanted(parent):
        if parent is None:
            return serve()
        token = otel_context.attach(parent)  # its context goes on, to what this request asks
        try:
            return serve()
        finally:
            otel_context.detach(token)
    span = _tracer.start_span(
        SPAN_OF_KIND.get(kind, attr.REPLICA_APPLY),
        context=parent,
        kind=trace.SpanKind.SERVER,
        attributes={attr.NODE_ID: node_id, attr.REPAIR: repair or kind == "deliver"},
    )
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        future = serve()
    except BaseException as error:
        failed(span, error)
        span.end()
        raise
    finally:
        otel_context.detach(token)
    end_when_done(span, future, _describe)
    return future
