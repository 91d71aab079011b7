"""Tracing setup: the sampler each setting of the standard variables gives (a wrong one refused,
naming the variable), where spans go, the resource every span carries, and the span file — one
OTLP TracesData per line. The OpenTelemetry API takes one tracer provider per process, so what
installs one runs in a child interpreter of its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from epochal.telemetry import check_environment, planned, resource_attributes
from epochal.telemetry.sampling import sampler_from
from tests.harness import file_spans

SAMPLER = "OTEL_TRACES_SAMPLER"
ARG = "OTEL_TRACES_SAMPLER_ARG"
CHILD_TIMEOUT_S = 60

# The OTEL_* variables a child must not inherit from whoever runs the tests.
TRACING_VARIABLES = (
    "EPOCHAL_TRACE_DIR",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_PROPAGATORS",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SERVICE_NAME",
)


# --------------------------------------------------------------------------- the sampler


@pytest.mark.parametrize(
    ("environ", "said", "sdk_description"),
    [
        # Unset: parent-based ratio, the ratio from the argument, else 1.0.
        ({}, "parentbased_traceidratio(1.0)", "ParentBased{root:LinkedOrTraceIdRatioBased{1.0},"),
        ({SAMPLER: "", ARG: ""}, "parentbased_traceidratio(1.0)", "ParentBased{root:LinkedOrTrace"),
        (
            {ARG: "0.25"},
            "parentbased_traceidratio(0.25)",
            "ParentBased{root:LinkedOrTraceIdRatioBased{0.25}",
        ),
        (
            {ARG: "0"},
            "parentbased_traceidratio(0.0)",
            "ParentBased{root:LinkedOrTraceIdRatioBased{0.0},",
        ),
        # Named: the standard ones, in any case; a ratio only for the ratio samplers.
        ({SAMPLER: "traceidratio", ARG: "0.5"}, "traceidratio(0.5)", "TraceIdRatioBased{0.5}"),
        ({SAMPLER: "traceidratio"}, "traceidratio(1.0)", "TraceIdRatioBased{1.0}"),
        (
            {SAMPLER: "parentbased_traceidratio", ARG: " 0.1 "},
            "parentbased_traceidratio(0.1)",
            "ParentBased{root:LinkedOrTraceIdRatioBased{0.1},",
        ),
        ({SAMPLER: "always_off"}, "always_off", "AlwaysOffSampler"),
        ({SAMPLER: "ALWAYS_ON", ARG: "0.1"}, "always_on", "AlwaysOnSampler"),
        ({SAMPLER: "parentbased_always_on"}, "parentbased_always_on", "ParentBased{root:AlwaysOn"),
        (
            {SAMPLER: "parentbased_always_off"},
            "parentbased_always_off",
            "ParentBased{root:AlwaysOf",
        ),
    ],
)
def test_the_sampler_is_the_one_the_variables_name(
    environ: dict[str, str], said: str, sdk_description: str
) -> None:
    sampler, description = sampler_from(environ)
    assert description == said
    assert sampler.get_description().startswith(sdk_description), sampler.get_description()


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({SAMPLER: "jaeger_remote"}, "OTEL_TRACES_SAMPLER='jaeger_remote' is not a sampler"),
        ({SAMPLER: "parentbased"}, "OTEL_TRACES_SAMPLER='parentbased' is not a sampler"),
        ({ARG: "half"}, "OTEL_TRACES_SAMPLER_ARG='half' is not a sampling ratio"),
        ({ARG: "1.5"}, "OTEL_TRACES_SAMPLER_ARG='1.5' is not a sampling ratio"),
        ({ARG: "-0.1"}, "OTEL_TRACES_SAMPLER_ARG='-0.1' is not a sampling ratio"),
        ({ARG: "nan"}, "OTEL_TRACES_SAMPLER_ARG='nan' is not a sampling ratio"),
        ({SAMPLER: "traceidratio", ARG: "x"}, "OTEL_TRACES_SAMPLER_ARG='x' is not"),
    ],
)
def test_an_unknown_sampler_or_a_bad_ratio_is_refused_naming_the_variable(
    environ: dict[str, str], named: str
) -> None:
    """The SDK alone would warn and trace at another rate (parentbased_always_on, ratio 1.0)."""
    with pytest.raises(ValueError, match=f"^{re.escape(named)}"):
        sampler_from(environ)
    with pytest.raises(ValueError, match=f"^{re.escape(named)}"):
        check_environment(environ)


def test_only_otlp_over_grpc_is_accepted_and_a_disabled_sdk_reads_nothing() -> None:
    with pytest.raises(ValueError, match=r"^OTEL_EXPORTER_OTLP_PROTOCOL='http/protobuf': "):
        check_environment({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    with pytest.raises(ValueError, match=r"^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='http/json': "):
        check_environment({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"})
    # The traces variable wins over the general one.
    check_environment(
        {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        }
    )
    check_environment({"OTEL_SDK_DISABLED": "TRUE", SAMPLER: "nonsense"})


# --------------------------------------------------------------------------- where spans go

ENDPOINT = "http://127.0.0.1:4317"
TRACES_ENDPOINT = "http://127.0.0.1:14317"


@pytest.mark.parametrize(
    ("environ", "file", "endpoint"),
    [
        ({}, None, None),
        ({"EPOCHAL_TRACE_DIR": "/spans"}, "/spans/cms-cms1.jsonl", None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, None, ENDPOINT),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": " "},
            None,
            ENDPOINT,
        ),
        (
            {
                "EPOCHAL_TRACE_DIR": "/spans",
                "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": TRACES_ENDPOINT,
            },
            "/spans/cms-cms1.jsonl",
            TRACES_ENDPOINT,
        ),
        ({"EPOCHAL_TRACE_DIR": "/spans", "OTEL_SDK_DISABLED": "true"}, None, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "True"}, None, None),
    ],
)
def test_spans_go_to_the_file_to_the_collector_to_both_or_nowhere(
    environ: dict[str, str], file: str | None, endpoint: str | None
) -> None:
    setup = planned("cms", "cms1", None, environ)
    if file is None and endpoint is None:
        assert setup is None
        return
    assert setup is not None
    assert setup.file == (Path(file) if file else None)
    assert setup.otlp_endpoint == endpoint
    assert setup.sampler == "parentbased_traceidratio(1.0)"


def test_a_trace_dir_flag_wins_over_the_variable() -> None:
    setup = planned("replica", "127.0.0.1_9001", "/flag", {"EPOCHAL_TRACE_DIR": "/variable"})
    assert setup is not None and setup.file == Path("/flag/replica-127.0.0.1_9001.jsonl")


def test_the_resource_names_the_process_and_leaves_out_what_is_not_known() -> None:
    assert resource_attributes("replica", "127.0.0.1_9001", datacenter="dc2", rack="r3") == {
        "service.name": "replica",
        "service.instance.id": "127.0.0.1_9001",
        "service.version": metadata.version("epochal"),
        "epochal.datacenter": "dc2",
        "epochal.rack": "r3",
    }
    assert resource_attributes("cms", "cms1", node_id="cms1")["epochal.node.id"] == "cms1"


# --------------------------------------------------------------------------- installed, in a child

# Sets tracing up as a service does, writes three batches of a root and a child span (each
# batch flushed: one line of the file each), shuts down and prints what it saw.
CHILD = """
import json, sys
from opentelemetry import propagate, trace
from epochal import telemetry
setup = telemetry.setup_tracing(
    "cms", "cms1", sys.argv[1] or None, node_id="cms1", datacenter="dc1", rack=""
)
enabled = telemetry.enabled()
provider = trace.get_tracer_provider()
for n in range(3):
    with telemetry.span("cms.root"):
        with telemetry.tracer("epochal.cms").start_as_current_span("cms.child") as child:
            child.set_attribute("epochal.epoch", n)
    if enabled:
        provider.force_flush()
again = ""
if sys.argv[2] == "again":
    try:
        telemetry.setup_tracing("cms", "cms2", sys.argv[1])
    except RuntimeError as error:
        again = str(error)
telemetry.shutdown_tracing()
print(json.dumps({
    "setup": str(setup) if setup else None,
    "enabled": enabled,
    "sampler": provider.sampler.get_description() if enabled else None,
    "propagator": sorted(propagate.get_global_textmap().fields),
    "again": again,
}))
"""


def run_child(
    trace_dir: Path | None, environ: dict[str, str] | None = None, *, again: bool = False
) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if k not in TRACING_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(trace_dir or ""), "again" if again else ""],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env={**clean, **(environ or {})},
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_the_span_file_holds_one_traces_data_per_line_with_the_resource(tmp_path: Path) -> None:
    answer = run_child(tmp_path / "spans")
    file = tmp_path / "spans" / "cms-cms1.jsonl"
    assert answer["setup"] == f"spans to {file}, sampler parentbased_traceidratio(1.0)"
    assert answer["sampler"].startswith("ParentBased{root:LinkedOrTraceIdRatioBased{1.0},")
    assert answer["propagator"] == ["traceparent", "tracestate"]  # W3C trace context alone
    lines = file.read_text().splitlines()
    assert len(lines) == 3  # one per flushed batch
    spans = file_spans([file])
    assert len(spans) == 6
    for span in spans:
        assert span.resource["service.name"] == "cms"
        assert span.resource["service.instance.id"] == "cms1"
        assert span.resource["service.version"] == metadata.version("epochal")
        assert span.resource["epochal.node.id"] == "cms1"
        assert span.resource["epochal.datacenter"] == "dc1"
        assert "epochal.rack" not in span.resource  # empty: left out
        assert len(span.trace_id) == 32 and len(span.span_id) == 16  # 16 and 8 bytes
    roots = {s.span_id: s for s in spans if s.name == "cms.root"}
    children = [s for s in spans if s.name == "cms.child"]
    assert len(roots) == 3 and sorted(s.attributes["epochal.epoch"] for s in children) == [0, 1, 2]
    for child in children:
        assert roots[child.parent_span_id].trace_id == child.trace_id
    assert len({s.trace_id for s in roots.values()}) == 3


def test_at_ratio_zero_nothing_is_written_though_tracing_is_on(tmp_path: Path) -> None:
    answer = run_child(tmp_path / "spans", {ARG: "0"})
    assert answer["enabled"] is True
    assert answer["setup"].endswith("sampler parentbased_traceidratio(0.0)")
    assert (tmp_path / "spans" / "cms-cms1.jsonl").read_text() == ""


def test_a_disabled_sdk_installs_nothing_and_writes_nothing(tmp_path: Path) -> None:
    answer = run_child(tmp_path / "spans", {"OTEL_SDK_DISABLED": "true"})
    assert answer["setup"] is None and answer["enabled"] is False
    assert not (tmp_path / "spans").exists()


def test_other_propagators_are_left_to_otel_propagators(tmp_path: Path) -> None:
    assert run_child(None, {"OTEL_PROPAGATORS": "baggage"})["propagator"] == ["baggage"]
    assert run_child(None)["propagator"] == ["traceparent", "tracestate"]  # tracing off too


def test_tracing_is_set_up_once_per_process(tmp_path: Path) -> None:
    answer = run_child(tmp_path / "spans", again=True)
    assert answer["again"] == "tracing is set up once per process"
    assert not (tmp_path / "spans" / "cms-cms2.jsonl").exists()
