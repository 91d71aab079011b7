"""The reconciler's Prometheus metrics: the follower's (current epoch, fetch-log latency,
unreachable CMS members) and reconciliation's own."""

from __future__ import annotations

from epochal.runtime.commit_metrics import ClientCommitMetrics
from epochal.runtime.follower import FollowerMetrics
from epochal.telemetry.metrics import Metrics, zeroed


class ReconcilerMetrics:
    def __init__(self) -> None:
        m = self.metrics = Metrics()
        self.follower = FollowerMetrics(m)
        self.commits = ClientCommitMetrics(m)
        self.rounds = m.counter(
            "epochal_reconcile_rounds_total", "rounds ended, by outcome", ("outcome",)
        )
        self.round_seconds = m.histogram(
            "epochal_reconcile_round_duration_seconds", "how long a round took"
        )
        self.lag_s = m.gauge(
            "epochal_reconcile_lag_seconds",
            "per range held: now less the physical time of its low bound",
            ("keyspace", "range"),
        )
        self.unreconciled = m.gauge(
            "epochal_reconcile_unreconciled_mutations",
            "per range held: (id, replica) pairs missing at the last round's comparison",
            ("keyspace", "range"),
        )
        self.log_entries = m.gauge(
            "epochal_reconcile_log_entries",
            "mutation-log entries per replica, over the ranges this reconciler holds (as each "
            "range's last round found them)",
            ("replica",),
        )
        self.log_bytes = m.gauge(
            "epochal_reconcile_log_bytes",
            "mutation-log bytes per replica, over the ranges this reconciler holds",
            ("replica",),
        )
        self.delivered = m.counter(
            "epochal_reconcile_delivered_mutations_total", "mutations delivered to replicas"
        )
        self.delivered_bytes = m.counter(
            "epochal_reconcile_delivered_bytes_total", "bytes of the mutations delivered"
        )
        self.summary_bytes = m.counter(
            "epochal_reconcile_summary_received_bytes_total",
            "bytes of summaries and sketches received from replicas",
        )
        self.fences = m.counter("epochal_reconcile_fences_total", "fences raised (per replica)")
        self.collected = m.counter(
            "epochal_reconcile_log_entries_collected_total",
            "log entries replicas deleted below a low bound",
        )
        self.lease_changes = m.counter(
            "epochal_reconcile_lease_changes_total",
            "leases taken, renewed-away or lost, by kind",
            ("kind",),
        )
        zeroed(self.lease_changes, ("taken", "lost", "released"))
        self.cohort_mutations = m.gauge(
            "epochal_reconcile_cohort_mutations",
            "per cohort: log entries its members folded (held apart: not sent by id), as the "
            "member its range's last round asked reported",
            ("keyspace", "range", "cohort", "members"),
        )
        self.cohort_bytes = m.gauge(
            "epochal_reconcile_cohort_bytes",
            "per cohort: bytes of the log entries its members folded",
            ("keyspace", "range", "cohort", "members"),
        )
        self.cohort_age_s = m.gauge(
            "epochal_reconcile_cohort_age_seconds",
            "per cohort: seconds since it formed",
            ("keyspace", "range", "cohort", "members"),
        )
        self.cohort_delivered_bytes = m.counter(
            "epochal_reconcile_cohort_delivered_bytes_total",
            "bytes of cohort data (cells) delivered to replicas that lacked a cohort",
        )
        self.ranges_held = m.gauge("epochal_reconcile_ranges_held", "ranges this reconciler holds")
        self.registered = m.gauge(
            "epochal_reconcile_registered",
            "1 while the metadata names this reconciler at its --advertise address, else 0",
        )
        self.registration_changes = m.counter(
            "epochal_reconcile_registration_changes_total",
            "registration commits to the metadata log, by outcome (registered, deregistered, "
            "failed)",
            ("outcome",),
        )
        zeroed(self.registration_changes, ("registered", "deregistered", "failed"))
