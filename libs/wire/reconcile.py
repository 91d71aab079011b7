"""Token ranges and their marks as protobuf, for the ``ReplicaReconcile`` calls (both sides)."""

from __future__ import annotations

from collections.abc import Iterable

from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.marks import Mark, RangeMarks
from epochal.mtrack.range_calls import RangeRef
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange
from epochal.wire.fields import MalformedInput
from epochal.wire.v1 import metadata_pb2 as mpb
from epochal.wire.v1 import replica_pb2 as pb


def range_to_proto(token_range: TokenRange) -> mpb.TokenRange:
    return mpb.TokenRange(left=token_range.left, right=token_range.right)


def range_from_proto(message: mpb.TokenRange, field: str) -> TokenRange:
    for end in (message.left, message.right):
        if not MIN_TOKEN <= end <= MAX_TOKEN:
            raise MalformedInput(f"{field}: {end} is not a token")
    return TokenRange(message.left, message.right)


def marks_to_proto(marks: RangeMarks) -> list[pb.RangeMark]:
    return [pb.RangeMark(range=range_to_proto(p.range), hlc=p.hlc) for p in marks.pieces]


def marks_from_proto(messages: Iterable[pb.RangeMark], field: str) -> RangeMarks:
    pieces = []
    for message in messages:
        if message.hlc > MAX_HLC:
            raise MalformedInput(f"{field}: {message.hlc} is not an HLC")
        pieces.append(Mark(range_from_proto(message.range, field), message.hlc))
    return RangeMarks.of_pieces(pieces)


def ref_to_proto(ref: RangeRef) -> pb.ReconcileRange:
    return pb.ReconcileRange(
        epoch=ref.epoch,
        keyspace=ref.keyspace,
        range=range_to_proto(ref.range),
        lease_token=ref.lease_token,
        replicas=ref.replicas,
    )


def ref_from_proto(message: pb.ReconcileRange) -> RangeRef:
    if not message.keyspace:
        raise MalformedInput("range.keyspace is required")
    if not message.HasField("range"):
        raise MalformedInput("range.range is required")
    return RangeRef(
        message.epoch,
        message.keyspace,
        range_from_proto(message.range, "range.range"),
        message.lease_token,
        tuple(message.replicas),
    )
