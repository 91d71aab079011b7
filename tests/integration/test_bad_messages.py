"""The messages that once took processes down (integers past SQLite's signed 64 bits, garbage
frames, a registration that blocked every schema change) are refused with INVALID_ARGUMENT, and
every process stays up — a CMS member that saw them restarts — with the metadata log and the
data unchanged by them. Refusals say what was wrong in bounded words: a 64 KiB name is echoed
by its first 200 characters (once the whole name went into the status, larger than gRPC's
metadata limit, and the client saw RESOURCE_EXHAUSTED instead), a number past SQLite's range is
named (once a peer was answered "failed: OverflowError(...)"). The fuzz test (test_fuzz.py)
covers the rest of the input space.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest

from epochal.cli import main as cli_main
from epochal.client import AsyncClient, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.mtrack import make_hlc
from epochal.paxos import Ballot, Prepare
from epochal.tcm import (
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    Register,
    ReplicationParams,
    Unregister,
)
from epochal.wire.channels import channel as open_channel
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.paxos import message_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc, paxos_pb2, replica_pb2_grpc
from epochal.wire.v1 import replica_pb2 as pb
from tests.harness import log_entries, run, start_ring

pytestmark = pytest.mark.integration

GARBAGE = b"\x0a\xff\xff\xff\xff\x0f"  # a field whose length runs past the end


def test_section_5_messages_are_refused_and_nothing_exits(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster")

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("ks", replication_factor=3, tracked=True)
            await client.create_table(
                "ks",
                "t",
                {"p": "int", "c": "bigint", "v": "text"},
                partition_key=["p"],
                clustering_key=["c"],
            )
            await client.write("ks", "t", {"p": 1, "c": 1, "v": "before"})
            epoch = client.epoch
        await cluster.wait_for_epoch(epoch)
        log_before = await log_entries(cluster.cms)
        replica = cluster.addresses[0]

        # A client write retried under a mutation id no coordinator issued: a sequence past
        # signed 64 bits, a node the CMS never named, this node's own log it never opened.
        own = int((await cluster.describe("replica1")).node_id.removeprefix("node-"))
        now = make_hlc(int(time.time() * 1000))
        for node, log, sequence in [
            (1, 1, 2**63),
            (2**32 - 1, 1, 1),
            (own, 2**32 - 1, 1),
        ]:
            request = _write(epoch, "retry")
            request.mutation_id.CopyFrom(
                pb.MutationId(node=node, log=log, sequence=sequence, hlc=now)
            )
            await _expect_invalid(_unary(replica, "Write", request), "mutation")
            session = pb.SessionRequests(requests=[pb.SessionRequest(id=7, write=request)])
            (reply,) = await _session(replica, session)
            assert reply.failure.code == "INVALID_ARGUMENT", reply
        # An issued id resent with another write: refused for good, never stored.
        first = await _unary(replica, "Write", _write(epoch, "first", clustering=7))
        resent = _write(epoch, "other", clustering=7)
        resent.mutation_id.CopyFrom(first.mutation_id)
        await _expect_invalid(_unary(replica, "Write", resent), "first sent with")
        # A value carrying a field this version does not know: stored as the value it is, on
        # every replica (once it was stored on the coordinator alone, refused by the others).
        unknown = _write(epoch, "ignored", clustering=8)
        unknown.consistency = pb.ALL
        unknown.mutation.rows[0].cells[0].value.CopyFrom(
            pb.Value.FromString(b"\n\x05hello\x98\x06\x01")
        )
        await _unary(replica, "Write", unknown)
        # A bigint clustering value of 2^63 - 1, in two rows of one write: stored once.
        rows = _write(epoch, "edge")
        rows.mutation.rows.add().CopyFrom(rows.mutation.rows[0])
        with pytest.raises(grpc.aio.AioRpcError) as twice:
            await _unary(replica, "Write", rows)
        assert twice.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "twice" in (twice.value.details() or "")
        single = _write(epoch, "edge")
        await _unary(replica, "Write", single)
        # A peer's apply with an HLC past 64 bits and one past the allowed skew: refused in
        # band, never stored.
        apply = await _stored_apply(cluster, epoch)
        apply.mutation.id.hlc = 2**64 - 1
        (refused,) = await _exchange(
            replica, pb.PeerRequests(requests=[pb.PeerRequest(id=1, apply=apply)])
        )
        assert refused.WhichOneof("body") == "malformed" and "hlc" in refused.malformed, refused
        apply.mutation.id.hlc = make_hlc(int(time.time() * 1000) + 3_600_000)
        (ahead,) = await _exchange(
            replica, pb.PeerRequests(requests=[pb.PeerRequest(id=1, apply=apply)])
        )
        assert ahead.apply.outcome == pb.CLOCK_SKEW, ahead
        # Garbage frames on both streams: refused at once, not at the deadline.
        for method in ("Session", "Exchange"):
            started = time.monotonic()
            code = await _garbage_stream(replica, method)
            assert code is grpc.StatusCode.INVALID_ARGUMENT, (method, code)
            assert time.monotonic() - started < 2.0, method

        # Paxos messages no member could have sent: a catch-up from slot 2^63, ballots past
        # what storage holds; refused, and elections still work (the restart below).
        members = sorted(cluster.cms.members)
        catch_up_far = paxos_pb2.PaxosMessage(
            src=members[1],
            dst=members[0],
            catch_up_request=paxos_pb2.CatchUpRequest(from_slot=2**63),
        )
        for address in cluster.cms.addresses:
            assert await _step(address, catch_up_far) is grpc.StatusCode.INVALID_ARGUMENT
        for round_, expect in (
            (2**62 + 1, grpc.StatusCode.INVALID_ARGUMENT),
            (2**63, grpc.StatusCode.INVALID_ARGUMENT),
            (2**64 - 1, grpc.StatusCode.INVALID_ARGUMENT),
        ):
            for dst in members:
                prepare = message_to_proto(
                    Prepare(src=members[1], dst=dst, ballot=Ballot(5, members[1]), from_slot=1)
                )
                prepare.prepare.ballot.round = round_
                address = cluster.cms.members[dst].address
                assert await _step(address, prepare) is expect, (round_, dst)
        # A registration whose version would block every schema change.
        async with CMSClient(cluster.cms.addresses) as cms:
            for version in ("1", "0.9.0", "1.0", "x.y.z"):
                with pytest.raises(Exception) as refused_version:
                    await cms.commit(
                        Register(address="10.9.9.9:1", datacenter="dc1", rack="r1", version=version)
                    )
                assert refused_version.value.status == "INVALID_ARGUMENT", version
            # A node that registered but never joined can be forgotten from the command line.
            registered = await cms.commit(
                Register(address="10.9.9.9:2", datacenter="dc1", rack="r1", version="1.0.0")
            )
        await cluster.wait_for_epoch(registered.epoch)
        async with AsyncClient(cluster.addresses) as client:
            await client.refresh(registered.epoch)
            stray = next(
                n.node_id for n in client.metadata.nodes.values() if n.address == "10.9.9.9:2"
            )
        exit_code = await asyncio.to_thread(cli_main, ["--cluster", replica, "unregister", stray])
        assert exit_code == 0

        # Nothing exited, nothing refused reached the log or the data, and a member that saw
        # all of it restarts.
        for process in [*cluster.cms.members.values(), *cluster.nodes.values()]:
            assert process.running, process.name
        log_after = await log_entries(cluster.cms)
        added = [type(e.transformation) for e in log_after[len(log_before) :]]
        assert added == [Register, Unregister], added
        async with AsyncClient(cluster.addresses) as client:
            rows = (await client.read("ks", "t", {"p": 1}, consistency=Consistency.ALL)).rows
        assert sorted(r["v"] for r in rows) == ["before", "edge", "first", "hello"], rows
        leader = await cluster.cms.leader()
        cluster.cms.stop(leader)
        async with CMSClient(cluster.cms.addresses) as cms:  # the others elect a new leader
            await cms.commit(
                Register(address="10.9.9.9:3", datacenter="dc1", rack="r1", version="1.0.0")
            )
        cluster.cms.start(leader)
        await cluster.cms.wait_serving(leader, timeout_s=30)
        async with CMSClient(cluster.cms.addresses) as cms:
            await cms.commit(
                Register(address="10.9.9.9:4", datacenter="dc1", rack="r1", version="1.0.0")
            )

    run(cluster, scenario, 240)


LONG_NAMES = ["k" * 65_536, "\u00e9" * 32_768]  # 64 KiB of UTF-8, ASCII or not
BOUNDED_BYTES = 2048  # what a refusal's message may take (epochal.wire.status)


def test_refusals_echo_the_start_of_a_long_name_and_never_a_bugs_text(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster")

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("ks", replication_factor=3, tracked=True)
            await client.create_table("ks", "t", {"p": "int", "v": "text"}, partition_key=["p"])
            metadata = client.metadata
        await cluster.wait_for_epoch(metadata.epoch)
        replica = cluster.addresses[0]
        for name in LONG_NAMES:
            # A client's read and write of a keyspace that does not exist, as a status and
            # in-band on a session: refused, naming the start of it.
            read = pb.ReadRequest(keyspace=name, table="t", partition_key=[pb.Value(int=1)])
            _bounded(await _refusal(_unary(replica, "Read", read)), name)
            write = _write(metadata.epoch, "x")
            write.mutation.keyspace = name
            _bounded(await _refusal(_unary(replica, "Write", write)), name)
            session = pb.SessionRequests(requests=[pb.SessionRequest(id=1, read=read)])
            (reply,) = await _session(replica, session)
            _bounded((reply.failure.code, reply.failure.message), name)
            # A reconciler's fence of a range of it: refused in-band.
            fence = pb.FenceRequest(range=pb.ReconcileRange(keyspace=name), hlc=1)
            fence.range.range.left, fence.range.range.right = 0, 100
            async with open_channel(replica) as channel:
                fenced = await replica_pb2_grpc.ReplicaReconcileStub(channel).Fence(fence)
            assert fenced.outcome == pb.UNKNOWN_TABLE, fenced
            _bounded(("FAILED_PRECONDITION", fenced.message), name)
            # Commits naming it: a keyspace of that name, a table in a keyspace of that name.
            creates = [
                CreateKeyspace(name=name, replication=ReplicationParams.simple(1)),
                CreateTable(
                    keyspace=name,
                    name="t",
                    columns=(Column("k", ColumnType.TEXT),),
                    partition_key=("k",),
                ),
            ]
            for address in cluster.cms.addresses:  # the leader, and followers that forward
                for create in creates:
                    _bounded(await _refusal(_commit(address, create)), name)
        # A peer's read with a low bound past SQLite's INTEGER: malformed, naming the field.
        table = metadata.keyspaces["ks"].tables["t"]
        far = pb.LocalReadRequest(
            epoch=metadata.epoch,
            keyspace="ks",
            table_id=table.id,
            token=42,
            partition_key=b"\x01k",
            summary=True,
            low_bound=2**63,
        )
        (reply,) = await _exchange(
            replica, pb.PeerRequests(requests=[pb.PeerRequest(id=1, read=far)])
        )
        assert reply.malformed == f"read.low_bound: {2**63} is out of range (0..{2**63 - 1})"

    run(cluster, scenario, 180)


async def _refusal(call: object) -> tuple[str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    return raised.value.code().name, raised.value.details() or ""


def _bounded(refusal: tuple[str, str], name: str) -> None:
    """A refusal (not RESOURCE_EXHAUSTED: the status fitted in gRPC's metadata) that shows the
    start of ``name``, within 2 KiB."""
    code, message = refusal
    assert code in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"), (code, message[:300])
    assert name[:60] in message, message[:300]
    assert len(message.encode()) <= BOUNDED_BYTES


async def _commit(address: str, transformation: object) -> object:
    async with open_channel(address) as channel:
        request = cms_pb2.CommitRequest(
            transformation=transformation_to_proto(transformation),  # type: ignore[arg-type]
            entry_id=f"long-{time.monotonic_ns()}",
        )
        return await cms_pb2_grpc.CMSStub(channel).Commit(request, timeout=10)


# --------------------------------------------------------------------------- helpers


def _write(epoch: int, value: str, clustering: int = 2**63 - 1) -> pb.WriteRequest:
    return pb.WriteRequest(
        mutation=pb.Mutation(
            keyspace="ks",
            table="t",
            partition_key=[pb.Value(int=1)],
            rows=[
                pb.RowWrite(
                    clustering=[pb.Value(int=clustering)],
                    cells=[pb.CellWrite(column="v", value=pb.Value(text=value))],
                )
            ],
        ),
        consistency=pb.QUORUM,
        epoch=epoch,
    )


async def _unary(address: str, method: str, request: object) -> object:
    async with open_channel(address) as channel:
        stub = replica_pb2_grpc.ReplicaStub(channel)
        return await getattr(stub, method)(request, timeout=10)


async def _expect_invalid(call: object, words: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT, raised.value
    assert words in (raised.value.details() or ""), raised.value.details()


async def _session(address: str, requests: pb.SessionRequests) -> list[pb.SessionReply]:
    async with open_channel(address) as channel:
        return await _replies(replica_pb2_grpc.ReplicaStub(channel).Session, requests)


async def _exchange(address: str, requests: pb.PeerRequests) -> list[pb.PeerReply]:
    async with open_channel(address) as channel:
        return await _replies(replica_pb2_grpc.ReplicaPeerStub(channel).Exchange, requests)


async def _replies(method, requests):  # type: ignore[no-untyped-def]
    """One batch of requests on a new multiplexed stream; every reply."""
    call = method(timeout=10)
    await call.write(requests)
    await call.done_writing()
    return [reply async for batch in call for reply in batch.replies]


async def _stored_apply(cluster: LocalCluster, epoch: int) -> pb.ApplyRequest:
    """A real stored mutation, as a coordinator sends it (taken from a replica's log)."""
    async with AsyncClient(cluster.addresses) as client:
        written = await client.write("ks", "t", {"p": 2, "c": 5, "v": "peer"})
    identity = pb.MutationId(
        node=written.mutation_id.node,
        log=written.mutation_id.log,
        sequence=written.mutation_id.sequence,
        hlc=written.mutation_id.hlc,
    )
    fetch = pb.FetchMutationsRequest(epoch=epoch, ids=[identity])
    (reply,) = await _exchange(
        cluster.addresses[0], pb.PeerRequests(requests=[pb.PeerRequest(id=1, fetch=fetch)])
    )
    (stored,) = reply.fetch.mutations
    stored.id.sequence += 1_000_000  # another id, so that it is not a duplicate
    return pb.ApplyRequest(epoch=epoch, mutation=stored)


async def _garbage_stream(address: str, method: str) -> grpc.StatusCode:
    path = (
        "/epochal.v1.Replica/Session" if method == "Session" else "/epochal.v1.ReplicaPeer/Exchange"
    )
    async with open_channel(address) as channel:
        call = channel.stream_stream(path)(timeout=5)
        await call.write(GARBAGE)
        await call.done_writing()
        try:
            async for _ in call:
                pass
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK


async def _step(address: str, message: paxos_pb2.PaxosMessage) -> grpc.StatusCode:
    async with open_channel(address) as channel:
        stub = cms_pb2_grpc.CMSPeerStub(channel)
        try:
            await stub.Step(iter([cms_pb2.StepRequest(messages=[message])]), timeout=5)
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK
