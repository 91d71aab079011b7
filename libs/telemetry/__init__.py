"""Tracing setup: OTLP-JSON span files when ``EPOCHAL_TRACE_DIR`` (or a flag) names a folder.

Without a folder the OpenTelemetry API's no-op tracer is used, so instrumented code costs
almost nothing. Each process writes ``<dir>/<service>-<instance>.jsonl``. ``span()`` is the
helper for the spans of a service's own work (a coordinated request, a barrier, a stream).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_provider: TracerProvider | None = None
_span_tracers: dict[str, trace.Tracer] = {}  # span()'s, by scope (made once tracing is on)


def setup_tracing(service: str, instance: str, trace_dir: str | None = None) -> Path | None:
    """Install a tracer provider writing OTLP-JSON lines; returns the file, or None if off."""
    global _provider
    folder = trace_dir or os.environ.get("EPOCHAL_TRACE_DIR", "")
    if not folder:
        return None
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter

    path = Path(folder) / f"{service}-{instance}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    resource = Resource.create({"service.name": service, "service.instance.id": instance})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(str(path))))
    trace.set_tracer_provider(provider)
    _provider = provider
    return path


def shutdown_tracing() -> None:
    """Flush and close the span file (call on shutdown)."""
    global _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = None


def enabled() -> bool:
    """Whether spans are being written (hot paths skip building them otherwise)."""
    return _provider is not None


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def span(name: str) -> contextlib.AbstractContextManager[trace.Span]:
    """An internal span named ``name`` ("replica.write": the service, a dot, the work), from the
    service's tracer ("epochal.replica"); or, when tracing is off, nothing to build: a
    non-recording span, so callers may set attributes without checking."""
    if enabled():
        scope = f"epochal.{name.partition('.')[0]}"
        found = _span_tracers.get(scope)
        if found is None:
            found = _span_tracers[scope] = tracer(scope)
        return found.start_as_current_span(name, kind=trace.SpanKind.INTERNAL)
    return contextlib.nullcontext(trace.INVALID_SPAN)
