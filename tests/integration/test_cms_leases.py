"""Reconciler lease grants committed through a real 3-member CMS on 127.0.0.1: a grant on a free
range commits; a contender's grant with the stale token is refused with FAILED_PRECONDITION
(rule lease_changed) naming the holder; a malformed one with INVALID_ARGUMENT; every member's
log replays to the same grants, and a snapshot a member serves carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.errors import InvalidRequest, Rejected
from epochal.tcm import (
    ClusterMetadata,
    CreateKeyspace,
    GrantReconcileLease,
    LeaseGrant,
    ReplicationParams,
    ReplicationType,
    TokenRange,
)
from epochal.wire.log import LogRecord
from tests.harness import FAST_ELECTIONS, converge, keyspace, log_entries, run

pytestmark = pytest.mark.integration

RANGE = TokenRange(0, 100)


def test_lease_grants_through_the_cms(tmp_path: Path) -> None:
    cluster = LocalCMS(tmp_path / "cms", extra_args=(*FAST_ELECTIONS, "--snapshot-frequency", "4"))

    async def scenario() -> dict[str, object]:
        cluster.start()
        await cluster.wait_serving()
        seen: dict[str, object] = {}
        async with CMSClient(cluster.addresses) as cms:
            await cms.commit(
                CreateKeyspace(
                    name="ks",
                    replication=ReplicationParams.simple(3),
                    replication_type=ReplicationType.TRACKED,
                )
            )
            first = await cms.commit(grant("r1", replaces=0))
            with pytest.raises(Rejected) as stale:
                await cms.commit(grant("r2", replaces=0))
            with pytest.raises(InvalidRequest) as malformed:
                await cms.commit(grant("r" * 300, replaces=first.epoch))
            second = await cms.commit(grant("r2", replaces=first.epoch))
            for index in range(6):  # past the snapshot frequency
                await cms.commit(keyspace(f"filler{index}"))
            seen["epochs"] = (first.epoch, second.epoch)
            seen["refusals"] = (stale.value, malformed.value)
            seen["epoch"] = await converge(cluster)
            seen["replayed"] = [
                replay(ClusterMetadata.empty(), await log_entries(cluster, member=index))
                for index in range(len(cluster.members))
            ]
            page = await cms.fetch_log(0)
            seen["snapshot"] = page.snapshot
        return seen

    seen = run(cluster, scenario, 120)
    first_epoch, second_epoch = seen["epochs"]  # type: ignore[misc]
    stale, malformed = seen["refusals"]  # type: ignore[misc]
    assert stale.status == "FAILED_PRECONDITION" and stale.rule == "lease_changed"
    assert f"held by 'r1' under token {first_epoch}" in str(stale)
    assert malformed.status == "INVALID_ARGUMENT" and malformed.rule == "bad_lease"
    replayed: list[ClusterMetadata] = seen["replayed"]  # type: ignore[assignment]
    assert all(md == replayed[0] for md in replayed) and replayed[0].epoch == seen["epoch"]
    assert replayed[0].reconcile_leases == (LeaseGrant("ks", RANGE, "r2", second_epoch),)
    snapshot = seen["snapshot"]
    assert isinstance(snapshot, ClusterMetadata) and snapshot.epoch > second_epoch
    assert snapshot.reconcile_leases == replayed[0].reconcile_leases


def grant(holder: str, *, replaces: int) -> GrantReconcileLease:
    return GrantReconcileLease(keyspace="ks", range=RANGE, holder=holder, replaces=replaces)


def replay(metadata: ClusterMetadata, records: list[LogRecord]) -> ClusterMetadata:
    for record in records:
        assert record.transformation is not None, record.problem
        metadata = record.transformation.execute(metadata)
        assert metadata.epoch == record.epoch
    return metadata
