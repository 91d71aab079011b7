"""CMS membership as metadata: candidates, the two-step add, removal, and the voter target. Pure.

Theory of operation
-------------------
The members of the CMS and their roles are part of ``ClusterMetadata`` (``cms_members``), so the
log itself says who votes on which slot (DESIGN.md "Membership"; seed 000, "CMS Reconfiguration
Protocol"). A CMS instance registers as a candidate (LEARNER: it follows the log). Adding a voter
takes two transformations, one epoch each, like the two steps of the seed:

    AddCMSCandidate(m)   -            -> LEARNER
    StartAddToCMS(m)     LEARNER      -> JOINING   (write set: the log is streamed to it)
    FinishAddToCMS(m)    JOINING      -> VOTER     (read set: it votes in both Paxos phases)
    RemoveFromCMS(m)     VOTER        -> LEARNER   (stops voting, keeps following)
                         JOINING      -> LEARNER   (cancels an add in progress)

Only one member changes at a time: while a member is JOINING, nothing but its FINISH or its
cancel is accepted, so the voter set changes by one member per epoch and any majority of one
voter set meets any majority of the next. The shell makes a change applied at Paxos slot s
govern slots from s + α (see ``epochal.paxos.membership``), and commits FINISH only once the new
member holds the log up to its START (a new voter has the log before it votes). A reconfiguration
in progress is metadata, so it resumes after a restart: ``next_reconfiguration`` finishes it.

The voter target follows the seed's scale: 1 voter up to 2 nodes, 3 up to 5, 5 up to 100, and
beyond that 9 — the seed says 10, but an even count tolerates no more failures than the odd one
below it while adding a vote to every quorum. Candidates beyond the target stay learners, ready
to be promoted when a voter goes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.metadata import ClusterMetadata, CMSMember, CMSRole
from epochal.tcm.transformations import Transformation

MAX_CMS_MEMBERS = 64

# (cluster size up to, voters); beyond the last row, LARGE_CLUSTER_VOTERS.
_VOTER_TARGETS = ((2, 1), (5, 3), (100, 5))
LARGE_CLUSTER_VOTERS = 9


def target_voters(cluster_size: int) -> int:
    """How many CMS voters a cluster of ``cluster_size`` nodes should have."""
    if cluster_size < 0:
        raise ValueError(f"cluster size must be >= 0, got {cluster_size}")
    for up_to, voters in _VOTER_TARGETS:
        if cluster_size <= up_to:
            return voters
    return LARGE_CLUSTER_VOTERS


def _member(metadata: ClusterMetadata, member_id: str) -> CMSMember:
    member = metadata.cms_member(member_id)
    if member is None:
        raise Rejected("cms_member_not_found", f"no CMS member {member_id!r} is registered")
    return member


def _check_role(member: CMSMember, expected: tuple[CMSRole, ...], action: str) -> None:
    if member.role not in expected:
        wanted = " or ".join(r.value for r in expected)
        raise Rejected(
            "cms_wrong_role",
            f"cannot {action} CMS member {member.member_id}: it is a {member.role.value}, "
            f"not a {wanted}",
        )


def _check_no_other_change(metadata: ClusterMetadata, member_id: str) -> None:
    joining = sorted(metadata.cms_with_role(CMSRole.JOINING) - {member_id})
    if joining:
        raise Rejected(
            "cms_reconfiguration_in_progress",
            f"CMS member {joining[0]} is being added; finish or cancel that first "
            "(the voters change one member at a time)",
        )


def _with_role(metadata: ClusterMetadata, member_id: str, role: CMSRole) -> ClusterMetadata:
    members = tuple(
        replace(m, role=role) if m.member_id == member_id else m for m in metadata.cms_members
    )
    return replace(metadata, cms_members=members)


@dataclass(frozen=True, slots=True)
class AddCMSCandidate(Transformation):
    member_id: str
    address: str
    kind: ClassVar[str] = "add_cms_candidate"

    def check(self, metadata: ClusterMetadata) -> None:
        if not self.member_id or not self.address:
            raise Rejected("bad_members", "a CMS candidate needs a member id and an address")
        existing = metadata.cms_member(self.member_id)
        if existing is not None:
            raise Rejected(
                "cms_member_exists",
                f"CMS member {self.member_id} is already registered ({existing.role.value}, "
                f"{existing.address})",
            )
        clash = next((m for m in metadata.cms_members if m.address == self.address), None)
        if clash is not None:
            raise Rejected(
                "cms_address_taken", f"address {self.address} belongs to {clash.member_id}"
            )
        if len(metadata.cms_members) >= MAX_CMS_MEMBERS:
            raise Rejected("too_many_cms_members", f"at most {MAX_CMS_MEMBERS} CMS members")

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        member = CMSMember(self.member_id, self.address, CMSRole.LEARNER)
        members = tuple(sorted((*metadata.cms_members, member), key=lambda m: m.member_id))
        return replace(metadata, cms_members=members)

    def __str__(self) -> str:
        return f"AddCMSCandidate({self.member_id} at {self.address})"


@dataclass(frozen=True, slots=True)
class StartAddToCMS(Transformation):
    member_id: str
    kind: ClassVar[str] = "start_add_to_cms"

    def check(self, metadata: ClusterMetadata) -> None:
        _check_role(_member(metadata, self.member_id), (CMSRole.LEARNER,), "start adding")
        _check_no_other_change(metadata, self.member_id)

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        return _with_role(metadata, self.member_id, CMSRole.JOINING)

    def __str__(self) -> str:
        return f"StartAddToCMS({self.member_id})"


@dataclass(frozen=True, slots=True)
class FinishAddToCMS(Transformation):
    member_id: str
    kind: ClassVar[str] = "finish_add_to_cms"

    def check(self, metadata: ClusterMetadata) -> None:
        _check_role(_member(metadata, self.member_id), (CMSRole.JOINING,), "finish adding")

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        return _with_role(metadata, self.member_id, CMSRole.VOTER)

    def __str__(self) -> str:
        return f"FinishAddToCMS({self.member_id})"


@dataclass(frozen=True, slots=True)
class RemoveFromCMS(Transformation):
    member_id: str
    kind: ClassVar[str] = "remove_from_cms"

    def check(self, metadata: ClusterMetadata) -> None:
        member = _member(metadata, self.member_id)
        _check_role(member, (CMSRole.VOTER, CMSRole.JOINING), "remove")
        _check_no_other_change(metadata, self.member_id)
        if member.role is CMSRole.VOTER and metadata.cms_voters == {self.member_id}:
            raise Rejected(
                "last_cms_voter", f"{self.member_id} is the last CMS voter; add another first"
            )

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        return _with_role(metadata, self.member_id, CMSRole.LEARNER)

    def __str__(self) -> str:
        return f"RemoveFromCMS({self.member_id})"


CMS_KINDS: tuple[type[Transformation], ...] = (
    AddCMSCandidate,
    StartAddToCMS,
    FinishAddToCMS,
    RemoveFromCMS,
)


def next_reconfiguration(
    metadata: ClusterMetadata, target: int, down: frozenset[str] = frozenset()
) -> Transformation | None:
    """The next step towards ``target`` voters, or None when there: finish an add in progress
    (resume), else add the first live learner, else remove a voter — a ``down`` one first."""
    joining = sorted(metadata.cms_with_role(CMSRole.JOINING))
    if joining:
        return FinishAddToCMS(joining[0])
    voters = metadata.cms_voters
    learners = sorted(metadata.cms_with_role(CMSRole.LEARNER) - down)
    if len(voters - down) < target and learners:
        return StartAddToCMS(learners[0])
    if len(voters) > target:
        leaving = sorted(voters & down) or sorted(voters, reverse=True)
        return RemoveFromCMS(leaving[0])
    return None
