"""A commit whose validation raises something that is not a refusal (a bug) is refused alone:
the CMS leader goes on proposing every other commit (services/cms/member.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from epochal.cms.member import _validated
from epochal.cms.state_machine import ProposalItem
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


def test_a_bug_in_validation_refuses_that_commit_only() -> None:
    item = ProposalItem(Broken(), b"", "entry-1", 0)
    refusal = _validated(item, METADATA)
    assert refusal is not None and refusal.rule == "validation_failed"
    assert "ValueError: token -1 is owned by both" in refusal.message
    assert _validated(ProposalItem(TriggerSnapshot(), b"", "entry-2", 0), METADATA) is None
