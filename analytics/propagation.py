"""How fast an epoch reaches every node, and how far reconciliation lags per range.

**Epoch propagation.** An epoch is committed when a quorum has accepted the slot that holds it.
No span marks that moment (the last vote cast), so its time is the first moment a CMS member is
known to have learnt it: the ``accepted`` event of the leader's ``cms.commit`` (taken when the
leader learns the slot chosen, before it tells the others), or the end of a forwarding member's
``cms.commit`` — a member with a client waiting gets the acceptors' votes itself and may learn,
apply and answer before the leader learns (``epochal.paxos``: "learners get the vote first").
The earliest of these, should the epoch show in several (a retried commit's duplicate answers
name the same epoch). A node applied it at the start of its ``epoch.apply`` span: the time its
follower recorded (one for a batch of epochs), the one ``Replica.AppliedEpochs`` reports.
``propagation_ms`` is the difference. An epoch with no traced commit (its commit was sampled
out, or made before tracing began) is measured from its first apply anywhere (``reference``
says which: ``commit`` or ``first_apply``).

**Reconciliation lag.** Each ``reconciler.round`` reports the HLC time up to which its range
agrees (``epochal.reconciliation_time``); the lag at the round's end is that end less the newest
such time reached so far for the range — the same definition as the reconciler's
``epochal_reconcile_lag_seconds`` — so rounds that reach nothing let the lag grow.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from epochal.analytics.latency import percentiles
from epochal.mtrack.hlc import LOGICAL_BITS
from epochal.telemetry import attributes as attr

ADVANCED = "advanced"  # the outcome of a round that moved its range's low bound
COMMITTED = ("committed", "duplicate")  # the outcomes of a cms.commit that names its epoch


def epoch_commits(spans: DataFrame) -> DataFrame:
    """Per epoch, the first moment a CMS member is known to have learnt it chosen
    (``commit_ns``), and its transformation."""
    chosen = F.filter("events", lambda e: e["name"] == attr.PHASE_ACCEPTED)
    learnt = F.when(F.size(chosen) > 0, chosen[0]["time_ns"]).when(
        F.col("forwarded") & F.col("outcome").isin(*COMMITTED), F.col("end_ns")
    )
    return (
        spans.where(
            (F.col("name") == attr.CMS_COMMIT) & F.col("epoch").isNotNull() & (F.col("epoch") > 0)
        )
        .select("epoch", "transformation", learnt.alias("learnt_ns"))
        .where(F.col("learnt_ns").isNotNull())
        .groupBy("epoch")
        .agg(
            F.min("learnt_ns").alias("commit_ns"), F.first("transformation").alias("transformation")
        )
    )


def epoch_propagation(spans: DataFrame) -> DataFrame:
    """Per epoch and node that applied it: commit time, apply time, propagation."""
    applies = (
        spans.where((F.col("name") == attr.EPOCH_APPLY) & F.col("epoch").isNotNull())
        .groupBy("epoch", "node")
        .agg(F.min("start_ns").alias("apply_ns"), F.first("service").alias("service"))
    )
    first = Window.partitionBy("epoch")
    joined = applies.join(epoch_commits(spans), "epoch", "left").withColumn(
        "first_apply_ns", F.min("apply_ns").over(first)
    )
    started = spans.groupBy("node").agg(F.min("start_ns").alias("node_first_ns"))
    joined = joined.join(F.broadcast(started), "node", "left")
    reference = F.coalesce("commit_ns", "first_apply_ns")
    return joined.select(
        "epoch",
        "node",
        "service",
        "transformation",
        reference.alias("commit_ns"),
        "apply_ns",
        ((F.col("apply_ns") - reference) / 1e6).alias("propagation_ms"),
        F.when(F.col("commit_ns").isNotNull(), "commit")
        .otherwise("first_apply")
        .alias("reference"),
        # committed before the node's first span: it was not running yet (it started later, or
        # joined later), so the time includes its start
        (reference < F.col("node_first_ns")).alias("before_node_started"),
        F.timestamp_micros(F.floor(F.col("apply_ns") / 1000).cast("long")).alias("apply_time"),
    )


def propagation_by_node(propagation: DataFrame, accuracy: int) -> DataFrame:
    """Per node, the distribution of its propagation times: epochs measured from a commit made
    while the node ran (``before_node_started`` ones measure its start, not the log's spread)."""
    measured = propagation.where((F.col("reference") == "commit") & ~F.col("before_node_started"))
    return measured.groupBy("node", "service").agg(
        *percentiles("propagation_ms", accuracy),
        F.min("epoch").alias("first_epoch"),
        F.max("epoch").alias("last_epoch"),
    )


def longest_behind(propagation: DataFrame, epochs: int) -> DataFrame:
    """Per node, the longest time it was more than ``epochs`` epochs behind the leader: epoch
    ``e + epochs + 1`` committed at the leader while the node had not applied ``e``. One row
    per node (``behind_s``: 0 when it never was)."""
    commits = (
        propagation.where(F.col("reference") == "commit")
        .select((F.col("epoch") - epochs - 1).alias("epoch"), F.col("commit_ns").alias("ahead_ns"))
        .distinct()
    )
    gaps = propagation.join(commits, "epoch").select(
        "node", F.greatest(F.lit(0.0), (F.col("apply_ns") - F.col("ahead_ns")) / 1e9).alias("s")
    )
    nodes = propagation.select("node").distinct()
    longest = gaps.groupBy("node").agg(F.max("s").alias("behind_s"))
    return nodes.join(longest, "node", "left").fillna({"behind_s": 0.0})


def reconciliation_lag(spans: DataFrame) -> DataFrame:
    """One row per reconciliation round: its range, outcome, what it delivered, and the lag."""
    rounds = spans.where(F.col("name") == attr.RECONCILE_ROUND).select(
        "keyspace",
        "range",
        "end_ns",
        F.timestamp_micros(F.floor(F.col("end_ns") / 1000).cast("long")).alias("time"),
        "outcome",
        "delivered",
        "delivered_bytes",
        "collected",
        "node",
        F.when(F.col("reconciliation_time") > 0, F.col("reconciliation_time")).alias("reached"),
    )
    so_far = (
        Window.partitionBy("keyspace", "range")
        .orderBy("end_ns")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    bound_ms = F.max(F.shiftright("reached", LOGICAL_BITS)).over(so_far)
    return (
        rounds.withColumn("low_bound_ms", bound_ms)
        .withColumn("lag_s", (F.col("end_ns") / 1e6 - F.col("low_bound_ms")) / 1e3)
        .drop("reached")
    )


def reconciliation_lag_by_range(lag: DataFrame, accuracy: int) -> DataFrame:
    """Per keyspace and range: rounds (``count``) and those that advanced, the lag's
    distribution, the last lag."""
    last = Window.partitionBy("keyspace", "range").orderBy(F.col("end_ns").desc())
    latest = (
        lag.withColumn("_n", F.row_number().over(last))
        .where("_n = 1")
        .select("keyspace", "range", F.col("lag_s").alias("last_lag_s"))
    )
    summary = lag.groupBy("keyspace", "range").agg(
        *percentiles("lag_s", accuracy, suffix="_s"),
        F.sum(F.when(F.col("outcome") == ADVANCED, 1).otherwise(0)).alias("rounds_advanced"),
        F.sum("delivered").alias("delivered"),
    )
    return summary.join(latest, ["keyspace", "range"], "left")
