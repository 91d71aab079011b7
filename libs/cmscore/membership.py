"""Who votes and who learns, from the metadata (DESIGN.md "Membership"; epochal.tcm.cms)."""

from __future__ import annotations

from collections.abc import Mapping

from epochal.paxos import Configuration, Membership
from epochal.tcm import ClusterMetadata, CMSRole


def membership_of(metadata: ClusterMetadata, initial_members: Mapping[str, str]) -> Membership:
    """The Paxos membership for the slots after ``metadata``'s (all earlier ones are chosen);
    before InitializeCMS, the initial members vote."""
    if not metadata.initialized:
        return Membership.initial(frozenset(initial_members))
    voters = metadata.cms_voters
    return Membership.initial(voters, metadata.cms_with_role(CMSRole.JOINING, CMSRole.LEARNER))


def reconfigured(membership: Membership, metadata: ClusterMetadata, from_slot: int) -> Membership:
    """``membership`` with the members of ``metadata`` governing from ``from_slot`` on."""
    return membership.with_configuration(
        Configuration(
            from_slot=from_slot,
            voters=metadata.cms_voters,
            learners=metadata.cms_with_role(CMSRole.JOINING, CMSRole.LEARNER),
        )
    )


def peer_addresses(
    metadata: ClusterMetadata, initial_members: Mapping[str, str], member_id: str
) -> dict[str, str]:
    """Every other member's address: the initial members', then the metadata's."""
    addresses = dict(initial_members)
    addresses.update((m.member_id, m.address) for m in metadata.cms_members)
    addresses.pop(member_id, None)
    return addresses
