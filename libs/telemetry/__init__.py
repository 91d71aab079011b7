"""Tracing setup: where a process's spans go, what they say of the process, which are kept.

Where: an OTLP-JSON lines file when ``EPOCHAL_TRACE_DIR`` (or a service's ``--trace-dir``)
names a folder — ``<dir>/<service>-<instance>.jsonl``, one OTLP ``TracesData`` per line, as
the OpenTelemetry file exporter writes it; OTLP over gRPC to a collector when
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the exporter
reads those and the standard ``_INSECURE``, ``_HEADERS``, ``_TIMEOUT``... variables itself); both
when both; nowhere when neither, or when ``OTEL_SDK_DISABLED=true``. With nowhere to go no
provider is installed and the OpenTelemetry API's no-op tracer is used, so instrumented code
costs almost nothing. On shutdown the file is flushed first (a provider shuts its processors
down in the order they were added), then the collector gets at most ``OTLP_FLUSH_MAX_S``: its
exporter would retry for its whole timeout (10 s), longer than a service's grace period, and a
collector that does not answer must not turn every stop into an overrun.

What: the resource names the service, its instance, the epochal version and, when known, the
node id, datacenter and rack (names in ``epochal.telemetry.attributes``).

Which: ``epochal.telemetry.sampling`` (parent-based ratio 1.0 unless ``OTEL_TRACES_SAMPLER``
and ``OTEL_TRACES_SAMPLER_ARG`` say otherwise; wrong values refused). A service calls
``check_environment`` with its flags, so a wrong variable stops it before it starts.

The propagator is W3C trace context unless ``OTEL_PROPAGATORS`` names others. ``span()`` is
the helper for the spans of a service's own work (a coordinated request, a barrier, a stream).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from epochal.telemetry import attributes
from epochal.telemetry.sampling import sampler_from

TRACE_DIR_ENV = "EPOCHAL_TRACE_DIR"
# The traces variable wins over the general one, as in the OTLP exporter.
OTLP_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
OTLP_PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
DISABLED_ENV = "OTEL_SDK_DISABLED"
PROPAGATORS_ENV = "OTEL_PROPAGATORS"
DISTRIBUTION = "epochal"
# How long a stop waits for the collector to take the last spans (a collector that answers
# takes a batch in milliseconds); then the exporter gives up and what it holds is lost.
OTLP_FLUSH_MAX_S = 1.0

_provider: TracerProvider | None = None
_otlp_exporter: SpanExporter | None = None  # to stop its retries at shutdown
_span_tracers: dict[str, trace.Tracer] = {}  # span()'s, by scope (made once tracing is on)


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingSetup:
    """Where this process's spans go (at least one of ``file`` and ``otlp_endpoint``) and
    which are kept."""

    file: Path | None
    otlp_endpoint: str | None  # as the variable gives it: http://collector:4317
    sampler: str  # parentbased_traceidratio(1.0)

    def __post_init__(self) -> None:
        assert self.file is not None or self.otlp_endpoint is not None, "spans go nowhere"

    def __str__(self) -> str:
        places = []
        if self.file is not None:
            places.append(str(self.file))
        if self.otlp_endpoint is not None:
            places.append(f"OTLP gRPC {self.otlp_endpoint}")
        return f"spans to {' and '.join(places)}, sampler {self.sampler}"


def describe(setup: TracingSetup | None) -> str:
    """The line a service logs at startup."""
    if setup is None:
        return (
            f"tracing off: neither {TRACE_DIR_ENV} nor an OTLP endpoint "
            f"({' / '.join(OTLP_ENDPOINT_ENVS)}) is set, or {DISABLED_ENV}=true"
        )
    return str(setup)


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """ValueError, naming the variable, when one that tracing reads is wrong: an unknown
    sampler, a ratio outside [0, 1], an OTLP protocol other than gRPC."""
    if _disabled(environ):
        return
    sampler_from(environ)
    protocol = _first_set(environ, OTLP_PROTOCOL_ENVS)
    if protocol is not None and protocol[1].strip().lower() != "grpc":
        name, value = protocol
        raise ValueError(f"{name}={value!r}: spans are exported over OTLP gRPC only (grpc)")


def planned(
    service: str,
    instance: str,
    trace_dir: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> TracingSetup | None:
    """Where ``setup_tracing`` would send spans (None: nowhere), without installing anything;
    ValueError as ``check_environment``."""
    if _disabled(environ):
        return None
    check_environment(environ)
    folder = trace_dir or environ.get(TRACE_DIR_ENV, "")
    endpoint = _first_set(environ, OTLP_ENDPOINT_ENVS)
    if not folder and endpoint is None:
        return None
    return TracingSetup(
        file=Path(folder) / f"{service}-{instance}.jsonl" if folder else None,
        otlp_endpoint=endpoint[1] if endpoint is not None else None,
        sampler=sampler_from(environ)[1],
    )


def resource_attributes(
    service: str, instance: str, *, node_id: str = "", datacenter: str = "", rack: str = ""
) -> dict[str, str]:
    """The process's resource attributes, the empty ones left out."""
    every = {
        attributes.SERVICE_NAME: service,
        attributes.SERVICE_INSTANCE: instance,
        attributes.SERVICE_VERSION: version(),
        attributes.NODE_ID: node_id,
        attributes.DATACENTER: datacenter,
        attributes.RACK: rack,
    }
    return {name: value for name, value in every.items() if value}


def version() -> str:
    """The installed epochal distribution's version ("unknown" when it is not installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def setup_tracing(
    service: str,
    instance: str,
    trace_dir: str | None = None,
    *,
    node_id: str = "",
    datacenter: str = "",
    rack: str = "",
) -> TracingSetup | None:
    """Install this process's tracer provider (once per process) and the propagator; returns
    where spans go, or None when tracing is off (no provider then). ValueError as
    ``check_environment``."""
    global _provider, _otlp_exporter
    if not os.environ.get(PROPAGATORS_ENV, "").strip():
        propagate.set_global_textmap(TraceContextTextMapPropagator())
    setup = planned(service, instance, trace_dir)
    if setup is None:
        return None
    if _provider is not None:
        raise RuntimeError("tracing is set up once per process")
    resource = Resource.create(
        resource_attributes(service, instance, node_id=node_id, datacenter=datacenter, rack=rack)
    )
    provider = TracerProvider(resource=resource, sampler=sampler_from(os.environ)[0])
    if setup.file is not None:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        setup.file.parent.mkdir(parents=True, exist_ok=True)
        provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(str(setup.file))))
    otlp_exporter = None
    if setup.otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        otlp_exporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(otlp_exporter))
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:  # the API keeps the first one set
        provider.shutdown()
        raise RuntimeError("a tracer provider was installed in this process before")
    _provider, _otlp_exporter = provider, otlp_exporter
    return setup


def shutdown_tracing() -> None:
    """Flush and close every exporter (call on shutdown): the file, then the collector, which
    gets at most OTLP_FLUSH_MAX_S."""
    global _provider, _otlp_exporter
    if _provider is None:
        return
    give_up = None
    if _otlp_exporter is not None:
        # Shutting the exporter down ends its retries and cancels a call in flight.
        give_up = threading.Timer(OTLP_FLUSH_MAX_S, _otlp_exporter.shutdown)
        give_up.daemon = True
        give_up.start()
    try:
        _provider.shutdown()
    finally:
        if give_up is not None:
            give_up.cancel()
        _provider = _otlp_exporter = None


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


def _first_set(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(name, value) of the first of ``names`` set to something, else None."""
    return next(((n, environ[n]) for n in names if environ.get(n, "").strip()), None)


def _disabled(environ: Mapping[str, str]) -> bool:
    """``OTEL_SDK_DISABLED`` as the SDK reads it: "true" in any case, else not."""
    return environ.get(DISABLED_ENV, "").strip().lower() == "true"
