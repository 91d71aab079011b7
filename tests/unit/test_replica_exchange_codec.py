"""Claims of the coordinator's Exchange codec (epochal.replica.exchange_codec): a mutation's stored
bytes reach the request unchanged, every outcome survives the wire, and a reply the peer refused
or could not encode is unusable rather than read as an answer."""

from __future__ import annotations

import pytest

from epochal.mtrack import LogDigests, MutationId
from epochal.replica import exchange_codec as codec
from epochal.replica.codec import mutation_from_proto, mutation_to_body
from epochal.replica.local_replica import Outcome, PartitionRead
from epochal.replica.model import Mutation, RowWrite
from epochal.wire.v1 import replica_pb2 as pb

MUTATION = Mutation(
    id=MutationId(node=1, log=2, sequence=3, hlc=1_000),
    keyspace="ks",
    table_id="t1",
    token=7,
    partition_key=b"\x01p\x00",
    rows=(RowWrite(b"r", (("v", b"x"), ("w", None))),),
    tracked=True,
)


@pytest.mark.parametrize("repair", [False, True])
def test_an_apply_request_carries_the_stored_bytes_unchanged(repair: bool) -> None:
    body = mutation_to_body(MUTATION)
    request = codec.apply_request(9, body, repair=repair)
    assert request.WhichOneof("body") == "apply"
    assert (request.apply.epoch, request.apply.repair) == (9, repair)
    assert request.apply.mutation.SerializeToString() == body
    assert mutation_from_proto(request.apply.mutation) == MUTATION


def test_a_read_request_names_the_partition_and_what_is_wanted() -> None:
    read = PartitionRead("ks", "t1", 7, b"\x01p\x00")
    request = codec.read_request(
        4, read, data=True, summary=True, digest=False, sketch_logs=[(1, 2)], sketch_cells=6
    ).read
    assert (request.keyspace, request.table_id, request.token) == ("ks", "t1", 7)
    assert (request.data, request.summary, request.digest) == (True, True, False)
    assert [(k.node, k.log) for k in request.sketch_logs] == [(1, 2)]


@pytest.mark.parametrize("outcome", list(Outcome))
def test_every_outcome_survives_the_wire(outcome: Outcome) -> None:
    number = codec.OUTCOME_NUMBERS[outcome]
    reply = pb.PeerReply(apply=pb.ApplyResponse(epoch=5, outcome=number, message="m"))
    decoded = codec.applied(reply)
    assert (decoded.epoch, decoded.outcome, decoded.message) == (5, outcome, "m")


def test_a_read_reply_decodes_its_summary() -> None:
    summary = LogDigests.of([MUTATION.id])
    reply = pb.PeerReply(read=pb.LocalReadResponse(epoch=3, summary=summary.encode()))
    assert codec.read_reply(reply).summary == summary


def test_a_refusal_and_an_undecodable_summary_are_unusable() -> None:
    with pytest.raises(codec.UnusableReply, match="refused: bad"):
        codec.read_reply(pb.PeerReply(malformed="bad"))
    with pytest.raises(codec.UnusableReply, match="malformed summary"):
        codec.read_reply(pb.PeerReply(read=pb.LocalReadResponse(summary=b"\xff\xff")))
