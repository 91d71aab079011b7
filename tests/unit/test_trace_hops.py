"""What a hop does with trace context (epochal.telemetry.context, epochal.wire.handlers): a span
is skipped only where the sampler would drop it; a request whose parent was not sampled is read
without building its context, a malformed one is no parent; background tasks start in no trace;
a span's status code comes from the error; a server's span says how the call ended — also when
the method raised or the caller went away. What installs a tracer provider runs in a child
interpreter (the API takes one per process)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags

from epochal.errors import Overloaded, Unavailable
from epochal.telemetry import context as tc
from epochal.telemetry.sampling import LinkedOrRatio, parent_based_ratio
from epochal.wire.v1 import replica_pb2 as pb

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
SPAN_ID = 0xB7AD6B7169203331
CHILD_TIMEOUT_S = 60
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


def parent(sampled: bool, remote: bool) -> otel_context.Context:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    context = SpanContext(TRACE_ID, SPAN_ID, is_remote=remote, trace_flags=flags)
    return trace.set_span_in_context(NonRecordingSpan(context))


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """As if a provider with ``sampler`` were installed (without installing one)."""

    def install(sampler: Sampler) -> None:
        monkeypatch.setattr(tc, "_installed", True)
        monkeypatch.setattr(tc, "_follows_parent", tc._drops_unsampled_children(sampler))

    yield install


class Subclassed(ParentBased):
    pass


SAMPLERS = {
    "parentbased_always_on": DEFAULT_ON,
    "parentbased_ratio_0": parent_based_ratio(0.0),
    "parentbased_ratio_1": parent_based_ratio(1.0),
    "always_on": ALWAYS_ON,
    "always_off": ALWAYS_OFF,
    "ratio_0.5": TraceIdRatioBased(0.5),
    "keeps_unsampled_local": ParentBased(ALWAYS_ON, local_parent_not_sampled=ALWAYS_ON),
    "keeps_unsampled_remote": ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON),
    "subclass": Subclassed(ALWAYS_OFF),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_a_span_is_skipped_only_where_the_sampler_would_drop_it(name: str, installed: Any) -> None:
    sampler = SAMPLERS[name]
    installed(sampler)
    parents: list[otel_context.Context | None] = [None]
    parents += [parent(sampled, remote) for sampled in (True, False) for remote in (True, False)]
    for candidate in parents:
        kept = sampler.should_sample(candidate, TRACE_ID, "span").decision.is_sampled()
        if not tc.wanted(candidate):
            assert not kept, (name, candidate)
    # and the SDK's own parent-based samplers are recognised: no span under an unsampled parent
    follows = name in ("parentbased_always_on", "parentbased_ratio_0", "parentbased_ratio_1")
    assert tc.wanted(parent(False, True)) is not follows


def test_an_unsampled_parent_is_read_without_its_context_and_a_malformed_one_is_none(
    installed: Any,
) -> None:
    installed(DEFAULT_ON)
    ids = f"{TRACE_ID:032x}-{SPAN_ID:016x}"
    assert tc.recorded_parent_of(pb.PeerRequest(traceparent=f"00-{ids}-00")) is False
    sampled = tc.recorded_parent_of(pb.PeerRequest(traceparent=f"00-{ids}-01"))
    assert isinstance(sampled, otel_context.Context)
    assert trace.get_current_span(sampled).get_span_context().span_id == SPAN_ID
    assert tc.recorded_parent_of(pb.PeerRequest()) is None  # no parent: a root, if wanted
    zero_trace = "00-" + "0" * 32 + f"-{SPAN_ID:016x}-00"
    zero_span = f"00-{TRACE_ID:032x}-" + "0" * 16 + "-00"
    for malformed in (zero_trace, zero_span, f"ff-{ids}-00", f"00-{ids.upper()}-00", "x" * 52):
        # what the SDK would take for no parent at all: a root span (sampled by its ratio)
        assert tc.recorded_parent_of(pb.PeerRequest(traceparent=malformed)) is None, malformed
    # a future version is read by the propagator, its decision followed
    assert tc.recorded_parent_of(pb.PeerRequest(traceparent=f"01-{ids}-00-extra")) is False


def test_a_root_that_links_to_a_sampled_span_is_kept_whatever_the_ratio() -> None:
    sampler = parent_based_ratio(0.0)
    sampled = SpanContext(TRACE_ID, SPAN_ID, False, TraceFlags(TraceFlags.SAMPLED))
    unsampled = SpanContext(TRACE_ID, SPAN_ID, False, TraceFlags(TraceFlags.DEFAULT))
    keep = sampler.should_sample(None, 1, "paxos.round", links=[Link(unsampled), Link(sampled)])
    assert keep.decision.is_sampled()
    drop = sampler.should_sample(None, 1, "paxos.round", links=[Link(unsampled)])
    assert not drop.decision.is_sampled()
    assert not sampler.should_sample(None, 1, "paxos.round").decision.is_sampled()
    # a parent decides before any link
    child = sampler.should_sample(parent(False, True), 1, "x", links=[Link(sampled)])
    assert not child.decision.is_sampled()
    assert LinkedOrRatio(1.0).should_sample(None, 1, "x").decision.is_sampled()


def test_a_background_task_starts_in_no_trace_while_a_plain_task_inherits_the_request() -> None:
    async def current() -> int:
        return trace.get_current_span().get_span_context().span_id

    async def scenario() -> tuple[int, int]:
        with tc.attached(parent(True, True)):
            inherited = await asyncio.get_running_loop().create_task(current())
            background = await tc.detached(current())
        return inherited, background

    assert asyncio.run(scenario()) == (SPAN_ID, 0)


def test_a_failed_span_carries_the_status_code_its_error_came_or_is_answered_with() -> None:
    assert tc.status_code_of(Unavailable("down", status="UNAVAILABLE")) is UNAVAILABLE
    assert tc.status_code_of(asyncio.CancelledError()) is grpc.StatusCode.CANCELLED
    assert tc.status_code_of(Unavailable("raised here")) is None
    assert tc.status_code_of(RuntimeError("bug")) is None
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    for error, code, expected in (
        (Unavailable("down", status="UNAVAILABLE"), None, UNAVAILABLE.value[0]),
        (Overloaded("busy"), grpc.StatusCode.RESOURCE_EXHAUSTED, 8),
        (RuntimeError("bug"), None, None),
    ):
        span = tracer.start_span("x")
        tc.failed(span, error, code)
        span.end()
        assert span.attributes.get("rpc.grpc.status_code") == expected, error  # type: ignore[attr-defined]
        assert span.status.status_code is trace.StatusCode.ERROR  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- a server, in a child

# A CMS servicer whose methods end every way a call can: answered, aborted by the method, a
# bug (INTERNAL), not implemented, and a stream the client cancels. Prints each rpc span.
SERVER_CHILD = """
import asyncio, json
import grpc
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from epochal.wire.channels import channel as open_channel
from epochal.wire.tls import INSECURE
from epochal.wire.handlers import add_servicer
from epochal.wire.status import abort_status
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

streaming = asyncio.Event()

class Servicer:
    async def Describe(self, request, context):
        return cms_pb2.DescribeResponse(member_id="m1")
    async def Commit(self, request, context):
        await abort_status(context, grpc.StatusCode.NOT_FOUND, "no such thing")
    async def FetchLog(self, request, context):
        raise RuntimeError("a bug")
    async def Watch(self, request, context):
        yield cms_pb2.WatchEvent()
        streaming.set()
        await asyncio.sleep(60)

async def main():
    server = grpc.aio.server()
    add_servicer(server, cms_pb2.DESCRIPTOR.services_by_name["CMS"], Servicer())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = open_channel(f"127.0.0.1:{port}", INSECURE)
    stub = cms_pb2_grpc.CMSStub(channel)
    tracer = trace.get_tracer("test")
    answers = {}
    with tracer.start_as_current_span("caller"):
        await stub.Describe(cms_pb2.DescribeRequest())
        for name, call in (("Commit", stub.Commit(cms_pb2.CommitRequest())),
                           ("FetchLog", stub.FetchLog(cms_pb2.FetchLogRequest()))):
            try:
                await call
            except grpc.aio.AioRpcError as error:
                answers[name] = error.code().name
        watch = stub.Watch(cms_pb2.WatchRequest())
        await watch.read()
        await streaming.wait()
        watch.cancel()
    for _ in range(200):  # until the server has ended the cancelled call's span
        if any(s.name.endswith("/Watch") for s in exporter.get_finished_spans()):
            break
        await asyncio.sleep(0.05)
    await channel.close()
    await server.stop(None)
    caller = next(s for s in exporter.get_finished_spans() if s.name == "caller")
    spans = {
        s.name.rpartition("/")[2]: {
            "attributes": dict(s.attributes),
            "status": s.status.status_code.name,
            "parent": s.parent.span_id if s.parent else None,
            "trace": s.context.trace_id,
        }
        for s in exporter.get_finished_spans() if s.name.startswith("rpc.")
    }
    print(json.dumps({"answers": answers, "spans": spans,
                      "caller": [caller.context.trace_id, caller.context.span_id]}))

asyncio.run(main())
"""


def test_a_servers_span_says_how_the_call_ended_whatever_ended_it() -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SERVER_CHILD],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env=environ,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert answer["answers"] == {"Commit": "NOT_FOUND", "FetchLog": "INTERNAL"}
    spans = answer["spans"]
    assert set(spans) == {"Describe", "Commit", "FetchLog", "Watch"}
    expected = {
        "Describe": ("ok", None, "UNSET"),
        "Commit": ("NOT_FOUND", grpc.StatusCode.NOT_FOUND.value[0], "ERROR"),
        "FetchLog": ("INTERNAL", grpc.StatusCode.INTERNAL.value[0], "ERROR"),
        "Watch": ("CANCELLED", grpc.StatusCode.CANCELLED.value[0], "ERROR"),
    }
    trace_id, caller_span_id = answer["caller"]
    for method, (outcome, code, status) in expected.items():
        span = spans[method]
        assert span["attributes"]["epochal.outcome"] == outcome, (method, span)
        assert span["attributes"].get("rpc.grpc.status_code") == code, (method, span)
        assert span["status"] == status, (method, span)
        assert (span["trace"], span["parent"]) == (trace_id, caller_span_id), method
