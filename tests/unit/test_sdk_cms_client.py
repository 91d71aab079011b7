"""The CMS client answers domain values, against a real grpc.aio server on 127.0.0.1 whose
answers the CMS's own codec builds: ``describe`` a ``CMSView`` (roles, ballot, snapshots,
progress), ``fetch_log`` a ``LogPage`` (the snapshot as metadata, each entry's transformation
decoded with its slot), ``watch`` a ``LogPage`` per event; a member that refuses raises the
error family."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from epochal.cms.codec import describe_to_proto
from epochal.cms.description import MemberDescription
from epochal.cms_client import CMSClient, CMSView, MemberView
from epochal.errors import Rejected, Unavailable
from epochal.paxos import Ballot
from epochal.paxos.ballot import MAX_ROUND
from epochal.status import code_of
from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    CMSRole,
    CreateKeyspace,
    InitializeCMS,
    ReplicationParams,
    Transformation,
    apply_transformation,
)
from epochal.wire.metadata import metadata_to_proto, transformation_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

from .local_server import serving

MEMBERS = (
    CMSMember("cms1", "127.0.0.1:1"),
    CMSMember("cms2", "127.0.0.1:2", CMSRole.JOINING),
)
LOG: list[Transformation] = [
    InitializeCMS(members=MEMBERS[:1]),
    *(CreateKeyspace(name=f"ks{i}", replication=ReplicationParams.simple(1)) for i in range(3)),
]


def at(epoch: int) -> ClusterMetadata:
    metadata = ClusterMetadata.empty()
    for transformation in LOG[:epoch]:
        metadata = apply_transformation(metadata, transformation)
    return metadata


def entry(epoch: int) -> cms_pb2.LogEntry:
    return cms_pb2.LogEntry(
        epoch=epoch,
        transformation=transformation_to_proto(LOG[epoch - 1]),
        entry_id=f"entry-{epoch}",
        slot=10 + epoch,
    )


class FakeMember:
    """A CMS member that describes itself, serves the log above from a snapshot at epoch 2,
    watches it in two events, and refuses every commit."""

    async def Describe(
        self, request: cms_pb2.DescribeRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.DescribeResponse:
        return describe_to_proto(
            MemberDescription(
                member_id="cms1",
                members=MEMBERS,
                leader_id="cms1",
                epoch=4,
                snapshot_epochs=(2,),
                promised=Ballot(7, "cms1"),
                applied_slot=14,
                ready=True,
                snapshots_installed=1,
                log_complete=False,
            )
        )

    async def FetchLog(
        self, request: cms_pb2.FetchLogRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.FetchLogResponse:
        if request.since_epoch == 0:
            return cms_pb2.FetchLogResponse(
                snapshot=cms_pb2.Snapshot(metadata=metadata_to_proto(at(2)), slot=12),
                entries=[entry(3), entry(4)],
                latest_epoch=4,
            )
        return cms_pb2.FetchLogResponse(
            entries=[entry(e) for e in range(request.since_epoch + 1, 5)],
            latest_epoch=4,
            has_more=request.since_epoch < 3,
        )

    async def Watch(
        self, request: cms_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cms_pb2.WatchEvent]:
        yield cms_pb2.WatchEvent(entries=[entry(1), entry(2)], latest_epoch=2)
        yield cms_pb2.WatchEvent(entries=[entry(3)], latest_epoch=3)

    async def Commit(
        self, request: cms_pb2.CommitRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.CommitResponse:
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "keyspace ks0 exists")
        raise AssertionError("unreachable")


def test_describe_fetch_log_and_watch_answer_domain_values() -> None:
    async def scenario() -> None:
        member = serving(FakeMember(), cms_pb2_grpc.add_CMSServicer_to_server)
        async with member as address, CMSClient([address]) as cms:
            assert await cms.describe() == CMSView(
                member_id="cms1",
                epoch=4,
                leader_id="cms1",
                members=(
                    MemberView("cms1", "127.0.0.1:1", "voter"),
                    MemberView("cms2", "127.0.0.1:2", "joining"),
                ),
                ready=True,
                log_complete=False,
                snapshot_epochs=(2,),
                ballot=Ballot(7, "cms1"),
                applied_slot=14,
                snapshots_installed=1,
            )
            far = await cms.fetch_log(0)
            assert far.snapshot == at(2)
            assert [(r.epoch, r.entry_id, r.slot) for r in far.records] == [
                (3, "entry-3", 13),
                (4, "entry-4", 14),
            ]
            assert [r.transformation for r in far.records] == LOG[2:]
            near = await cms.fetch_log(1, entries_only=True)
            assert near.snapshot is None and near.has_more and near.latest_epoch == 4
            assert [r.epoch for r in near.records] == [2, 3, 4]
            events = [page async for page in cms.watch(0)]
            assert [[r.transformation for r in e.records] for e in events] == [
                LOG[:2],
                LOG[2:3],
            ]
            assert [e.latest_epoch for e in events] == [2, 3]
            with pytest.raises(Rejected) as refused:
                await cms.commit(LOG[1])
        assert code_of(refused.value) is grpc.StatusCode.FAILED_PRECONDITION
        assert refused.value.message == "keyspace ks0 exists"

    asyncio.run(scenario())


class GarbledMember(FakeMember):
    """Answers what does not decode: a ballot past what a member can hold, a snapshot that is
    not metadata."""

    async def Describe(
        self, request: cms_pb2.DescribeRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.DescribeResponse:
        described = await super().Describe(request, context)
        described.ballot.round = MAX_ROUND + 1
        return described

    async def FetchLog(
        self, request: cms_pb2.FetchLogRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.FetchLogResponse:
        answer = await super().FetchLog(request, context)
        answer.snapshot.metadata.keyspaces.add(name="ks")  # no replication: not a keyspace
        return answer


def test_an_answer_that_does_not_decode_is_the_members_failure_not_a_crash() -> None:
    """Undecodable answers raise Unavailable (the error family, retried at the next member),
    naming the member, instead of a ValueError no caller of the SDK expects."""

    async def scenario() -> None:
        member = serving(GarbledMember(), cms_pb2_grpc.add_CMSServicer_to_server)
        async with member as address, CMSClient([address]) as cms:
            with pytest.raises(Unavailable, match="CMS member 0 answered what does not decode"):
                await cms.describe()
            with pytest.raises(Unavailable, match=r"keyspace ks\.replication"):
                await cms.fetch_log(0)

    asyncio.run(scenario())
