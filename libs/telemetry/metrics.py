"""Metrics: Prometheus counters, gauges and histograms per process, served over HTTP when a
listen address is given, and readable in-process (``snapshot``) for Describe answers and tests.

Names follow Prometheus' conventions, checked here when a metric is made so that no new one
breaks them: every name starts with ``epochal_``; a counter's ends in ``_total``; a metric of a
unit says it in its base unit, last before ``_total`` (``_seconds``, ``_bytes``) — never
milliseconds; a histogram always has a unit. The seed's TCM metrics (seed 001, "Monitoring
Recommendations") are among them; README "Metrics" lists every one and its process.

Latency histograms share LATENCY_BUCKETS_S, up to 60 s, with a bound at each of the seed's
thresholds (2, 5, 10 and 30 s), so an alert on "more than 10 s" reads a bucket boundary.
A labelled metric whose label values are known in advance is created with its series at zero
(``zeroed``): a rate over a series that appears with its first event misses that event, and an
alert on it cannot tell "none yet" from "not exported". No ``_created`` series: Prometheus does
not need them and they double the exposition of every counter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)

disable_created_metrics()

PREFIX = "epochal_"
UNITS = ("_seconds", "_bytes")
LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    30.0,
    60.0,
)
SIZE_BUCKETS_BYTES = tuple(float(4**k) for k in range(3, 15))  # 64 B .. 256 MiB
_NAME = re.compile(r"epochal_[a-z][a-z0-9_]*[a-z0-9]")


def check_name(name: str, kind: str) -> None:
    """ValueError unless ``name`` keeps the conventions for a metric of ``kind``."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"metric {name!r}: names are {PREFIX}<snake_case>")
    if re.search(r"_(ms|millis|milliseconds|us|ns|kb|mb)(_|$)", name):
        raise ValueError(f"metric {name!r}: units are base units (_seconds, _bytes)")
    if kind == "counter" and not name.endswith("_total"):
        raise ValueError(f"counter {name!r} must end in _total")
    if kind != "counter" and name.endswith("_total"):
        raise ValueError(f"{kind} {name!r} must not end in _total (counters do)")
    if kind == "histogram" and not name.endswith(UNITS):
        raise ValueError(f"histogram {name!r} must end in its unit ({', '.join(UNITS)})")


class Metrics:
    """One process's metrics, in a registry of its own (several can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._server: object | None = None

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        check_name(name, "counter")
        return Counter(name, help_text, labelnames=labels, registry=self.registry)

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        check_name(name, "gauge")
        return Gauge(name, help_text, labelnames=labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS_S,
    ) -> Histogram:
        check_name(name, "histogram")
        return Histogram(
            name, help_text, labelnames=labels, registry=self.registry, buckets=buckets
        )

    def serve(self, address: str) -> None:
        """Expose ``/metrics`` on ``host:port`` (a thread of prometheus_client's)."""
        host, _, port = address.rpartition(":")
        self._server = start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)

    def snapshot(self) -> dict[str, float]:
        """Every sample as ``name{label="value",...}`` -> value (histograms: count and sum)."""
        values: dict[str, float] = {}
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    continue
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return values


def zeroed(metric: Counter | Gauge | Histogram, *label_sets: Iterable[str]) -> None:
    """Create ``metric``'s series for every combination of the label values given per label
    (``zeroed(commits, OUTCOMES, KINDS)``), at zero, before their first event."""
    combinations: list[tuple[str, ...]] = [()]
    for values in label_sets:
        combinations = [(*combo, value) for combo in combinations for value in values]
    for combo in combinations:
        metric.labels(*combo)
