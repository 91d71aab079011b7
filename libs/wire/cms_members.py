"""Protobuf conversions of CMS membership: members with their roles and the four transformations
that change them (``epochal.tcm.cms``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from epochal.tcm import CMSMember, Transformation
from epochal.tcm.cms import AddCMSCandidate, FinishAddToCMS, RemoveFromCMS, StartAddToCMS
from epochal.tcm.metadata import CMSRole
from epochal.wire.fields import enum_from, required
from epochal.wire.v1 import metadata_pb2 as pb

ROLE_NUMBERS = {
    CMSRole.VOTER: pb.CMS_ROLE_VOTER,
    CMSRole.JOINING: pb.CMS_ROLE_JOINING,
    CMSRole.LEARNER: pb.CMS_ROLE_LEARNER,
}
# Members written before roles existed carry UNSPECIFIED: they were all voters.
_ROLES = {number: role for role, number in ROLE_NUMBERS.items()} | {
    pb.CMS_ROLE_UNSPECIFIED: CMSRole.VOTER
}


def members_to_proto(members: Iterable[CMSMember]) -> list[pb.CMSMember]:
    return [
        pb.CMSMember(member_id=m.member_id, address=m.address, role=ROLE_NUMBERS[m.role])
        for m in members
    ]


def members_from_proto(members: Iterable[pb.CMSMember], field: str) -> tuple[CMSMember, ...]:
    return tuple(
        CMSMember(
            required(x.member_id, f"{field}[{i}].member_id"),
            required(x.address, f"{field}[{i}].address"),
            enum_from(CMSRole, _ROLES, x.role, f"{field}[{i}].role"),
        )
        for i, x in enumerate(members)
    )


def _from_add_candidate(m: pb.AddCMSCandidate) -> Transformation:
    return AddCMSCandidate(
        required(m.member_id, "add_cms_candidate.member_id"),
        required(m.address, "add_cms_candidate.address"),
    )


def _member_only(
    message: type, transformation: type, field: str
) -> tuple[Callable[[Any], Any], Callable[[Any], Transformation]]:
    """Codecs of a transformation whose only field is ``member_id``."""

    def to_proto(t: Any) -> Any:
        return message(member_id=t.member_id)

    def from_proto(m: Any) -> Transformation:
        return transformation(required(m.member_id, f"{field}.member_id"))  # type: ignore[no-any-return]

    return to_proto, from_proto


CMS_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Transformation]]] = {
    AddCMSCandidate.kind: (
        lambda t: pb.AddCMSCandidate(member_id=t.member_id, address=t.address),
        _from_add_candidate,
    ),
    StartAddToCMS.kind: _member_only(pb.StartAddToCMS, StartAddToCMS, StartAddToCMS.kind),
    FinishAddToCMS.kind: _member_only(pb.FinishAddToCMS, FinishAddToCMS, FinishAddToCMS.kind),
    RemoveFromCMS.kind: _member_only(pb.RemoveFromCMS, RemoveFromCMS, RemoveFromCMS.kind),
}
