"""Which spans are kept: the sampler chosen by the standard ``OTEL_TRACES_SAMPLER`` and
``OTEL_TRACES_SAMPLER_ARG`` variables, refused at startup when they are wrong.

The OpenTelemetry SDK reads the same variables when a TracerProvider is given no sampler, but
falls back silently: an unknown name becomes ``parentbased_always_on`` and a ratio that is not a
number becomes 1.0, each with a warning in a log nobody reads. A cluster traced at a ratio other
than the one asked for gives latency tables that mislead, so here both are errors that name the
variable. Without ``OTEL_TRACES_SAMPLER`` the sampler is parent-based ratio: a span whose parent
was sampled is sampled, a root span is kept at the ratio ``OTEL_TRACES_SAMPLER_ARG`` (1.0 when
unset) or when it links to a sampled span (``LinkedOrRatio``: a Paxos round is kept with the
sampled commits it carries), so one request is one whole trace or none of it. An argument given
to a sampler that takes none is ignored, as the specification says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes

SAMPLER_ENV = "OTEL_TRACES_SAMPLER"
SAMPLER_ARG_ENV = "OTEL_TRACES_SAMPLER_ARG"
DEFAULT_SAMPLER = "parentbased_traceidratio"
DEFAULT_RATIO = 1.0


class LinkedOrRatio(Sampler):
    """The root sampler of ``parentbased_traceidratio``: a root span that links to a sampled
    span is kept — a Paxos round carries many traces' commits, so it is a root with links, and
    the round of a sampled commit is kept with it — and any other root at the ratio."""

    def __init__(self, ratio: float) -> None:
        self._ratio = TraceIdRatioBased(ratio)

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if links and any(link.context.trace_flags.sampled for link in links):
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, trace_state)
        return self._ratio.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"LinkedOr{self._ratio.get_description()}"


def parent_based_ratio(ratio: float) -> Sampler:
    """A span's parent decides; a root is kept when it links to a kept span, else at ``ratio``."""
    return ParentBased(LinkedOrRatio(ratio))


_FIXED: dict[str, Sampler] = {
    "always_on": ALWAYS_ON,
    "always_off": ALWAYS_OFF,
    "parentbased_always_on": DEFAULT_ON,
    "parentbased_always_off": DEFAULT_OFF,
}
_BY_RATIO: dict[str, Callable[[float], Sampler]] = {
    "traceidratio": TraceIdRatioBased,
    "parentbased_traceidratio": parent_based_ratio,
}
SAMPLERS = (*_FIXED, *_BY_RATIO)


def sampler_from(environ: Mapping[str, str]) -> tuple[Sampler, str]:
    """The sampler the variables in ``environ`` ask for and how to say it in a log line
    (``parentbased_traceidratio(0.25)``); ValueError naming the variable when one is wrong.
    An empty variable counts as unset."""
    name = environ.get(SAMPLER_ENV, "").strip().lower() or DEFAULT_SAMPLER
    if name in _FIXED:
        return _FIXED[name], name
    if name not in _BY_RATIO:
        raise ValueError(
            f"{SAMPLER_ENV}={environ[SAMPLER_ENV]!r} is not a sampler this process knows: use one "
            f"of {', '.join(SAMPLERS)} (unset: {DEFAULT_SAMPLER} at {SAMPLER_ARG_ENV}, "
            f"default {DEFAULT_RATIO})"
        )
    ratio = ratio_from(environ)
    return _BY_RATIO[name](ratio), f"{name}({ratio})"


def ratio_from(environ: Mapping[str, str]) -> float:
    """``OTEL_TRACES_SAMPLER_ARG`` as a ratio in [0, 1] (DEFAULT_RATIO when unset)."""
    text = environ.get(SAMPLER_ARG_ENV, "").strip()
    if not text:
        return DEFAULT_RATIO
    try:
        ratio = float(text)
    except ValueError:
        ratio = math.nan
    if not 0.0 <= ratio <= 1.0:  # NaN fails this too
        raise ValueError(
            f"{SAMPLER_ARG_ENV}={text!r} is not a sampling ratio: give a number from 0 (no "
            "trace) to 1 (every trace)"
        )
    return ratio
