"""Trace analytics on Spark: the cluster's span files in, Parquet tables out.

``python -m epochal.analytics TRACE_DIR --out DIR`` (or ``make analyze TRACES=DIR``, or
``spark-submit`` with the same entry) reads the OTLP JSON span files every process writes and
writes the tables the README's "Trace analytics" section lists: the spans flattened, latency
percentiles, the CMS commit by phase, epoch propagation, reconciliation lag, the
consistency-level mix, error rates, the service dependency graph, critical paths, and seed 001's
thresholds against what was measured.
"""
