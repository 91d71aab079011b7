"""A client's TriggerSnapshot batched with other commits: every member applies the slot, takes
the snapshot at the snapshot's own epoch (the state right after it, not after the slot), and
keeps serving — also after a restart on a data directory that holds such a slot.

(Issue 28: a snapshot in the middle of a batch used to break an assertion at apply on every
member, which then crash-looped on the chosen slot and left the CMS without a quorum.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import select

from epochal.cms import tables
from epochal.cms_client import CMSClient, Committed
from epochal.cmscore.batching import proposal_item as item
from epochal.devcluster.cms import LocalCMS
from epochal.tcm import ClusterMetadata, Transformation, TriggerSnapshot
from epochal.wire.metadata import decode_metadata, decode_transformation
from epochal.wire.proposal import encode_item
from tests.harness import (
    commit_then_stop,
    converge,
    keyspace,
    local_cms,
    plant_accepted_slot,
    read_log,
    run,
    storage_of,
)

pytestmark = pytest.mark.integration

COMMITS_AT_ONCE = 16
ROUNDS = 3


def mix(round_index: int) -> list[tuple[str, Transformation]]:
    """16 commits with fresh entry ids, every other one a TriggerSnapshot."""
    return [
        (
            f"r{round_index}-{index}",
            TriggerSnapshot() if index % 2 else keyspace(f"ks_{round_index}_{index}"),
        )
        for index in range(COMMITS_AT_ONCE)
    ]


async def commit_mix_through(address: str, rounds: int) -> dict[str, Committed]:
    answers: dict[str, Committed] = {}
    async with CMSClient([address]) as client:
        for round_index in range(rounds):
            batch = mix(round_index)
            committed = await asyncio.gather(
                *(client.commit(change, entry_id=entry_id) for entry_id, change in batch)
            )
            answers.update(zip((entry_id for entry_id, _ in batch), committed, strict=True))
    return answers


def replayed_states(cms: LocalCMS, member_id: str) -> dict[int, ClusterMetadata]:
    """The member's state at every epoch, replayed from its whole log (the member stopped)."""
    states: dict[int, ClusterMetadata] = {}
    metadata = ClusterMetadata.empty()
    for row in read_log(cms, member_id):
        metadata = decode_transformation(row.transformation).execute(metadata)
        assert metadata.epoch == row.epoch, (member_id, metadata.epoch, row.epoch)
        states[row.epoch] = metadata
    return states


def snapshots_of(cms: LocalCMS, member_id: str) -> dict[int, ClusterMetadata]:
    storage = storage_of(cms, member_id)
    try:
        with storage.engine.connect() as conn:
            rows = conn.execute(select(tables.snapshots.c.epoch, tables.snapshots.c.metadata))
            return {epoch: decode_metadata(encoded) for epoch, encoded in rows}
    finally:
        storage.close()


def assert_snapshots_at_their_own_epochs(cms: LocalCMS, snapshot_epochs: set[int]) -> None:
    """Every member holds a snapshot at each epoch a TriggerSnapshot took, and it is exactly
    the state replayed from the log at that epoch."""
    for member_id in cms.members:
        states = replayed_states(cms, member_id)
        snapshots = snapshots_of(cms, member_id)
        assert snapshot_epochs <= set(snapshots), (
            member_id,
            sorted(snapshot_epochs - set(snapshots)),
        )
        for epoch, snapshot in snapshots.items():
            assert snapshot == states[epoch], f"{member_id}: the snapshot at epoch {epoch} differs"


@pytest.mark.parametrize("through", ["leader", "follower"])
def test_snapshots_mixed_into_ddl_batches_are_applied_at_their_epochs(
    tmp_path: Path, through: str
) -> None:
    """16 concurrent commits at a time, every other one a TriggerSnapshot, through the leader
    or through a follower (which forwards them to the leader in batches): every commit is
    answered once, every member stays up and agrees, and each snapshot holds the state at the
    epoch its own entry took."""
    with local_cms(tmp_path / "cms") as cms:

        async def scenario() -> dict[str, Committed]:
            await cms.wait_serving()
            leader = await cms.leader()
            target = leader if through == "leader" else next(m for m in cms.members if m != leader)
            answers = await commit_mix_through(cms.members[target].address, ROUNDS)
            await converge(cms)
            assert all(member.running for member in cms.members.values()), "a member exited"
            cms.stop()  # gracefully: each writes what it applied
            return answers

        answers = run(cms, scenario, 120)
        epochs = [answer.epoch for answer in answers.values()]
        assert len(set(epochs)) == len(epochs), "two commits answered with one epoch"
        snapshot_epochs = {a.epoch for e, a in answers.items() if int(e.split("-")[1]) % 2}
        assert_snapshots_at_their_own_epochs(cms, snapshot_epochs)


def test_a_member_restarted_on_a_slot_with_a_snapshot_mid_batch_applies_it(
    tmp_path: Path,
) -> None:
    """Every member's disk holds an accepted slot whose value is [TriggerSnapshot,
    CreateKeyspace] — what the leader of an earlier version could propose for a client's
    snapshot queued before another commit. Restarted, the members choose and apply it (the
    snapshot at its own epoch, the keyspace after it) and serve."""
    with local_cms(tmp_path / "cms") as cms:
        epoch = run(cms, lambda: commit_then_stop(cms, {"before": keyspace("before")}), 60)
        values = tuple(
            encode_item(item(change, entry_id))
            for entry_id, change in (
                ("client-snapshot", TriggerSnapshot()),
                ("after-snapshot", keyspace("after")),
            )
        )
        plant_accepted_slot(cms, values)

        async def restarted() -> int:
            cms.start()
            await cms.wait_serving()
            async with CMSClient(cms.addresses) as client:
                await client.commit(keyspace("later"), entry_id="later")
            final = await converge(cms)
            assert all(member.running for member in cms.members.values()), "a member exited"
            cms.stop()
            return final

        final = run(cms, restarted, 90)
        assert final == epoch + 3
        assert_snapshots_at_their_own_epochs(cms, {epoch + 1})
        kinds = [(row.epoch, row.entry_id) for row in read_log(cms, "cms1")][-3:]
        assert kinds == [
            (epoch + 1, "client-snapshot"),
            (epoch + 2, "after-snapshot"),
            (epoch + 3, "later"),
        ]
