"""The CMS state machine: epochs from chosen slots, at-most-once at apply, forgetting by epoch."""

from __future__ import annotations

from epochal.cmscore.batching import proposal_item as item
from epochal.cmscore.state_machine import MetadataStateMachine, ProposalItem
from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    InitializeCMS,
    ReplicationParams,
    TriggerSnapshot,
)

INIT = item(InitializeCMS(members=(CMSMember("cms1", "127.0.0.1:1"),)), "init")
KEYSPACE = item(CreateKeyspace(name="ks", replication=ReplicationParams.simple(1)), "ks")


def table(name: str, entry_id: str) -> ProposalItem:
    return item(
        CreateTable(
            keyspace="ks",
            name=name,
            columns=(Column("id", ColumnType.TEXT),),
            partition_key=("id",),
        ),
        entry_id,
    )


def test_each_applied_transformation_takes_the_next_epoch_and_noops_take_none() -> None:
    machine = MetadataStateMachine(ClusterMetadata.empty(), 0)
    first = machine.apply_slot(1, [INIT, KEYSPACE])
    assert [o.epoch for o in first.outcomes] == [1, 2]
    assert machine.apply_slot(2, []).entries == ()  # a no-op slot
    third = machine.apply_slot(3, [table("t", "a")])
    assert [e.epoch for e in third.entries] == [3]
    assert machine.epoch == 3 and machine.applied_slot == 3


def test_a_reproposal_and_a_retry_of_one_entry_id_commit_once() -> None:
    machine = MetadataStateMachine(ClusterMetadata.empty(), 0)
    machine.apply_slot(1, [INIT, KEYSPACE])
    # The old leader's value re-proposed in slot 2, the client's retry in slot 3.
    machine.apply_slot(2, [table("t", "retry-me")])
    retry = machine.apply_slot(3, [table("t", "retry-me")])
    (outcome,) = retry.outcomes
    assert outcome.duplicate and outcome.epoch == 3
    assert retry.entries == ()
    assert machine.epoch == 3


def test_an_entry_id_reused_for_another_transformation_is_a_noop_naming_the_first_epoch() -> None:
    machine = MetadataStateMachine(ClusterMetadata.empty(), 0)
    machine.apply_slot(1, [INIT, KEYSPACE, table("t", "same")])
    (outcome,) = machine.apply_slot(2, [table("other", "same")]).outcomes
    assert outcome.reused_id_of_epoch == 3 and not outcome.committed
    assert machine.epoch == 3


def test_an_item_that_no_longer_validates_is_a_noop_with_its_rejection() -> None:
    machine = MetadataStateMachine(ClusterMetadata.empty(), 0)
    result = machine.apply_slot(1, [INIT, KEYSPACE, table("t", "a"), table("t", "b")])
    assert [o.epoch for o in result.outcomes] == [1, 2, 3, 0]
    assert result.outcomes[3].rejection.rule == "table_exists"


def test_snapshots_are_reported_and_old_ids_forgotten_by_epoch_alone() -> None:
    machine = MetadataStateMachine(ClusterMetadata.empty(), 0, retention_epochs=2)
    machine.apply_slot(1, [INIT, KEYSPACE])
    result = machine.apply_slot(2, [table("t", "a"), item(TriggerSnapshot(), "snap")])
    assert [epoch for epoch, _ in result.snapshots] == [4]
    assert result.forget_ids_below_epoch == 3
    assert machine.lookup("init") is None and machine.lookup("ks") is None
    assert machine.lookup("a") == (3, table("t", "a").digest)


def test_the_leaders_validated_batch_applies_exactly_like_a_decoded_one() -> None:
    batch = [table("a", "e1"), table("b", "e2"), item(TriggerSnapshot(), "snap")]
    decoded = MetadataStateMachine(ClusterMetadata.empty(), 0, retention_epochs=3)
    validated = MetadataStateMachine(ClusterMetadata.empty(), 0, retention_epochs=3)
    for machine in (decoded, validated):
        machine.apply_slot(1, [INIT, KEYSPACE])
    states = [validated.metadata]
    for proposal in batch:
        states.append(proposal.transformation.execute(states[-1]))
    assert validated.apply_validated(2, batch, states[1:]) == decoded.apply_slot(2, batch)
    assert validated.metadata == decoded.metadata
    assert validated.entry_ids() == decoded.entry_ids()


def test_a_snapshot_in_the_middle_of_a_slot_is_the_state_at_its_own_epoch() -> None:
    """A client's TriggerSnapshot batched before other commits: its snapshot holds the state
    right after it (epoch 3: the keyspace, no table), not the state after the slot — on the
    path of a decoded slot and on the leader's own, alike."""
    batch = [item(TriggerSnapshot(), "snap"), table("a", "e1"), table("b", "e2")]
    decoded = MetadataStateMachine(ClusterMetadata.empty(), 0)
    validated = MetadataStateMachine(ClusterMetadata.empty(), 0)
    for machine in (decoded, validated):
        machine.apply_slot(1, [INIT, KEYSPACE])
    states = [validated.metadata]
    for proposal in batch:
        states.append(proposal.transformation.execute(states[-1]))
    from_decoded = decoded.apply_slot(2, batch)
    assert validated.apply_validated(2, batch, states[1:]) == from_decoded
    ((epoch, snapshot),) = from_decoded.snapshots
    assert epoch == 3 and snapshot == states[1]
    assert snapshot.epoch == 3 and not snapshot.keyspaces["ks"].tables
    assert decoded.epoch == 5 and decoded.metadata == validated.metadata
