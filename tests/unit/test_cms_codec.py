"""A commit is parsed once, by the member a client called; what travels after is checked again."""

from __future__ import annotations

import asyncio

import pytest

from epochal.cms.codec import (
    item_from_proto,
    outcome_to_proto,
    parse_commit,
    settle_from_outcome,
)
from epochal.cmscore.state_machine import CommitResult, digest_of
from epochal.errors import InvalidRequest, NotLeader, Rejected
from epochal.tcm import (
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    PrepareMove,
    Register,
    ReplicationParams,
)
from epochal.wire.metadata import encode_transformation, transformation_to_proto
from epochal.wire.proposal import decode_item, encode_item, item_to_proto
from epochal.wire.v1 import cms_pb2

TABLE = CreateTable(
    keyspace="ks",
    name="t",
    columns=(Column("id", ColumnType.TEXT), Column("v", ColumnType.BLOB)),
    partition_key=("id",),
)


def request(entry_id: str = "e1") -> cms_pb2.CommitRequest:
    return cms_pb2.CommitRequest(transformation=transformation_to_proto(TABLE), entry_id=entry_id)


def test_a_parsed_commit_travels_as_an_item_and_back_unchanged() -> None:
    item = parse_commit(request(), 1 << 20)
    assert item.transformation == TABLE
    assert item_from_proto(item_to_proto(item)) == item
    assert decode_item(encode_item(item)) == item


@pytest.mark.parametrize(
    ("entry_id", "limit", "message"),
    [
        ("", 1 << 20, "entry_id is required"),
        ("x" * 129, 1 << 20, "the limit is 128"),
        ("e1", 10, "--max-transformation-bytes"),
        ("cms:snapshot@7", 1 << 20, "the CMS members' own commits"),  # the leader's own ids
    ],
)
def test_bad_commits_are_refused_with_a_message(entry_id: str, limit: int, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_commit(request(entry_id), limit)


def test_a_forwarded_item_whose_digest_does_not_match_its_bytes_is_refused() -> None:
    proto = item_to_proto(parse_commit(request(), 1 << 20))
    proto.digest ^= 1
    with pytest.raises(InvalidRequest, match="digest does not match"):
        item_from_proto(proto)


@pytest.mark.parametrize(
    "transformation",
    [
        Register(address="10.0.0.1:1", datacenter="dc1", rack="r1", version="1"),
        CreateKeyspace(name="ks\n", replication=ReplicationParams.simple(1)),
        CreateTable(
            keyspace="ks",
            name="t",
            columns=(Column("k\n", ColumnType.TEXT),),
            partition_key=("k\n",),
        ),
        PrepareMove(node_id="node-1", tokens=(5, 5)),
    ],
)
def test_input_rules_hold_for_client_commits_and_for_forwarded_ones(transformation) -> None:  # type: ignore[no-untyped-def]
    """The edge's rules (check_input) apply wherever a commit enters the CMS: a client's
    Commit, and a ProposalItem another member (or anything) forwards."""
    commit = cms_pb2.CommitRequest(
        transformation=transformation_to_proto(transformation), entry_id="e9"
    )
    with pytest.raises(InvalidRequest):
        parse_commit(commit, 1 << 20)
    encoded = encode_transformation(transformation)
    item = cms_pb2.ProposalItem(
        transformation=encoded, entry_id="e9", digest=digest_of(encoded) & ((1 << 64) - 1)
    )
    with pytest.raises(InvalidRequest):
        item_from_proto(item)


def test_the_leaders_answers_reach_the_follower_as_they_were() -> None:
    asyncio.run(_answers_round_trip())


async def _answers_round_trip() -> None:
    loop = asyncio.get_running_loop()
    answers = [
        CommitResult(7, duplicate=True, batch_size=3),
        Rejected("table_exists", "table ks.t already exists"),
        NotLeader("cms2"),
    ]
    for index, answer in enumerate(answers):
        outcome = outcome_to_proto(answer, index)
        assert outcome.index == index
        future: asyncio.Future[CommitResult] = loop.create_future()
        settle_from_outcome(future, outcome)
        if isinstance(answer, CommitResult):
            assert future.result() == answer
        else:
            error = future.exception()
            assert type(error) is type(answer) and error.message == answer.message
    assert isinstance(future.exception(), NotLeader)
    assert future.exception().leader_id == "cms2"
