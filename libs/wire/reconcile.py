"""Token ranges and their marks as protobuf, for the ``ReplicaReconcile`` calls (both sides)."""

from __future__ import annotations

from collections.abc import Iterable

from epochal.mtrack.cohorts import Cohort, CohortMark
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.marks import Mark, RangeMarks
from epochal.mtrack.range_calls import RangeRef
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange
from epochal.wire.fields import MalformedInput, within
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
    try:
        return RangeMarks.of_pieces(pieces)
    except ValueError as error:  # pieces that overlap
        raise MalformedInput(f"{field}: {error}") from None


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
        within(message.epoch, "range.epoch"),
        message.keyspace,
        range_from_proto(message.range, "range.range"),
        within(message.lease_token, "range.lease_token"),
        tuple(message.replicas),
    )


def cohort_to_proto(cohort: Cohort) -> pb.Cohort:
    return pb.Cohort(
        id=cohort.id,
        range=range_to_proto(cohort.range),
        members=cohort.members,
        low=cohort.low,
        high=cohort.high,
        folded_high=cohort.folded,
        mutations=cohort.mutations,
        bytes=cohort.bytes,
        formed_unix_ms=cohort.formed_unix_ms,
    )


def cohort_from_proto(message: pb.Cohort, keyspace: str, field: str) -> Cohort:
    try:
        return Cohort(
            id=message.id,
            keyspace=keyspace,
            range=range_from_proto(message.range, f"{field}.range"),
            members=tuple(message.members),
            low=message.low,
            high=message.high,
            folded=message.folded_high,
            mutations=message.mutations,
            bytes=message.bytes,
            formed_unix_ms=message.formed_unix_ms,
        )
    except ValueError as error:
        raise MalformedInput(f"{field}: {error}") from None


def cohort_marks_to_proto(marks: Iterable[CohortMark]) -> list[pb.CohortMark]:
    return [pb.CohortMark(id=m.id, high=m.high) for m in marks]


def cohort_marks_from_proto(
    messages: Iterable[pb.CohortMark], field: str
) -> tuple[CohortMark, ...]:
    try:
        return tuple(CohortMark(m.id, m.high) for m in messages)
    except ValueError as error:
        raise MalformedInput(f"{field}: {error}") from None
