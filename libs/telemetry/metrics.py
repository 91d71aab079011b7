"""Metrics: Prometheus counters, gauges and histograms per process, served over HTTP when a
listen address is given, and readable in-process (``snapshot``) for Describe answers and tests.

Names follow the seed's TCM metrics (commit latency, fetch-log latency, coordinator-behind
counters, unreachable CMS members, current epoch) in Prometheus' snake case; counters are
exposed with the ``_total`` suffix Prometheus adds.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
)


class Metrics:
    """One process's metrics, in a registry of its own (several can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._server: object | None = None

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(name, help_text, labelnames=labels, registry=self.registry)

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(name, help_text, labelnames=labels, registry=self.registry)

    def histogram(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Histogram:
        return Histogram(
            name, help_text, labelnames=labels, registry=self.registry, buckets=LATENCY_BUCKETS_S
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
                if sample.name.endswith(("_bucket", "_created")):
                    continue
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return values
