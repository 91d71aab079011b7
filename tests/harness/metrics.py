"""Metrics as Prometheus scrapes them: ``scrape`` reads a process's ``/metrics`` over HTTP and
returns every sample as ``name{label="value",...}`` -> value (the key ``snapshot`` and Describe
use), histogram buckets included; ``sample`` reads one and raises on a sample the process does
not export (a renamed or misspelled name must not read as 0)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

SCRAPE_TIMEOUT_S = 5.0


def scrape(address: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=SCRAPE_TIMEOUT_S) as answer:
        text = answer.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for name, labels, value, *_ in family.samples:
            shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            samples[f"{name}{{{shown}}}" if shown else name] = value
    return samples


def sample(samples: dict[str, float], key: str) -> float:
    if key not in samples:
        family = key.partition("{")[0]
        alike = sorted(k for k in samples if family in k) or sorted(samples)
        raise KeyError(f"no sample {key!r} (there are {alike[:8]}…)")
    return samples[key]


def total(samples: dict[str, float], family: str, **labels: str) -> float:
    """The sum of ``family``'s samples whose labels include ``labels`` (KeyError: none)."""
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    found = [
        value
        for key, value in samples.items()
        if key.partition("{")[0] == family and all(w in key for w in wanted)
    ]
    if not found:
        raise KeyError(f"no sample of {family} with {labels}")
    return sum(found)
