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
says which: ``commit`` or ``first_apply``). Nodes are replicas and reconcilers (the processes
that follow the log); CMS members write no ``epoch.apply``. Everything is per run (the folder of
the span files: epoch numbers start again in a new cluster).

**Reconciliation lag.** A ``reconciler.round`` that advanced its range's low bound reports the
HLC time up to which the range agrees (``epochal.reconciliation_time``); the lag at a round's
end is that end less the newest such time reached so far for the range — the definition of the
reconciler's ``epochal_reconcile_lag_seconds`` — so rounds that advance nothing (they failed,
were superseded, or only delivered) let the lag grow.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from epochal.analytics.latency import percentiles
from epochal.analytics.spans import attribute
from epochal.mtrack.hlc import LOGICAL_BITS
from epochal.telemetry import attributes as attr


def _instant(ns: Column) -> Column:
    return F.timestamp_micros(F.floor(ns / 1000).cast("long"))


def epoch_commits(spans: DataFrame) -> DataFrame:
    """Per run and epoch, the first moment a CMS member is known to have learnt it chosen
    (``commit_ns``), and its transformation."""
    epoch, outcome = attribute(attr.EPOCH), attribute(attr.OUTCOME)
    chosen = F.filter("events", lambda e: e["name"] == attr.PHASE_ACCEPTED)
    forwarded = attribute(attr.FORWARDED) & outcome.isin(attr.COMMITTED, attr.DUPLICATE_COMMIT)
    learnt = F.when(F.size(chosen) > 0, chosen[0]["time_ns"]).when(forwarded, F.col("end_ns"))
    return (
        spans.where((F.col("name") == attr.CMS_COMMIT) & (epoch > 0))
        .select(
            "run",
            epoch.alias("epoch"),
            attribute(attr.TRANSFORMATION).alias("kind"),
            learnt.alias("at"),
        )
        .where(F.col("at").isNotNull())
        .groupBy("run", "epoch")
        .agg(
            F.min("at").alias("commit_ns"),
            F.first("kind", ignorenulls=True).alias("transformation"),
        )
    )


def epoch_propagation(spans: DataFrame) -> DataFrame:
    """Per run, epoch and node that applied it: commit time, apply time, propagation."""
    epoch = attribute(attr.EPOCH)
    applies = (
        spans.where((F.col("name") == attr.EPOCH_APPLY) & epoch.isNotNull())
        .groupBy("run", epoch.alias("epoch"), "node")
        .agg(F.min("start_ns").alias("apply_ns"), F.first("service").alias("service"))
    )
    first = Window.partitionBy("run", "epoch")
    joined = applies.join(epoch_commits(spans), ["run", "epoch"], "left").withColumn(
        "first_apply_ns", F.min("apply_ns").over(first)
    )
    joined = joined.join(F.broadcast(node_spans(spans)), ["run", "node"], "left")
    reference = F.coalesce("commit_ns", "first_apply_ns")
    return joined.select(
        "run",
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
        # committed before the node's first span: it was not running yet (it started or joined
        # later), so the time includes its start
        (reference < F.col("first_ns")).alias("before_node_started"),
        _instant(F.col("apply_ns")).alias("apply_time"),
    )


def node_spans(spans: DataFrame) -> DataFrame:
    """Per run and node: its first and last span's start (when it is known to have run)."""
    return spans.groupBy("run", "node").agg(
        F.min("start_ns").alias("first_ns"), F.max("start_ns").alias("last_ns")
    )


def propagation_by_node(propagation: DataFrame, accuracy: int) -> DataFrame:
    """Per run and node, the distribution of its propagation times: epochs measured from a
    commit made while the node ran (``before_node_started`` ones measure its start)."""
    measured = propagation.where((F.col("reference") == "commit") & ~F.col("before_node_started"))
    return measured.groupBy("run", "node", "service").agg(
        *percentiles("propagation_ms", accuracy),
        F.min("epoch").alias("first_epoch"),
        F.max("epoch").alias("last_epoch"),
    )


def longest_behind(spans: DataFrame, propagation: DataFrame, epochs: int) -> DataFrame:
    """Per run and node, the longest it was more than ``epochs`` epochs behind the leader, while
    it ran. Until it applies ``e`` a node is at ``e - 1`` at most, so once the leader has
    committed ``e + epochs`` it is more than ``epochs`` behind: from that commit to its apply of
    ``e`` — or, for an epoch it never applied, from that commit (or its first span, if later) to
    its last span. One row per node that applied an epoch (``behind_s``: 0 when it never was
    behind; a node that applied none is not in it)."""
    ahead = epoch_commits(spans).select(  # every epoch committed, applied anywhere or not
        "run", (F.col("epoch") - epochs).alias("epoch"), F.col("commit_ns").alias("ahead_ns")
    )
    ran = propagation.where(~F.col("before_node_started"))
    applied = ran.join(ahead, ["run", "epoch"]).select(
        "run", "node", ((F.col("apply_ns") - F.col("ahead_ns")) / 1e9).alias("s")
    )
    nodes = node_spans(spans).join(
        propagation.groupBy("run", "node").agg(F.max("epoch").alias("last_epoch")),
        ["run", "node"],
    )
    stuck = (
        nodes.join(ahead, ["run"])
        .where(F.col("epoch") > F.col("last_epoch"))
        .select(
            "run",
            "node",
            ((F.col("last_ns") - F.greatest("ahead_ns", "first_ns")) / 1e9).alias("s"),
        )
    )  # epochs committed far ahead of the last it applied, while it ran
    longest = (
        applied.unionByName(stuck)
        .groupBy("run", "node")
        .agg(F.greatest(F.max("s"), F.lit(0.0)).alias("behind_s"))
    )
    return (
        nodes.select("run", "node").join(longest, ["run", "node"], "left").fillna({"behind_s": 0.0})
    )


def reconciliation_lag(spans: DataFrame) -> DataFrame:
    """One row per reconciliation round: its range, outcome, what it delivered, and the lag."""
    outcome = attribute(attr.OUTCOME)
    advanced = outcome == attr.ROUND_ADVANCED
    reached = attribute(attr.RECONCILIATION_TIME)
    rounds = spans.where(F.col("name") == attr.RECONCILE_ROUND).select(
        "run",
        attribute(attr.KEYSPACE).alias("keyspace"),
        attribute(attr.RANGE).alias("range"),
        "end_ns",
        "span_id",
        _instant(F.col("end_ns")).alias("time"),
        outcome.alias("outcome"),
        attribute(attr.DELIVERED).alias("delivered"),
        attribute(attr.DELIVERED_BYTES).alias("delivered_bytes"),
        attribute(attr.COLLECTED).alias("collected"),
        "node",
        F.when(advanced & (reached > 0), reached).alias("reached"),
    )
    so_far = (
        Window.partitionBy("run", "keyspace", "range")
        .orderBy("end_ns", "span_id")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    bound_ms = F.max(F.shiftright("reached", LOGICAL_BITS)).over(so_far)
    return (
        rounds.withColumn("low_bound_ms", bound_ms)
        .withColumn("lag_s", (F.col("end_ns") / 1e6 - F.col("low_bound_ms")) / 1e3)
        .drop("reached")
    )


def reconciliation_lag_by_range(lag: DataFrame, accuracy: int) -> DataFrame:
    """Per run, keyspace and range: its rounds, those that advanced, the lag's distribution
    (``count``: rounds since the first bound; a range that never advanced has none), the last
    lag."""
    keys = ["run", "keyspace", "range"]
    last = Window.partitionBy(*keys).orderBy(F.col("end_ns").desc(), F.col("span_id").desc())
    latest = (
        lag.withColumn("_n", F.row_number().over(last))
        .where("_n = 1")
        .select(*keys, F.col("lag_s").alias("last_lag_s"))
    )
    summary = lag.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("rounds"),
        *percentiles("lag_s", accuracy, suffix="_s"),
        F.sum(F.when(F.col("outcome") == attr.ROUND_ADVANCED, 1).otherwise(0)).alias(
            "rounds_advanced"
        ),
        F.sum("delivered").alias("delivered"),
    )
    return summary.join(latest, keys, "left")
