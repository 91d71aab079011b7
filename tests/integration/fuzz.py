"""Fuzz every gRPC method of a running cluster (3 CMS members, 3 replicas) and check what came
back: no process exits, no call hangs, every refusal is a clear status (never UNKNOWN or
INTERNAL, always with a message), and refused input changes neither the metadata log nor the
data.

Inputs come from ``fuzz_messages``: generated from each method's descriptor, realistic requests
mutated field by field, raw garbage frames, and streams cancelled or abandoned half way. Each
call goes to a random server of the kind that serves the method, over raw bytes (so garbage
reaches the server as it is). Writes carry a tag in their value; after the run every partition
they could reach is read at ALL, and no tag of a refused write may be there. Commits carry
their entry id; no refused commit's id may be in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import message_factory, text_format
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from epochal.client import Client, Consistency
from epochal.cms_client import CMSClient
from epochal.mtrack import MutationId, make_hlc
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
from epochal.paxos.ballot import MAX_ROUND, MAX_ROUND_STEP
from epochal.paxos.messages import MAX_CHOSEN, MAX_SLOT
from epochal.processes import tail
from epochal.replica.codec import mutation_to_proto
from epochal.replica.local import LocalCluster
from epochal.replica.mutations import CellDraft, RowDraft, WriteDraft, prepare_write
from epochal.tcm import (
    AlterTable,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropTable,
    Register,
    ReplicationParams,
)
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.paxos import message_to_proto
from epochal.wire.v1 import cms_pb2
from epochal.wire.v1 import replica_pb2 as pb

from .fuzz_messages import Context, Generator, Input, methods

CALL_TIMEOUT_S = 8.0
MAX_SERVER_RSS_MB = 1500
_ENDED = "Internal error from Core"
ENDED_BEFORE_WRITE = "the server ended the call before a later write (its status is lost)"
PARTITIONS = 16
# Methods whose answer may legitimately take longer than a call's timeout for a well-formed
# request (they wait for something, or run an operation); garbage is refused at once even there.
MAY_WAIT = {
    "Watch",
    "BootstrapAbort",
    "DecommissionAbort",
    "AwaitEpoch",
    "StreamRange",
    "PullRanges",
    "Bootstrap",
    "BootstrapResume",
    "Decommission",
    "Remove",
    "Replace",
    "Move",
    "Resume",
    "Cancel",
    "ServerReflectionInfo",
}
# Definite refusals: the server decided no, so nothing of the request may have been stored.
REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
}
UNCLEAR = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
FT_COLUMNS = {
    "p": "int",
    "c": "bigint",
    "v": "text",
    "n": "bigint",
    "b": "blob",
    "d": "double",
    "u": "uuid",
    "t": "timestamp",
    "f": "boolean",
}


@dataclass
class FuzzResult:
    inputs: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    by_method: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    exits: int = 0
    refused_tags: set[str] = field(default_factory=set)
    refused_entry_ids: set[str] = field(default_factory=set)
    maybe_entry_ids: set[str] = field(default_factory=set)  # not refused: may be committed
    tags_checked: int = 0
    data_check: str = "done"
    seconds: float = 0.0


async def run_fuzz(cluster: LocalCluster, count: int, seed: int) -> FuzzResult:
    cluster.start()
    await cluster.wait_ready()
    await cluster.form_ring(num_tokens=4)
    async with Client(cluster.addresses) as client:
        await client.create_keyspace("fuzz", replication_factor=3, tracked=True)
        await client.create_table(
            "fuzz", "ft", FT_COLUMNS, partition_key=["p"], clustering_key=["c"]
        )
        await client.create_keyspace("plain", replication_factor=3)
        await client.create_table("plain", "pt", {"p": "text", "v": "text"}, partition_key=["p"])
        metadata = client.metadata
    await cluster.wait_for_epoch(metadata.epoch)
    context = Context(
        epoch=metadata.epoch,
        node_ids=sorted(metadata.nodes),
        member_ids=sorted(cluster.cms.members),
        table_ids=[t.id for ks in metadata.keyspaces.values() for t in ks.tables.values()],
    )
    rng = random.Random(seed)
    generator = Generator(rng, context, _seeds(metadata, context, rng))
    result = FuzzResult()
    started = time.monotonic()
    all_methods = methods()
    channels = {
        process.address: grpc.aio.insecure_channel(process.address)
        for process in [*cluster.cms.members.values(), *cluster.nodes.values()]
    }
    in_flight: dict[int, Input] = {}
    guard = asyncio.create_task(_guard_memory(cluster, in_flight, result))
    try:
        queue: asyncio.Queue[Input | None] = asyncio.Queue(maxsize=64)

        async def worker() -> None:
            while (item := await queue.get()) is not None:
                in_flight[id(item)] = item
                try:
                    await _one(cluster, channels, item, result)
                finally:
                    del in_flight[id(item)]

        workers = [asyncio.create_task(worker()) for _ in range(6)]
        for number in range(count):
            method = (
                all_methods[number % len(all_methods)]
                if number < len(all_methods)
                else (rng.choice(all_methods))
            )
            await queue.put(generator.input_for(method, number))
            result.inputs += 1
            if number % 250 == 249:
                _check_alive(cluster, result)
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)
        _check_alive(cluster, result)
        await _check_unchanged(cluster, result)
    finally:
        guard.cancel()
        for channel in channels.values():
            await channel.close(grace=None)
    result.seconds = time.monotonic() - started
    return result


async def _guard_memory(
    cluster: LocalCluster, in_flight: dict[int, Input], result: FuzzResult
) -> None:
    """A server whose memory passes MAX_SERVER_RSS_MB is a violation (input that makes a
    server allocate without bound takes the machine down): it is named with the inputs in
    flight, and SIGKILLed before the kernel's OOM killer picks something at random."""
    while True:
        await asyncio.sleep(0.2)
        for process in [*cluster.cms.members.values(), *cluster.nodes.values()]:
            if process.process is None or not process.running:
                continue
            rss_mb = _rss_mb(process.process.pid)
            if rss_mb > MAX_SERVER_RSS_MB:
                suspects = "; ".join(
                    f"{i.method.path} ({i.kind}): {_shown(i)[:400]}" for i in in_flight.values()
                )
                result.violations.append(
                    f"{process.name} grew to {rss_mb} MB; in flight: {suspects}"
                )
                process.kill()


def _rss_mb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) // 1024


# --------------------------------------------------------------------------- one call


async def _one(
    cluster: LocalCluster,
    channels: dict[str, grpc.aio.Channel],
    item: Input,
    result: FuzzResult,
) -> None:
    method = item.method
    targets = {
        "cms": [m.address for m in cluster.cms.members.values()],
        "replica": [r.address for r in cluster.nodes.values()],
    }
    pool = targets.get(method.targets) or [*targets["cms"], *targets["replica"]]
    address = pool[item.target % len(pool)]
    started = time.monotonic()
    code, details, replies = await _call(channels[address], item)
    elapsed = time.monotonic() - started
    result.by_code["ENDED_BEFORE_WRITE" if details == ENDED_BEFORE_WRITE else code.name] += 1
    result.by_method[method.path] += 1
    result.by_kind[item.kind] += 1
    where = f"{method.path} ({item.kind}) to {address}"
    if code in UNCLEAR:
        result.violations.append(f"{where}: {code.name} {details!r}")
    elif code is not grpc.StatusCode.OK and code is not grpc.StatusCode.CANCELLED and not details:
        result.violations.append(f"{where}: {code.name} without a message")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED and (
        method.name not in MAY_WAIT or item.kind == "garbage"
    ):
        result.violations.append(
            f"{where}: no answer within {CALL_TIMEOUT_S} s (hung); sent {_shown(item)}"
        )
    if item.kind in ("cancelled", "abandoned") and elapsed > CALL_TIMEOUT_S:
        result.violations.append(f"{where}: cancelling took {elapsed:.1f} s")
    _note_refusals(item, code, replies, result)


async def _call(channel: grpc.aio.Channel, item: Input) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """Send ``item``'s frames as raw bytes; (status, details, reply frames)."""
    method = item.method
    replies: list[bytes] = []
    call: Any
    try:
        if not method.client_streaming:
            frame = item.frames[0]
            if method.server_streaming:
                call = channel.unary_stream(method.path)(frame, timeout=CALL_TIMEOUT_S)
                async for reply in call:
                    replies.append(reply)
                    if method.name in ("Watch",) or len(replies) >= 8:
                        call.cancel()
                        break
            else:
                replies.append(
                    await channel.unary_unary(method.path)(frame, timeout=CALL_TIMEOUT_S)
                )
            return grpc.StatusCode.OK, "", replies
        call = (
            channel.stream_stream(method.path)
            if method.server_streaming
            else channel.stream_unary(method.path)
        )(timeout=CALL_TIMEOUT_S)
        frames = item.frames if item.cancel_after is None else item.frames[: item.cancel_after]
        for frame in frames:
            try:
                await call.write(frame)
            except asyncio.InvalidStateError:  # the call had ended: its status says how
                return await call.code(), await call.details() or "", replies
            except grpc.aio.AioRpcError as error:
                if error.code() is grpc.StatusCode.INTERNAL and _ENDED in (error.details() or ""):
                    # The server ended the call (an abort: this or an earlier frame was
                    # refused) before this write. grpcio's asyncio client then reports
                    # INTERNAL in place of the server's status (grpc/grpc#36066): not the
                    # server's answer, so not counted as one.
                    call.cancel()
                    return grpc.StatusCode.CANCELLED, ENDED_BEFORE_WRITE, replies
                raise
        if item.cancel_after is not None:
            if item.kind == "abandoned":
                await asyncio.sleep(0.02)
            call.cancel()
            return grpc.StatusCode.CANCELLED, "cancelled by the fuzzer", replies
        await call.done_writing()
        if method.server_streaming:
            while (reply := await call.read()) is not grpc.aio.EOF:
                replies.append(reply)
        else:
            replies.append(await call)
        return grpc.StatusCode.OK, "", replies
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or "", replies
    except asyncio.CancelledError:
        return grpc.StatusCode.CANCELLED, "cancelled by the fuzzer", replies


def _shown(item: Input) -> str:
    """The frames, parsed where they parse, shortened: enough to replay the input by hand."""
    message_class = message_factory.GetMessageClass(item.method.request)
    shown = []
    for frame in item.frames:
        try:
            text = text_format.MessageToString(message_class.FromString(frame), as_one_line=True)
        except DecodeError:
            text = f"garbage {frame[:16].hex()}"
        shown.append(text[:300])
    return " | ".join(shown)


# --------------------------------------------------------------------------- the oracle


def _note_refusals(
    item: Input, code: grpc.StatusCode, replies: list[bytes], result: FuzzResult
) -> None:
    """Remember the tags and entry ids of inputs the servers certainly refused (an entry id
    that another input may have committed, with any other answer, is not one)."""
    name = item.method.name
    refused = code in REFUSALS
    if name in ("Session", "Exchange") and code is grpc.StatusCode.OK:
        refused = _all_refused_in_band(name, replies)
    if refused and name in ("Write", "Session", "Exchange"):
        result.refused_tags.add(item.tag)
    if name == "Commit" and item.method.service == "epochal.v1.CMS":
        for frame in item.frames:
            with contextlib.suppress(DecodeError):
                entry_id = cms_pb2.CommitRequest.FromString(frame).entry_id
                if entry_id:
                    (result.refused_entry_ids if refused else result.maybe_entry_ids).add(entry_id)


def _all_refused_in_band(name: str, replies: list[bytes]) -> bool:
    outcomes = []
    try:
        for frame in replies:
            if name == "Session":
                outcomes += [
                    r.WhichOneof("body") != "failure"
                    for r in pb.SessionReplies.FromString(frame).replies
                ]
            else:
                for reply in pb.PeerReplies.FromString(frame).replies:
                    body = reply.WhichOneof("body")
                    outcomes.append(body == "apply" and reply.apply.outcome == pb.OK)
    except DecodeError:
        return False
    return bool(outcomes) and not any(outcomes)


def _check_alive(cluster: LocalCluster, result: FuzzResult) -> None:
    processes = [*cluster.cms.members.values(), *cluster.nodes.values()]
    for process in processes:
        if process.process is not None and not process.running:
            result.exits += 1
            result.violations.append(
                f"{process.name} exited with status {process.process.returncode}; log:\n"
                f"{tail(process.log_path, 30)}"
            )
            process.process = None  # counted once; the run goes on without it


async def _check_unchanged(cluster: LocalCluster, result: FuzzResult) -> None:
    """Refused commits are not in the log; refused writes are not in the data."""
    async with CMSClient(cluster.cms.addresses) as cms:
        logged: set[str] = set()
        since = 0
        while True:
            page = await cms.fetch_log(since, max_entries=1000)
            logged.update(e.entry_id for e in page.entries)
            if not page.entries:
                break
            since = page.entries[-1].epoch
    for entry_id in sorted((result.refused_entry_ids - result.maybe_entry_ids) & logged)[:10]:
        result.violations.append(f"refused commit {entry_id!r} is in the metadata log")
    async with Client(cluster.addresses, timeout_s=10.0) as client:
        ft = client.metadata.keyspaces.get("fuzz")
        if ft is not None and "ft" in ft.tables:
            await _check_data(client, result)
        else:  # a fuzzed DropTable or DropKeyspace went through: a legitimate commit
            result.data_check = "skipped: the fuzz dropped fuzz.ft"
        # The cluster still works, also after a leader change (forged ballots must not have
        # left the members unable to elect). The leader is restarted rather than left down:
        # a fuzzed reconfiguration may have left two voters, which need both.
        leader = await cluster.cms.leader()
        cluster.cms.stop(leader)
        cluster.cms.start(leader)
        await cluster.cms.wait_serving(leader)
        await client.create_keyspace("after", replication_factor=3, tracked=True)
        await client.create_table("after", "t", {"k": "int", "v": "text"}, partition_key=["k"])
        await client.write("after", "t", {"k": 1, "v": "after"})
        rows = (await client.read("after", "t", {"k": 1})).rows
        if [r["v"] for r in rows] != ["after"]:
            result.violations.append(f"a write after the fuzz reads back as {rows}")


async def _check_data(client: Client, result: FuzzResult) -> None:
    """No row of fuzz.ft carries the tag of a write that was refused."""
    for partition in range(PARTITIONS):
        try:
            read = await client.read("fuzz", "ft", {"p": partition}, consistency=Consistency.ALL)
        except Exception as error:  # the data could not be checked: say so
            result.violations.append(f"final read of partition {partition} failed: {error}")
            continue
        for row in read.rows:
            tag = str(row.get("v") or "")
            result.tags_checked += 1
            if tag in result.refused_tags:
                result.violations.append(
                    f"a refused write's row is in the data: partition {partition}, {row}"
                )


# --------------------------------------------------------------------------- seeds


def _seeds(
    metadata: Any, context: Context, rng: random.Random
) -> dict[str, list[Callable[[str], Message]]]:
    """Realistic requests per method path, each built for a tag."""
    ft = metadata.keyspaces["fuzz"].tables["ft"]

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

    def stored(tag: str) -> pb.StoredMutation:
        draft = WriteDraft(
            keyspace="fuzz",
            table="ft",
            partition_key=(partition(),),
            rows=(
                RowDraft(
                    (rng.randrange(100),),
                    (CellDraft("v", "text", pb.Value(text=tag).SerializeToString()),),
                ),
            ),
        )
        prepared = prepare_write(
            metadata, draft, max_value_bytes=1 << 20, max_mutation_bytes=1 << 24
        )
        node = rng.randint(1, 3)
        identity = MutationId(
            node=node,
            log=rng.randint(1, 9),
            sequence=rng.randint(1, 10**6),
            hlc=make_hlc(int(time.time() * 1000)),
        )
        return mutation_to_proto(prepared.with_id(identity))

    def exchange(tag: str) -> pb.PeerRequests:
        body = stored(tag)
        return pb.PeerRequests(
            requests=[
                pb.PeerRequest(id=1, apply=pb.ApplyRequest(epoch=context.epoch, mutation=body)),
                pb.PeerRequest(
                    id=2,
                    read=pb.LocalReadRequest(
                        epoch=context.epoch,
                        keyspace="fuzz",
                        table_id=ft.id,
                        token=body.token,
                        partition_key=body.partition_key,
                        data=True,
                        summary=True,
                        sketch_logs=[pb.LogKey(node=1, log=1)],
                        sketch_cells=12,
                    ),
                ),
                pb.PeerRequest(
                    id=3, fetch=pb.FetchMutationsRequest(epoch=context.epoch, ids=[body.id])
                ),
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
        # Rounds a member may hold now, one far ahead but within what a member takes from a
        # peer (MAX_ROUND_STEP: the group must still elect after it), one past it, the end.
        far = rng.choice([MAX_ROUND_STEP // 2, MAX_ROUND_STEP * 2, MAX_ROUND])
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
        "/epochal.v1.Replica/Write": [write],
        "/epochal.v1.Replica/Read": [read],
        "/epochal.v1.Replica/Session": [session],
        "/epochal.v1.Replica/FetchLog": [lambda _: cms_pb2.FetchLogRequest(since_epoch=epoch - 2)],
        "/epochal.v1.ReplicaPeer/Exchange": [exchange],
        "/epochal.v1.ReplicaPeer/AwaitEpoch": [
            lambda _: pb.AwaitEpochRequest(epoch=epoch, timeout_ms=200)
        ],
        "/epochal.v1.ReplicaPeer/StreamRange": [
            lambda _: pb.StreamRangeRequest(
                epoch=epoch,
                receiver=rng.choice(context.node_ids),
                prepared_epoch=epoch,
                keyspace="fuzz",
                table_id=ft.id,
                left=-100,
                right=100,
                max_message_bytes=1024,
            )
        ],
        "/epochal.v1.ReplicaPeer/PullRanges": [
            lambda _: pb.PullRangesRequest(
                epoch=epoch, sequence_node=rng.choice(context.node_ids), prepared_epoch=epoch
            )
        ],
        "/epochal.v1.ReplicaAdmin/Replace": [lambda _: pb.ReplaceRequest(replaced="node-2")],
        "/epochal.v1.ReplicaAdmin/Remove": [lambda _: pb.OperationRequest(node_id="node-2")],
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
