"""The reconciler's parts without servers: its settings (flags, environment, checks), the delivery
pacer (a token bucket with back-off), which ranges it works (every range of every tracked
keyspace, with its read and write groups), and its state across a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from epochal.reconciler import pacing
from epochal.reconciler.pacing import MIN_SHARE, Pacer
from epochal.reconciler.settings import settings_from
from epochal.reconciler.storage import RangeRecord, ReconcilerStorage, RoundRecord
from epochal.reconciler.worker import targets
from epochal.tcm import CreateKeyspace, ReplicationParams, ReplicationType, Step
from epochal.tcm.tokens import TokenRange

from .seed_ring import Cluster

BASE = ["--listen", "127.0.0.1:9101", "--cms", "127.0.0.1:7001"]


def test_settings_come_from_flags_then_the_environment_then_defaults() -> None:
    settings = settings_from(
        [*BASE, "--interval-ms", "250"],
        {"EPOCHAL_RECONCILER_INTERVAL_MS": "900", "EPOCHAL_RECONCILER_LEASE_MS": "4000"},
    )
    assert settings.interval_ms == 250 and settings.lease_ms == 4000
    assert settings.slack_ms == 5_000  # the replicas' default --max-skew-ms
    assert settings.db_url.endswith("var/reconciler-9101/reconciler.db")
    assert settings.address == "127.0.0.1:9101"  # --advertise defaults to --listen
    advertised = settings_from(BASE, {"EPOCHAL_RECONCILER_ADVERTISE": "rec-1.example:9101"})
    assert advertised.address == "rec-1.example:9101"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ([], "--listen"),
        (["--listen", "127.0.0.1:1"], "--cms"),
        ([*BASE, "--lease-ms", "1000", "--lease-margin-ms", "1000"], "below --lease-ms"),
        (
            [*BASE, "--state-timeout-ms", "2000"],
            r"--state-timeout-ms \(2000\) must be below --lease-margin-ms \(2000\)",
        ),
        (
            [*BASE, "--lease-ms", "3000", "--lease-margin-ms", "2000"],
            r"--state-timeout-ms \(1000\) plus --lease-margin-ms \(2000\) must be below "
            r"--lease-ms \(3000\)",
        ),
        ([*BASE, "--state-timeout-ms", "-1"], "--state-timeout-ms must be >= 0"),
        ([*BASE, "--lease-margin-ms", "1"], r"--lease-margin-ms \(1\) leaves no time"),
        ([*BASE, "--batch", "0"], "--batch must be > 0"),
        ([*BASE, "--max-ranges", "-1"], "--max-ranges must be >= 0"),
        ([*BASE, "--window-ids", "0"], "--window-ids must be > 0"),
        ([*BASE, "--window-ids", "1000001"], "--window-ids must be at most 1000000"),
        ([*BASE, "--cms", "nowhere"], "expected host:port"),
        ([*BASE, "--advertise", "nowhere"], "bad --advertise address"),
        ([*BASE, "--advertise", "a:1,b:2"], "--advertise is one host:port"),
    ],
)
def test_settings_that_make_no_sense_are_refused(args: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        settings_from(args, {})


def test_the_state_calls_deadline_fits_in_the_lease_margin() -> None:
    """The defaults work together: a round that waited its whole state deadline on a replica
    that does not answer still holds its lease, with time left to act; a test's own short
    lease and margin get a deadline to match."""
    defaults = settings_from(BASE, {})
    assert (defaults.rpc_timeout_ms, defaults.lease_ms, defaults.lease_margin_ms) == (
        10_000,
        10_000,
        2_000,
    )
    assert defaults.state_timeout_s == 1.0  # half the margin
    short = settings_from([*BASE, "--lease-ms", "2000", "--lease-margin-ms", "500"], {})
    assert short.state_timeout_s == 0.25
    chosen = settings_from(BASE, {"EPOCHAL_RECONCILER_STATE_TIMEOUT_MS": "1500"})
    assert chosen.state_timeout_s == 1.5


def test_the_pacer_waits_for_what_the_bucket_lacks_and_backs_off(monkeypatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(pacing.asyncio, "sleep", sleep)

    async def scenario() -> None:
        pacer = Pacer(1_000)
        await pacer.take(1_000)  # the bucket starts full: a second's worth goes at once
        assert slept == []
        await pacer.take(500)  # (no time passed) half a second's worth lacking
        assert slept and 0.4 < slept[-1] <= 0.5
        for _ in range(10):
            pacer.back_off()
        assert pacer.share == MIN_SHARE
        pacer.recovered()
        assert pacer.current_rate == pytest.approx(1_000 * (MIN_SHARE + 0.1))

    asyncio.run(scenario())
    with pytest.raises(ValueError):
        Pacer(0)


def test_targets_are_every_range_of_tracked_keyspaces_with_pending_replicas() -> None:
    made = Cluster({})
    made.apply(
        CreateKeyspace(
            name="tk",
            replication=ReplicationParams.simple(2),
            replication_type=ReplicationType.TRACKED,
        ),
        CreateKeyspace(name="plain", replication=ReplicationParams.simple(2)),
    )
    made.join("A", 100)
    made.join("B", 200)
    made.join("C", 300, steps=(Step.START,))  # joining: a pending (write) replica
    found = targets(made.md)
    assert {t.keyspace for t in found} == {"tk"}
    by_range = {t.range: set(t.replicas) for t in found}
    assert TokenRange(200, 300) in by_range
    assert made.ids["C"] in by_range[TokenRange(200, 300)]  # pending: fenced and delivered to
    assert all(
        address.startswith("127.") or address for t in found for address in t.replicas.values()
    )


def test_a_restart_reads_its_id_its_ranges_and_its_rounds_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/reconciler.db"
    storage = ReconcilerStorage(url)
    chosen = storage.reconciler_id("")
    assert chosen.startswith("reconciler-")
    where = RangeRecord("tk", TokenRange(1, 2), 7, 123, 1, 5, "advanced", 1_000)
    storage.record_round(
        RoundRecord("tk", TokenRange(1, 2), 7, 900, 1_000, 990, 123, 5, "advanced"), where
    )
    storage.close()
    reopened = ReconcilerStorage(url)
    try:
        assert reopened.reconciler_id("") == chosen
        with pytest.raises(ValueError, match="belongs to reconciler"):
            reopened.reconciler_id("someone-else")
        assert reopened.ranges() == [where]
        assert [r.outcome for r in reopened.rounds()] == ["advanced"]
    finally:
        reopened.close()
