"""The replica's metrics: the seed's TCM metrics (current epoch, fetch-log latency,
coordinator-behind counters, unreachable CMS members) plus the data path's."""

from __future__ import annotations

from epochal.runtime.commit_metrics import ClientCommitMetrics
from epochal.runtime.follower import FollowerMetrics
from epochal.tcm.barrier import FALLBACK_CHAIN
from epochal.tcm.consistency import Consistency
from epochal.telemetry.metrics import Metrics, zeroed


class ReplicaMetrics:
    def __init__(self) -> None:
        m = self.metrics = Metrics()
        self.follower = FollowerMetrics(m)
        self.commits = ClientCommitMetrics(m)
        self.coordinator_behind_placements = m.counter(
            "epochal_coordinator_behind_placements_total",
            "coordinated requests whose replica group changed in a newer epoch a reply revealed",
        )
        self.coordinator_behind_schema = m.counter(
            "epochal_coordinator_behind_schema_total",
            "coordinated requests whose keyspace or table changed in a newer epoch a reply "
            "revealed",
        )
        self.write_latency = m.histogram(
            "epochal_write_latency_seconds",
            "coordinated writes, by consistency level",
            ("consistency",),
        )
        self.read_latency = m.histogram(
            "epochal_read_latency_seconds",
            "coordinated reads, by consistency level",
            ("consistency",),
        )
        # Labelled children looked up once (each lookup takes a lock).
        self.write_latency_by_level = {c: self.write_latency.labels(c.value) for c in Consistency}
        self.read_latency_by_level = {c: self.read_latency.labels(c.value) for c in Consistency}
        self.request_failures = m.counter(
            "epochal_request_failures_total",
            "coordinated requests that failed, by operation and reason",
            ("operation", "reason"),
        )
        self.writes_fenced = m.counter(
            "epochal_writes_fenced_total",
            "write attempts refused below a reconciliation fence and retried under a fresh id",
        )
        self.read_repaired_mutations = m.counter(
            "epochal_read_repaired_mutations_total", "whole mutations a tracked read repaired"
        )
        self.read_repaired_cells = m.counter(
            "epochal_read_repaired_cells_total", "cells an untracked (digest) read repaired"
        )
        self.digest_mismatches = m.counter(
            "epochal_digest_mismatches_total", "untracked reads whose replicas' digests differed"
        )
        self.summary_mismatches = m.counter(
            "epochal_summary_mismatches_total", "tracked reads whose replicas' summaries differed"
        )
        self.row_data_reads = m.counter(
            "epochal_row_data_reads_total",
            "partitions whose row data this replica read from storage",
        )
        self.summary_reads = m.counter(
            "epochal_summary_reads_total", "partition summaries this replica computed"
        )
        self.mutations_stored = m.counter(
            "epochal_mutations_stored_total",
            "mutations stored here, by origin (write or repair)",
            ("origin",),
        )
        self.stored_by_origin = {
            False: self.mutations_stored.labels("write"),
            True: self.mutations_stored.labels("repair"),
        }
        self.mutations_duplicate = m.counter(
            "epochal_mutations_duplicate_total", "tracked mutations received again and stored once"
        )
        self.mutations_below_low_bound = m.counter(
            "epochal_mutations_below_low_bound_total",
            "deliveries and repairs of ids below the range's low bound, dropped as reconciled",
        )
        self.log_entries_collected = m.counter(
            "epochal_log_entries_collected_total",
            "mutation log entries deleted below an advanced low bound",
        )
        self.reconcile_delivered = m.counter(
            "epochal_reconcile_delivered_mutations_total",
            "mutations this replica delivered to others for a reconciler",
        )
        self.reconcile_delivered_bytes = m.counter(
            "epochal_reconcile_delivered_bytes_total",
            "bytes of the mutations delivered for a reconciler",
        )
        self.cohort_cells_sent = m.counter(
            "epochal_cohort_sent_cells_total",
            "cells of cohorts this replica sent to replicas that lacked them",
        )
        self.cohort_bytes_sent = m.counter(
            "epochal_cohort_sent_bytes_total", "bytes of the cohort cells this replica sent"
        )
        self.read_cohort_repairs = m.counter(
            "epochal_read_cohort_repairs_total",
            "reads whose data replica lacked a cohort another replica of the read held "
            "(the partition's data was repaired from a holder first)",
        )
        self.tombstones_purged = m.counter(
            "epochal_tombstones_purged_total",
            "tombstones (and the cells they shadowed) purged: past gc grace and below the low "
            "bound of a full reconciliation",
        )
        self.reconcile_refusals = m.counter(
            "epochal_reconcile_lease_refusals_total",
            "reconciler calls refused for a superseded or lapsed lease token",
        )
        self.refused = m.counter(
            "epochal_refused_total", "replica-side requests refused, by reason", ("reason",)
        )
        self.overloaded = m.counter(
            "epochal_overloaded_total",
            "requests refused with RESOURCE_EXHAUSTED, by where",
            ("where",),
        )
        zeroed(self.overloaded, ("coordinator", "replica"))
        self.storage_transactions = m.counter(
            "epochal_storage_transactions_total",
            "durable write transactions (several mutations share one)",
        )
        self.barriers = m.counter(
            "epochal_progress_barriers_total",
            "progress barriers completed, by level met and verdict (passed or waived)",
            ("level", "verdict"),
        )
        self.barrier_downgrades = m.counter(
            "epochal_progress_barrier_relaxations_total",
            "progress barrier levels that timed out and fell back, by level and the level after",
            ("level", "to"),
        )
        self.barrier_waiting = m.gauge(
            "epochal_progress_barrier_waiting",
            "1 while a barrier waits at its minimum level past its timeout",
        )
        self.barrier_retries = m.counter(
            "epochal_progress_barrier_retries_total",
            "times a progress barrier asked a node again (it had not reached the epoch yet or "
            "did not answer)",
        )
        zeroed(self.barriers, [level.value for level in FALLBACK_CHAIN], ("passed", "waived"))
        for higher, level in enumerate(FALLBACK_CHAIN):
            for lower in FALLBACK_CHAIN[higher + 1 :]:
                self.barrier_downgrades.labels(level.value, lower.value)
        self.barrier_waiting_s = m.gauge(
            "epochal_progress_barrier_waiting_seconds",
            "how long the progress barrier waiting longest now has waited (0: none waits)",
        )
        self.barrier_latency = m.histogram(
            "epochal_progress_barrier_latency_seconds", "time from asking to a met progress barrier"
        )
        self.operation_steps = m.counter(
            "epochal_operation_steps_total",
            "topology steps (and undos) this node committed",
            ("step",),
        )
        self.cleanup_removed = m.counter(
            "epochal_cleanup_removed_total",
            "cells and log entries deleted by cleanup (ranges no longer owned)",
        )
        self.reconciled_mutations = m.counter(
            "epochal_join_reconciled_mutations_total",
            "log entries a join's partial reconciliation brought that its streams had not",
        )
        self.streamed_in_bytes = m.counter(
            "epochal_stream_received_bytes_total", "bytes of streams received"
        )
        self.streamed_in_cells = m.counter(
            "epochal_stream_received_cells_total", "cells streams brought"
        )
        self.streamed_in_mutations = m.counter(
            "epochal_stream_received_mutations_total", "mutation-log entries streams brought whole"
        )
        self.streamed_in_mutation_bytes = m.counter(
            "epochal_stream_received_mutation_bytes_total",
            "bytes of what a join's difference brought: whole mutations this node lacked (and, "
            "for ids held by id elsewhere, their partitions' cells)",
        )
        self.streamed_in_ids = m.counter(
            "epochal_stream_received_ids_total",
            "log entries streams brought as ids with their partitions' cells (held by id)",
        )
        self.streamed_out_bytes = m.counter(
            "epochal_stream_sent_bytes_total", "bytes this node streamed out"
        )
        self.stream_failures = m.counter(
            "epochal_stream_failures_total", "range streams that broke and were retried"
        )

    def snapshot(self) -> dict[str, float]:
        return self.metrics.snapshot()
