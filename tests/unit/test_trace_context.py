"""W3C trace context in request messages and gRPC metadata (epochal.telemetry.context): what
the sender's current span is, the receiver reads back as the parent — sampled or not — and a
missing or malformed context is no parent at all."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from epochal.telemetry import attributes
from epochal.telemetry.context import (
    attached,
    current_headers,
    from_metadata,
    headers_of,
    inject,
    parent_of,
    set_headers,
)
from epochal.wire.v1 import cms_pb2
from epochal.wire.v1 import replica_pb2 as pb

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
SPAN_ID = 0xB7AD6B7169203331


def span_context(sampled: bool = True, state: TraceState | None = None) -> SpanContext:
    return SpanContext(
        TRACE_ID,
        SPAN_ID,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT),
        trace_state=state or TraceState(),
    )


def in_span(context: SpanContext) -> otel_context.Context:
    return trace.set_span_in_context(NonRecordingSpan(context))


def test_a_request_carries_the_current_span_and_the_receiver_reads_it_as_the_parent() -> None:
    for message in (pb.SessionRequest(id=1), pb.PeerRequest(id=2), cms_pb2.StepRequest()):
        with attached(in_span(span_context(state=TraceState([("vendor", "x")])))):
            inject(message)
        assert message.traceparent == f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01"
        assert message.tracestate == "vendor=x"
        parent = trace.get_current_span(parent_of(message)).get_span_context()
        assert (parent.trace_id, parent.span_id, parent.is_remote) == (TRACE_ID, SPAN_ID, True)
        assert parent.trace_flags.sampled
        assert parent.trace_state.get("vendor") == "x"


def test_a_span_that_is_not_sampled_is_carried_so_its_children_follow_its_decision() -> None:
    message = pb.PeerRequest()
    with attached(in_span(span_context(sampled=False))):
        inject(message)
    assert message.traceparent.endswith("-00")
    parent = trace.get_current_span(parent_of(message)).get_span_context()
    assert parent.is_valid and not parent.trace_flags.sampled


def test_without_a_current_span_nothing_is_carried_and_nothing_is_a_parent() -> None:
    message = pb.SessionRequest()
    inject(message)
    assert message.traceparent == "" and current_headers() == {}
    assert parent_of(message) is None
    assert from_metadata(None) is None and from_metadata((("other", "x"),)) is None


def test_a_malformed_traceparent_is_no_parent() -> None:
    good_ids = f"{TRACE_ID:032x}-{SPAN_ID:016x}"
    for bad in (
        "garbage",
        "00-" + "0" * 32 + "-" + "0" * 16 + "-01",  # all-zero ids
        "00-" + "0" * 32 + f"-{SPAN_ID:016x}-01",  # an all-zero trace id alone
        f"00-{TRACE_ID:032x}-" + "0" * 16 + "-01",  # an all-zero span id alone
        f"ff-{good_ids}-01",  # version ff is invalid
        f"00-{good_ids}-01-more",  # version 00 has nothing after the flags
        "00-abc-def-01",
        f"00-{good_ids.upper()}-01",  # W3C ids are lower-case hex
        f"00-+{good_ids[1:]}-01",
        f"00-{good_ids}-1",
    ):
        assert parent_of(pb.PeerRequest(traceparent=bad)) is None, bad


def test_unary_metadata_carries_the_same_headers() -> None:
    headers = headers_of(NonRecordingSpan(span_context()))
    metadata = (("x-other", "1"), *headers.items())
    parent = trace.get_current_span(from_metadata(metadata)).get_span_context()
    assert (parent.trace_id, parent.span_id) == (TRACE_ID, SPAN_ID)
    trace_context = cms_pb2.TraceContext()
    set_headers(trace_context, headers)
    carried = trace.get_current_span(parent_of(trace_context)).get_span_context()
    assert (carried.trace_id, carried.span_id, carried.is_remote) == (TRACE_ID, SPAN_ID, True)


def test_the_attributes_module_imports_nothing() -> None:
    source = Path(attributes.__file__).read_text()
    assert "\nimport " not in source and "\nfrom " not in source.replace(
        "\nfrom __future__ import annotations", ""
    )
