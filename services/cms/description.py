"""What Describe answers about a CMS member."""

from __future__ import annotations

from dataclasses import dataclass

from epochal.paxos import Ballot
from epochal.tcm import CMSMember


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """What Describe answers: this member's view of the CMS and its own progress."""

    member_id: str
    members: tuple[CMSMember, ...]
    leader_id: str
    epoch: int
    snapshot_epochs: tuple[int, ...]
    promised: Ballot
    applied_slot: int
    ready: bool
    snapshots_installed: int
    log_complete: bool
