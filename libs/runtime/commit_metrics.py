"""The seed's commit metrics as a committing client sees them (a replica registering or taking
topology steps, a reconciler registering or taking leases): latency by outcome and group, and
retries. ``CMSClient`` reports each commit to a ``CommitObserver``; this one records it."""

from __future__ import annotations

from epochal.tcm.groups import GROUPS, group_of
from epochal.telemetry.metrics import Metrics, zeroed

OUTCOMES = ("success", "rejection", "failure")


class ClientCommitMetrics:
    def __init__(self, m: Metrics) -> None:
        self.latency = m.histogram(
            "epochal_cms_client_commit_latency_seconds",
            "commits this process sent to the CMS, from the first attempt to the answer, by "
            "outcome (success, rejection: a rule refused it, failure: no answer in time) and "
            "group of transformation",
            ("outcome", "kind"),
        )
        self.retries = m.counter(
            "epochal_cms_client_commit_retries_total",
            "commit attempts this process retried (on another member, or the same one after "
            "RESOURCE_EXHAUSTED), by group of transformation",
            ("kind",),
        )
        zeroed(self.latency, OUTCOMES, GROUPS)
        zeroed(self.retries, GROUPS)

    def committed(self, kind: str, outcome: str, seconds: float, retries: int) -> None:
        group = group_of(kind)
        self.latency.labels(outcome, group).observe(seconds)
        if retries:
            self.retries.labels(group).inc(retries)
