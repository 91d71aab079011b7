"""Realistic requests for the fuzz test (``fuzz.py``), per method: what the fuzzer mutates field
by field. Writes carry the input's tag in their value and commits in their entry id, which is how
the oracle finds refused input in the data and the log afterwards.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from epochal.mtrack import make_hlc
from epochal.paxos import (
    Accept,
    Accepted,
    AcceptedSlot,
    Ballot,
    CatchUpReply,
    CatchUpRequest,
    ChosenSlot,
    Commit,
    Nack,
    Prepare,
    Promise,
)
from epochal.paxos.ballot import MAX_ROUND
from epochal.paxos.messages import MAX_CHOSEN, MAX_SLOT
from epochal.tcm import (
    AlterTable,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropTable,
    GrantReconcileLease,
    Register,
    RegisterReconciler,
    ReplicationParams,
    TokenRange,
)
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.paxos import message_to_proto
from epochal.wire.v1 import cms_pb2
from epochal.wire.v1 import replica_pb2 as pb

from .fuzz_messages import PARTITIONS, Context
from .fuzz_peer_seeds import peer_seeds


def seeds(
    metadata: Any, context: Context, rng: random.Random
) -> dict[str, list[Callable[[str], Message]]]:
    """Realistic requests per method path, each built for a tag."""

    def partition() -> int:
        return rng.randrange(PARTITIONS)

    def mutation(tag: str) -> pb.Mutation:
        return pb.Mutation(
            keyspace="fuzz",
            table="ft",
            partition_key=[pb.Value(int=partition())],
            rows=[
                pb.RowWrite(
                    clustering=[pb.Value(int=rng.choice([0, 1, 2**63 - 1, -(2**63)]))],
                    cells=[
                        pb.CellWrite(column="v", value=pb.Value(text=tag)),
                        pb.CellWrite(column="n", value=pb.Value(int=rng.randrange(-5, 5))),
                        pb.CellWrite(column="b", value=pb.Value(blob=b"\x00\x01")),
                        pb.CellWrite(column="u", value=pb.Value(uuid=uuid.uuid4().bytes)),
                    ],
                )
                for _ in range(rng.randint(1, 2))
            ],
        )

    def mutation_id() -> pb.MutationId:
        now_ms = int(time.time() * 1000)
        return pb.MutationId(
            node=rng.randint(1, 3),
            log=rng.randint(1, 3),
            sequence=rng.randint(1, 50),
            hlc=make_hlc(now_ms - rng.randrange(10_000)),
        )

    def write(tag: str) -> pb.WriteRequest:
        request = pb.WriteRequest(
            mutation=mutation(tag), consistency=pb.QUORUM, epoch=context.epoch
        )
        if rng.random() < 0.3:
            request.mutation_id.CopyFrom(mutation_id())
        return request

    def read(_: str) -> pb.ReadRequest:
        return pb.ReadRequest(
            keyspace="fuzz",
            table="ft",
            partition_key=[pb.Value(int=partition())],
            consistency=pb.QUORUM,
            epoch=context.epoch,
        )

    def session(tag: str) -> pb.SessionRequests:
        return pb.SessionRequests(
            requests=[
                pb.SessionRequest(id=1, write=write(tag)),
                pb.SessionRequest(id=2, read=read(tag)),
            ]
        )

    def commit(tag: str) -> cms_pb2.CommitRequest:
        transformation = rng.choice(
            [
                CreateTable(
                    keyspace="fuzz",
                    name=f"t_{tag}",
                    columns=(Column("k", ColumnType.TEXT),),
                    partition_key=("k",),
                ),
                AlterTable(keyspace="fuzz", name="ft", add_columns=(Column("z", ColumnType.INT),)),
                DropTable(keyspace="fuzz", name="missing"),
                CreateKeyspace(name=f"k_{tag}", replication=ReplicationParams.simple(1)),
                Register(
                    address=f"127.0.0.1:{rng.randrange(1, 65535)}",
                    datacenter="dc1",
                    rack="r1",
                    version=rng.choice(["1", "1.0.0", "0.1.0"]),
                ),
                GrantReconcileLease(
                    keyspace="fuzz",
                    range=TokenRange(rng.randrange(-1000, 0), rng.randrange(0, 1000)),
                    holder=rng.choice(["reconciler-1", "reconciler-2", ""]),
                    replaces=rng.choice([0, context.epoch]),
                ),
                RegisterReconciler(
                    reconciler_id=rng.choice(["reconciler-1", "reconciler-2"]),
                    address=rng.choice(["", f"127.0.0.1:{rng.randrange(1, 65535)}"]),
                ),
            ]
        )
        return cms_pb2.CommitRequest(
            transformation=transformation_to_proto(transformation),
            entry_id=f"{tag}-{uuid.uuid4().hex[:8]}",
        )

    def step(_: str) -> cms_pb2.StepRequest:
        """A Paxos message between real members, with ballots a member may hold now and slots
        near the log's end or as far out as a message may name (a forged Promise or Accept
        far out once made a member allocate without bound)."""
        src, dst = rng.choice(context.member_ids), rng.choice(context.member_ids)
        # Rounds a member may hold now, and far ahead (the group must elect above it after).
        # Not the very end of the range: a forged round there leaves no higher one to elect
        # with, a gap only authenticated peers close (epochal.paxos.ballot).
        far = rng.choice([1 << 20, 1 << 40, MAX_ROUND - (1 << 20)])
        ballot = Ballot(rng.choice([0, 1, 2, 3, far]), rng.choice(context.member_ids))
        slot = rng.choice([rng.randint(1, 50), 2**40, MAX_SLOT])
        chosen = rng.choice([0, rng.randint(0, 50), 2**40, MAX_CHOSEN])
        record = AcceptedSlot(slot=slot, ballot=ballot, value=(b"\x00",))
        # (A promise's chosen prefix stays small: a forged far one is believed by a candidate
        # — it cannot tell it from a real one without authenticated peers — and stalls the log.)
        promised = rng.randint(0, 50)
        message = rng.choice(
            [
                Prepare(src=src, dst=dst, ballot=ballot, from_slot=rng.randint(1, 50)),
                Promise(src=src, dst=dst, ballot=ballot, accepted=(record,), chosen_up_to=promised),
                CatchUpRequest(src=src, dst=dst, from_slot=slot),
                CatchUpReply(
                    src=src,
                    dst=dst,
                    chosen=(ChosenSlot(slot=slot, value=()),),
                    chosen_up_to=chosen,
                    compacted_up_to=rng.choice([0, chosen]),
                ),
                Accept(src=src, dst=dst, ballot=ballot, slot=slot, value=(), chosen_up_to=chosen),
                Accepted(src=src, dst=dst, ballot=ballot, slot=slot),
                Commit(src=src, dst=dst, ballot=ballot, chosen_up_to=chosen),
                Nack(src=src, dst=dst, ballot=ballot, promised=Ballot(rng.randint(0, 9), src)),
            ]
        )
        return cms_pb2.StepRequest(messages=[message_to_proto(message)])

    def forward(tag: str) -> cms_pb2.ForwardRequest:
        request = commit(tag)
        return cms_pb2.ForwardRequest(
            batch_id=rng.randrange(100),
            member_id=rng.choice(context.member_ids),
            items=[
                cms_pb2.ProposalItem(
                    transformation=request.transformation.SerializeToString(),
                    entry_id=request.entry_id,
                    digest=rng.randrange(2**64),
                )
            ],
        )

    epoch = context.epoch
    return {
        **peer_seeds(metadata, context, rng),
        "/epochal.v1.Replica/Write": [write],
        "/epochal.v1.Replica/Read": [read],
        "/epochal.v1.Replica/Session": [session],
        "/epochal.v1.Replica/FetchLog": [lambda _: cms_pb2.FetchLogRequest(since_epoch=epoch - 2)],
        "/epochal.v1.Replica/AppliedEpochs": [
            lambda _: pb.AppliedEpochsRequest(since_epoch=epoch - 2)
        ],
        "/epochal.v1.ReplicaPeer/AwaitEpoch": [
            lambda _: pb.AwaitEpochRequest(epoch=epoch, timeout_ms=200)
        ],
        "/epochal.v1.ReplicaPeer/PullRanges": [
            lambda _: pb.PullRangesRequest(
                epoch=epoch, sequence_node=rng.choice(context.node_ids), prepared_epoch=epoch
            )
        ],
        "/epochal.v1.ReplicaAdmin/Replace": [lambda _: pb.ReplaceRequest(replaced="node-2")],
        "/epochal.v1.ReplicaAdmin/Remove": [lambda _: pb.OperationRequest(node_id="node-2")],
        "/epochal.v1.ReplicaAdmin/Cleanup": [lambda _: pb.OperationRequest(epoch=epoch)],
        "/epochal.v1.ReplicaAdmin/Status": [
            lambda _: pb.OperationRequest(node_id=rng.choice(context.node_ids))
        ],
        "/epochal.v1.CMS/Commit": [commit],
        "/epochal.v1.CMS/FetchLog": [
            lambda _: cms_pb2.FetchLogRequest(since_epoch=epoch - 3, include_entry_ids=True)
        ],
        "/epochal.v1.CMS/Watch": [lambda _: cms_pb2.WatchRequest(since_epoch=epoch - 1)],
        "/epochal.v1.CMSPeer/Step": [step],
        "/epochal.v1.CMSPeer/Forward": [forward],
        "/grpc.health.v1.Health/Check": [lambda _: health_pb2.HealthCheckRequest(service="")],
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": [
            lambda _: reflection_pb2.ServerReflectionRequest(list_services="")
        ],
    }
