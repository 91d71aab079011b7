"""Claims of the reconciliation benchmark's model (bench/_reconcile_model.py), at small n: the
summaries grow with the difference and not with the ids held, the Merkle model grows with the
difference and dwarfs them, the ids look like real ones, and a wrong difference fails the run."""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import pytest

from epochal.mtrack import Difference, MutationId

# bench/reconcile.py finds the model beside it; a test finds it the same way.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import _reconcile_model as model

N = 2000
TRIALS = 5
SEED = 7
WORKLOAD = model.Workload()


def summary(n: int, d: int) -> int:
    return model.summary_bytes(n, d, trials=TRIALS, seed=SEED)


def merkle(d: int, workload: model.Workload = WORKLOAD) -> int:
    return model.merkle_repair_bytes(N, d, trials=TRIALS, seed=SEED, workload=workload)


def test_summary_bytes_do_not_grow_with_the_ids_held() -> None:
    for d in (0, 10, 100):
        small, large = summary(N, d), summary(4 * N, d)
        assert abs(large - small) <= small // 10, (d, small, large)


def test_summary_bytes_grow_with_the_difference_and_meet_the_target_at_d10() -> None:
    without, few, many = summary(N, 0), summary(N, 10), summary(N, 100)
    assert without < few < many
    assert few <= 4096


def test_merkle_repair_grows_with_the_difference_and_dwarfs_the_summaries() -> None:
    without, few, many = merkle(0), merkle(10), merkle(100)
    assert without < few < many
    assert few > 100 * summary(N, 10)


def test_a_fixed_partition_size_streams_whole_partitions() -> None:
    assert merkle(10, model.Workload(partition_bytes=100_000)) > merkle(10) + 10 * 50_000


def test_ids_come_from_three_coordinators_one_log_each_like_real_ones() -> None:
    ids = model.replica_ids(N, SEED)
    assert len(set(ids)) == N
    by_log: dict[tuple[int, int], list[MutationId]] = {}
    for mutation_id in ids:
        by_log.setdefault(mutation_id.log_key, []).append(mutation_id)
    assert sorted(by_log) == [(1, 1), (2, 1), (3, 1)]
    for log in by_log.values():
        assert [i.sequence for i in log] == list(range(1, len(log) + 1))
        assert all(a.hlc < b.hlc for a, b in pairwise(log))


def test_check_difference_accepts_only_the_missing_ids_on_a() -> None:
    ids = model.replica_ids(50, SEED)
    missing = ids[:3]
    model.check_difference(Difference(only_a=frozenset(missing)), missing)
    wrong = (
        Difference(only_a=frozenset(missing[:2])),  # one missing id not found
        Difference(only_a=frozenset(ids[:4])),  # one id found that B holds
        Difference(only_a=frozenset(missing), only_b=frozenset(ids[3:4])),  # B holds more
    )
    for found in wrong:
        with pytest.raises(AssertionError, match="wrong difference"):
            model.check_difference(found, missing)


def test_a_benchmark_that_finds_a_wrong_difference_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "reconcile", lambda ids_a, ids_b: (Difference(), 100, 1))
    with pytest.raises(AssertionError, match="wrong difference") as failure:
        summary(N, 10)
    assert any("replay: summary_bytes(2000, 10" in note for note in failure.value.__notes__)


def test_a_full_run_refuses_fewer_trials_than_the_issue_asks() -> None:
    with pytest.raises(ValueError, match="full run"):
        model.model_figures(quick=False, trials=model.MIN_FULL_TRIALS - 1)
    with pytest.raises(ValueError):
        model.summary_bytes(10, 11, trials=1, seed=SEED)
