"""Spans as a collector sees them, for tests: an OTLP trace receiver (a real gRPC server on
127.0.0.1 that keeps every export it is sent) and a reader of the OTLP-JSON span files, both
giving spans with their resource's attributes.

A span file's line is an OTLP ``TracesData`` in the OTLP JSON encoding, which departs from
protobuf's JSON mapping in one place: trace and span ids are hex, not base64. ``traces_data``
turns them into base64 before ``json_format`` parses the line (parsed as they are, the hex
digits would be read as base64 and give ids of the wrong length, silently).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
import threading
from collections.abc import Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData

RECEIVER_THREADS = 4
APPLICATION_TIMEOUT_S = 120
# A reconciler that runs its rounds and advances its bounds every 100 ms: traces of rounds soon.
QUICK_RECONCILER = ("--interval-ms", "100", "--advance-interval-ms", "100")
STOP_GRACE_S = 1.0
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    """One span, with its resource's attributes."""

    name: str
    trace_id: str  # hex
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, Any]
    resource: dict[str, Any]
    kind: int = 0  # OTLP SpanKind: 1 internal, 2 server, 3 client
    events: tuple[str, ...] = ()
    event_times: tuple[tuple[str, int], ...] = ()  # (name, Unix ns) of each event
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id), hex
    start_ns: int = 0
    end_ns: int = 0

    @property
    def service(self) -> str:
        return str(self.resource.get("service.name", ""))


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every ExportTraceServiceRequest it is sent (``otlp_receiver`` serves it)."""

    def __init__(self) -> None:
        self.endpoint = ""  # http://127.0.0.1:<port>, once served
        self._lock = threading.Lock()
        self._requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        with self._lock:
            self._requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    @property
    def requests(self) -> list[trace_service_pb2.ExportTraceServiceRequest]:
        with self._lock:
            return list(self._requests)

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in the order they came."""
        return spans_of(rs for request in self.requests for rs in request.resource_spans)


@contextlib.contextmanager
def otlp_receiver() -> Iterator[TraceReceiver]:
    """A TraceReceiver served on a free port of 127.0.0.1 for the block (its ``endpoint`` is
    what OTEL_EXPORTER_OTLP_TRACES_ENDPOINT takes); stopped afterwards, whatever happens."""
    receiver = TraceReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=RECEIVER_THREADS))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    assert port, "the OTLP receiver could not bind a port on 127.0.0.1"
    server.start()
    receiver.endpoint = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        server.stop(STOP_GRACE_S).wait()


def traces_data(line: str) -> TracesData:
    """One line of an OTLP-JSON span file as the TracesData it encodes."""
    raw = json.loads(line)
    for resource_spans in raw.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _ids_to_base64(span)
                for link in span.get("links", []):
                    _ids_to_base64(link)
    parsed = TracesData()
    json_format.ParseDict(raw, parsed)
    return parsed


def file_spans(paths: Iterable[Path]) -> list[ReceivedSpan]:
    """Every span of the span files ``paths``, line after line."""
    return spans_of(
        resource_spans
        for path in paths
        for line in path.read_text().splitlines()
        for resource_spans in traces_data(line).resource_spans
    )


def folder_spans(folder: Path, pattern: str = "*.jsonl") -> list[ReceivedSpan]:
    """Every span of the span files in ``folder`` (those ``pattern`` matches)."""
    return file_spans(sorted(folder.glob(pattern)))


def spans_of(batches: Iterable[ResourceSpans]) -> list[ReceivedSpan]:
    found = []
    for resource_spans in batches:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes=attributes_of(span.attributes),
                        resource=resource,
                        kind=span.kind,
                        events=tuple(event.name for event in span.events),
                        event_times=tuple((e.name, e.time_unix_nano) for e in span.events),
                        links=tuple((k.trace_id.hex(), k.span_id.hex()) for k in span.links),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                    )
                )
    return found


def attributes_of(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def _ids_to_base64(span: dict[str, Any]) -> None:
    for field in _ID_FIELDS:
        if span.get(field):
            span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()


async def run_application(source: str, folder: Path, *args: str) -> dict[str, str]:
    """Run ``source`` (an application with a tracer provider of its own, say) as a separate
    process with ``args``; the JSON it printed last."""
    script = folder / "application.py"
    script.write_text(source)
    application = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(application.communicate(), APPLICATION_TIMEOUT_S)
    assert application.returncode == 0, err.decode()[-3000:]
    loaded: dict[str, str] = json.loads(out.decode().strip().splitlines()[-1])
    return loaded
