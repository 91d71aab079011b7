"""Metric names keep Prometheus' conventions (checked when a metric is made), every process's
metrics are named and bucketed for the seed's thresholds, and every transformation has a
metrics group."""

from __future__ import annotations

import pytest

from epochal.cms.metrics import CMSMetrics, outcome_of
from epochal.errors import InvalidRequest, Overloaded, Rejected
from epochal.reconciler.metrics import ReconcilerMetrics
from epochal.replica.metrics import ReplicaMetrics
from epochal.tcm.groups import GROUPS, KIND_GROUPS, group_of
from epochal.telemetry.metrics import Metrics, check_name
from epochal.wire.metadata import _CODECS


@pytest.mark.parametrize(
    ("name", "kind", "problem"),
    [
        ("current_epoch", "gauge", "names are epochal_"),
        ("epochal_Epoch", "gauge", "names are epochal_"),
        ("epochal_lag_ms", "gauge", "base units"),
        ("epochal_commits", "counter", "must end in _total"),
        ("epochal_epoch_total", "gauge", "must not end in _total"),
        ("epochal_commit_latency", "histogram", "must end in its unit"),
    ],
)
def test_a_name_that_breaks_the_conventions_is_refused(name: str, kind: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_name(name, kind)


def test_every_process_names_its_metrics_and_buckets_latencies_to_a_minute() -> None:
    for metrics in (CMSMetrics().metrics, ReplicaMetrics().metrics, ReconcilerMetrics().metrics):
        families = list(metrics.registry.collect())
        assert families
        for family in families:
            assert family.name.startswith("epochal_"), family.name
            if family.type == "histogram":
                bounds = [
                    float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")
                ]
                finite = [b for b in bounds if b != float("inf")]
                if family.name.endswith("_seconds") and finite:
                    assert max(finite) >= 60.0, family.name
                    assert {2.0, 5.0, 10.0, 30.0} <= set(finite), family.name  # the thresholds


def test_labelled_series_of_the_seeds_metrics_exist_before_their_first_event() -> None:
    cms = CMSMetrics().metrics.snapshot()
    for outcome in ("success", "rejection", "failure"):
        for group in GROUPS:
            key = f'epochal_cms_commit_latency_seconds_count{{kind="{group}",outcome="{outcome}"}}'
            assert cms[key] == 0, key
    replica = ReplicaMetrics().metrics.snapshot()
    assert replica['epochal_fetch_log_entries_total{source="cms"}'] == 0
    assert replica['epochal_cms_client_commit_retries_total{kind="registration"}'] == 0
    relaxed = 'epochal_progress_barrier_relaxations_total{level="EACH_QUORUM",to="QUORUM"}'
    assert replica[relaxed] == 0
    assert replica['epochal_progress_barriers_total{level="QUORUM",verdict="passed"}'] == 0


def test_every_transformation_kind_has_a_metrics_group() -> None:
    assert set(_CODECS) == set(KIND_GROUPS)
    assert all(group_of(kind) in GROUPS for kind in _CODECS)
    assert group_of("from_a_newer_version") == "other"


def test_a_commit_outcome_is_success_rejection_or_failure() -> None:
    assert outcome_of(None) == "success"
    assert outcome_of(Rejected("conflicts", "it conflicts")) == "rejection"
    assert outcome_of(InvalidRequest("malformed")) == "rejection"
    assert outcome_of(Overloaded("busy")) == "failure"


def test_two_processes_in_one_interpreter_keep_their_metrics_apart() -> None:
    one, other = Metrics(), Metrics()
    one.counter("epochal_things_total", "things").inc()
    other.counter("epochal_things_total", "things")
    assert one.snapshot()["epochal_things_total"] == 1
    assert other.snapshot()["epochal_things_total"] == 0
