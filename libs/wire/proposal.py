"""A Paxos slot's values in the CMS: each one an encoded ``ProposalItem`` (a transformation's
canonical bytes, its entry id and digest). The member core proposes and applies them, the CMS
server forwards them; the simulator uses the same encoding."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from epochal.cmscore.state_machine import ProposalItem
from epochal.wire.metadata import MalformedInput, decode_transformation
from epochal.wire.v1 import cms_pb2

_UNSIGNED_64 = (1 << 64) - 1


def item_to_proto(item: ProposalItem) -> cms_pb2.ProposalItem:
    return cms_pb2.ProposalItem(
        transformation=item.encoded, entry_id=item.entry_id, digest=item.digest & _UNSIGNED_64
    )


def encode_item(item: ProposalItem) -> bytes:
    """One value of a Paxos slot."""
    return item_to_proto(item).SerializeToString()


def decode_item(value: bytes) -> ProposalItem:
    """A value of a chosen slot: the leader checked it before proposing it. Raises
    MalformedInput for one this version cannot read (a kind it does not know)."""
    try:
        message = cms_pb2.ProposalItem.FromString(value)
    except DecodeError as error:
        raise MalformedInput(f"not an encoded ProposalItem: {error}") from None
    return ProposalItem(
        decode_transformation(message.transformation),
        message.transformation,
        message.entry_id,
        signed64(message.digest),
    )


def signed64(value: int) -> int:
    """A fixed64 field read back as the signed digest the state machine keeps."""
    return value - (1 << 64) if value >= 1 << 63 else value
