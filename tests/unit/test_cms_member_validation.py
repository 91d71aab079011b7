"""A commit whose validation raises something that is not a refusal (a bug) is refused alone —
by the leader building a batch and by every member applying a chosen slot alike — so the
leader goes on proposing every other commit and no member stops on it
(libs/cmscore/state_machine.py ``validated_and_executed``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from epochal.cmscore.state_machine import MetadataStateMachine, ProposalItem, validated_and_executed
from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    InitializeCMS,
    TriggerSnapshot,
    apply_transformation,
)

METADATA = apply_transformation(
    ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms1", "127.0.0.1:1"),))
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Broken(TriggerSnapshot):
    kind: ClassVar[str] = "broken"

    def check(self, metadata: ClusterMetadata) -> None:
        raise ValueError("token -1 is owned by both node-1 and node-1")


def test_a_bug_in_validation_refuses_that_commit_only(caplog: pytest.LogCaptureFixture) -> None:
    item = ProposalItem(Broken(), b"", "entry-1", 0)
    refusal = validated_and_executed(item, METADATA)
    assert not isinstance(refusal, ClusterMetadata) and refusal.rule == "validation_failed"
    # The refusal names the entry; the bug's Python text is logged with its traceback only.
    assert "broken entry 'entry-1'" in refusal.message
    assert "ValueError" not in refusal.message and "owned by both" not in refusal.message
    assert caplog.records[-1].exc_info is not None and "owned by both" in caplog.text
    after = validated_and_executed(ProposalItem(TriggerSnapshot(), b"", "entry-2", 0), METADATA)
    assert isinstance(after, ClusterMetadata) and after.epoch == METADATA.epoch + 1


def test_a_chosen_slot_holding_such_a_commit_applies_the_others() -> None:
    machine = MetadataStateMachine(METADATA, 1)
    result = machine.apply_slot(
        2,
        [
            ProposalItem(Broken(), b"", "entry-1", 0),
            ProposalItem(TriggerSnapshot(), b"", "entry-2", 0),
        ],
    )
    assert [o.epoch for o in result.outcomes] == [0, 2]
    assert result.outcomes[0].rejection is not None
    assert result.outcomes[0].rejection.rule == "validation_failed"
    assert machine.epoch == 2 and machine.applied_slot == 2
