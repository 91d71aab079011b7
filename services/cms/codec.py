"""Protobuf <-> domain values for the CMS's own messages: commits, proposal items, outcomes.

A commit is parsed once, by the member a client called: ``parse_commit`` checks it and gives the
transformation's canonical encoding and digest. That ``ProposalItem`` is what travels from then
on — forwarded to the leader (``item_to_proto``) and proposed in a Paxos slot
(``encode_item``) — so no other member parses the client's request again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import grpc

from epochal.cms.log_server import FetchResult, SnapshotPage
from epochal.cms.status import code_of
from epochal.cmscore.batching import INTERNAL_ENTRY_ID_PREFIX, proposal_item
from epochal.cmscore.rows import LogEntryRow
from epochal.cmscore.state_machine import CommitResult, ProposalItem, digest_of
from epochal.errors import EpochalError, InvalidRequest, NotLeader, Rejected
from epochal.tcm import CMSRole
from epochal.wire.metadata import (
    MalformedInput,
    decode_transformation,
    transformation_from_proto,
)
from epochal.wire.paxos import ballot_to_proto
from epochal.wire.proposal import signed64
from epochal.wire.status import bounded_message, error_for
from epochal.wire.v1 import cms_pb2, metadata_pb2

if TYPE_CHECKING:  # the member imports this module
    from epochal.cms.description import MemberDescription

MAX_ENTRY_ID_CHARS = 128
_UNSIGNED_64 = (1 << 64) - 1


def parse_commit(request: cms_pb2.CommitRequest, max_transformation_bytes: int) -> ProposalItem:
    """The domain value of a client's commit request, encoded once; raises InvalidRequest with a
    message a person can act on."""
    _check_entry_id(request.entry_id)
    if not request.HasField("transformation"):
        raise InvalidRequest("transformation is required")
    size = request.transformation.ByteSize()
    if size > max_transformation_bytes:
        raise InvalidRequest(
            f"transformation is {size} bytes; the limit is {max_transformation_bytes} "
            "(--max-transformation-bytes)"
        )
    try:
        transformation = transformation_from_proto(request.transformation)
        transformation.check_input()
    except MalformedInput as error:
        raise InvalidRequest(f"malformed transformation: {error}") from None
    except Rejected as rejection:
        raise InvalidRequest(rejection.message, rule=rejection.rule) from None
    # Re-encoded from the domain value: the canonical bytes, whatever the client sent.
    return proposal_item(transformation, request.entry_id)


def item_from_proto(message: cms_pb2.ProposalItem) -> ProposalItem:
    """An item another member parsed (a forwarded commit, a slot value); checked again, cheaply,
    so that a member with a bug cannot slip a malformed one into the log."""
    _check_entry_id(message.entry_id)
    encoded = message.transformation
    digest = signed64(message.digest)
    if digest != digest_of(encoded):
        raise InvalidRequest(f"entry {message.entry_id!r}: digest does not match its bytes")
    try:
        transformation = decode_transformation(encoded)
        transformation.check_input()  # forwarded commits arrive here: the same edge
    except MalformedInput as error:
        raise InvalidRequest(f"malformed transformation: {error}") from None
    except Rejected as rejection:
        raise InvalidRequest(rejection.message, rule=rejection.rule) from None
    return ProposalItem(transformation, encoded, message.entry_id, digest)


def outcome_to_proto(result: CommitResult | EpochalError, index: int) -> cms_pb2.CommitOutcome:
    """The leader's answer to the commit at ``index`` of a ForwardRequest."""
    if isinstance(result, EpochalError):
        leader_id = (result.leader_id or "") if isinstance(result, NotLeader) else ""
        return cms_pb2.CommitOutcome(
            error=cms_pb2.CommitError(
                code=code_of(result).name,
                message=bounded_message(result.message),
                rule=result.rule,
                leader_id=leader_id,
            ),
            index=index,
        )
    return cms_pb2.CommitOutcome(
        committed=cms_pb2.CommitResponse(epoch=result.epoch, duplicate=result.duplicate),
        batch_size=result.batch_size,
        index=index,
    )


def settle_from_outcome(
    future: asyncio.Future[CommitResult], outcome: cms_pb2.CommitOutcome
) -> None:
    """Settle a forwarded commit with the leader's answer, so the client sees that answer."""
    if future.done():
        return
    if outcome.HasField("committed"):
        committed = outcome.committed
        future.set_result(CommitResult(committed.epoch, committed.duplicate, outcome.batch_size))
    else:
        future.set_exception(_error_from_proto(outcome.error))


def _error_from_proto(error: cms_pb2.CommitError) -> EpochalError:
    rule, leader_id = error.rule, error.leader_id
    if rule.startswith(f"{NotLeader.RULE}:"):  # from a member before leader_id existed
        rule, _, leader_id = rule.partition(":")
    code = grpc.StatusCode.__members__.get(error.code, grpc.StatusCode.UNAVAILABLE)
    return error_for(code, error.message, rule=rule, leader_id=leader_id)


def _check_entry_id(entry_id: str) -> None:
    if not entry_id:
        raise InvalidRequest(
            "entry_id is required: any unique string of at most 128 characters; "
            "reuse it when you retry the same commit"
        )
    if len(entry_id) > MAX_ENTRY_ID_CHARS:
        raise InvalidRequest(f"entry_id is {len(entry_id)} characters; the limit is 128")
    if entry_id.startswith(INTERNAL_ENTRY_ID_PREFIX):
        raise InvalidRequest(
            f"entry_id may not start with {INTERNAL_ENTRY_ID_PREFIX!r}: the CMS members' own "
            "commits use those"
        )


# ---------------------------------------------------------------------- the log, as served


def entry_to_proto(row: LogEntryRow) -> cms_pb2.LogEntry:
    return cms_pb2.LogEntry(
        epoch=row.epoch,
        slot=row.slot,
        entry_id=row.entry_id,
        transformation=metadata_pb2.Transformation.FromString(row.transformation),
    )


def snapshot_to_proto(page: SnapshotPage) -> cms_pb2.Snapshot:
    return cms_pb2.Snapshot(
        metadata=metadata_pb2.ClusterMetadata.FromString(page.row.metadata),
        slot=page.row.slot,
        entry_ids=[
            cms_pb2.EntryIdRecord(entry_id=i, epoch=e, digest=d & _UNSIGNED_64)
            for i, e, d in page.entry_ids
        ],
    )


def fetch_response_to_proto(result: FetchResult) -> cms_pb2.FetchLogResponse:
    return cms_pb2.FetchLogResponse(
        snapshot=snapshot_to_proto(result.snapshot) if result.snapshot is not None else None,
        entries=[entry_to_proto(row) for row in result.entries],
        latest_epoch=result.latest_epoch,
        applied_slot=result.applied_slot,
        has_more=result.has_more,
    )


def watch_event_to_proto(
    entries: list[LogEntryRow], latest_epoch: int, snapshot: SnapshotPage | None = None
) -> cms_pb2.WatchEvent:
    return cms_pb2.WatchEvent(
        snapshot=snapshot_to_proto(snapshot) if snapshot is not None else None,
        entries=[entry_to_proto(row) for row in entries],
        latest_epoch=latest_epoch,
    )


def describe_to_proto(description: MemberDescription) -> cms_pb2.DescribeResponse:
    return cms_pb2.DescribeResponse(
        member_id=description.member_id,
        members=[
            cms_pb2.MemberInfo(
                member_id=m.member_id,
                address=m.address,
                voter=m.role is CMSRole.VOTER,
                role=m.role.value,
            )
            for m in description.members
        ],
        leader_id=description.leader_id,
        epoch=description.epoch,
        snapshot_epochs=description.snapshot_epochs,
        ballot=ballot_to_proto(description.promised),
        applied_slot=description.applied_slot,
        ready=description.ready,
        snapshots_installed=description.snapshots_installed,
        log_complete=description.log_complete,
    )
