"""The replica's metrics: the seed's TCM metrics (current epoch, fetch-log latency,
coordinator-behind counters, unreachable CMS members) plus the data path's."""

from __future__ import annotations

from epochal.runtime.follower import FollowerMetrics
from epochal.tcm.consistency import Consistency
from epochal.telemetry.metrics import Metrics


class ReplicaMetrics:
    def __init__(self) -> None:
        m = self.metrics = Metrics()
        self.follower = FollowerMetrics(m)
        self.coordinator_behind_placements = m.counter(
            "coordinator_behind_placements",
            "coordinated requests whose replica group changed in a newer epoch a reply revealed",
        )
        self.coordinator_behind_schema = m.counter(
            "coordinator_behind_schema",
            "coordinated requests whose keyspace or table changed in a newer epoch a reply "
            "revealed",
        )
        self.write_latency = m.histogram(
            "write_latency_seconds", "coordinated writes, by consistency level", ("consistency",)
        )
        self.read_latency = m.histogram(
            "read_latency_seconds", "coordinated reads, by consistency level", ("consistency",)
        )
        # Labelled children looked up once (each lookup takes a lock).
        self.write_latency_by_level = {c: self.write_latency.labels(c.value) for c in Consistency}
        self.read_latency_by_level = {c: self.read_latency.labels(c.value) for c in Consistency}
        self.request_failures = m.counter(
            "request_failures",
            "coordinated requests that failed, by operation and reason",
            ("operation", "reason"),
        )
        self.writes_fenced = m.counter(
            "writes_fenced",
            "write attempts refused below a reconciliation fence and retried under a fresh id",
        )
        self.read_repaired_mutations = m.counter(
            "read_repaired_mutations", "whole mutations a tracked read repaired"
        )
        self.read_repaired_cells = m.counter(
            "read_repaired_cells", "cells an untracked (digest) read repaired"
        )
        self.digest_mismatches = m.counter(
            "digest_mismatches", "untracked reads whose replicas' digests differed"
        )
        self.summary_mismatches = m.counter(
            "summary_mismatches", "tracked reads whose replicas' summaries differed"
        )
        self.row_data_reads = m.counter(
            "row_data_reads", "partitions whose row data this replica read from storage"
        )
        self.summary_reads = m.counter("summary_reads", "partition summaries this replica computed")
        self.mutations_stored = m.counter(
            "mutations_stored", "mutations stored here, by origin (write or repair)", ("origin",)
        )
        self.stored_by_origin = {
            False: self.mutations_stored.labels("write"),
            True: self.mutations_stored.labels("repair"),
        }
        self.mutations_duplicate = m.counter(
            "mutations_duplicate", "tracked mutations received again and stored once"
        )
        self.mutations_below_low_bound = m.counter(
            "mutations_below_low_bound",
            "deliveries and repairs of ids below the range's low bound, dropped as reconciled",
        )
        self.log_entries_collected = m.counter(
            "log_entries_collected", "mutation log entries deleted below an advanced low bound"
        )
        self.reconcile_delivered = m.counter(
            "reconcile_delivered", "mutations this replica delivered to others for a reconciler"
        )
        self.reconcile_delivered_bytes = m.counter(
            "reconcile_delivered_bytes", "bytes of the mutations delivered for a reconciler"
        )
        self.cohort_cells_sent = m.counter(
            "cohort_cells_sent", "cells of cohorts this replica sent to replicas that lacked them"
        )
        self.cohort_bytes_sent = m.counter(
            "cohort_bytes_sent", "bytes of the cohort cells this replica sent"
        )
        self.read_cohort_repairs = m.counter(
            "read_cohort_repairs",
            "reads whose data replica lacked a cohort another replica of the read held "
            "(the partition's data was repaired from a holder first)",
        )
        self.tombstones_purged = m.counter(
            "tombstones_purged",
            "tombstones (and the cells they shadowed) purged: past gc grace and below the low "
            "bound of a full reconciliation",
        )
        self.reconcile_refusals = m.counter(
            "reconcile_lease_refusals",
            "reconciler calls refused for a superseded or lapsed lease token",
        )
        self.refused = m.counter("refused", "replica-side requests refused, by reason", ("reason",))
        self.overloaded = m.counter(
            "overloaded", "requests refused with RESOURCE_EXHAUSTED, by where", ("where",)
        )
        self.storage_transactions = m.counter(
            "storage_transactions", "durable write transactions (several mutations share one)"
        )
        self.barriers = m.counter(
            "progress_barriers",
            "progress barriers completed, by level met and verdict (passed or waived)",
            ("level", "verdict"),
        )
        self.barrier_downgrades = m.counter(
            "progress_barrier_downgrades",
            "progress barrier levels that timed out and fell back, by level and the level after",
            ("level", "to"),
        )
        self.barrier_waiting = m.gauge(
            "progress_barrier_waiting",
            "1 while a barrier waits at its minimum level past its timeout",
        )
        self.barrier_latency = m.histogram(
            "progress_barrier_latency_seconds", "time from asking to a met progress barrier"
        )
        self.operation_steps = m.counter(
            "operation_steps", "topology steps (and undos) this node committed", ("step",)
        )
        self.cleanup_removed = m.counter(
            "cleanup_removed", "cells and log entries deleted by cleanup (ranges no longer owned)"
        )
        self.reconciled_mutations = m.counter(
            "reconciled_mutations",
            "log entries a join's partial reconciliation brought that its streams had not",
        )
        self.streamed_in_bytes = m.counter("streamed_in_bytes", "bytes of streams received")
        self.streamed_in_cells = m.counter("streamed_in_cells", "cells streams brought")
        self.streamed_in_mutations = m.counter(
            "streamed_in_mutations", "mutation-log entries streams brought whole"
        )
        self.streamed_in_mutation_bytes = m.counter(
            "streamed_in_mutation_bytes",
            "bytes of what a join's difference brought: whole mutations this node lacked (and, "
            "for ids held by id elsewhere, their partitions' cells)",
        )
        self.streamed_in_ids = m.counter(
            "streamed_in_ids",
            "log entries streams brought as ids with their partitions' cells (held by id)",
        )
        self.streamed_out_bytes = m.counter("streamed_out_bytes", "bytes this node streamed out")
        self.stream_failures = m.counter(
            "stream_failures", "range streams that broke and were retried"
        )

    def snapshot(self) -> dict[str, float]:
        return self.metrics.snapshot()
