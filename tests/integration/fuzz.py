"""Fuzz every gRPC method of a running cluster (3 CMS members, 3 replicas) and check what came
back: no process exits, no call hangs, every refusal is a clear status (never UNKNOWN or
INTERNAL, always with a message), no refusal's words — status or in-band — are a Python
exception's or echo the input unbounded (``fuzz_answers``), and refused input changes neither
the metadata log nor the data.

Inputs come from ``fuzz_messages``: generated from each method's descriptor, realistic requests
mutated field by field, raw garbage frames, and streams cancelled or abandoned half way. Each
call goes to a random server of the kind that serves the method, over raw bytes (so garbage
reaches the server as it is), with mutual TLS and a certificate of a role allowed to call the
method (``epochal.wire.roles``; a commit: its transformation's kind), each allowed role in turn.
Then a pass with a wrong role: every method that some role may not call, called by such a
role, and a commit of every transformation kind by every role that may not commit it, must be
refused PERMISSION_DENIED (a client stream with no messages: the refusal comes before any).

Writes carry a tag in their value; after the run every partition
they could reach is read at ALL, and no tag of a refused write may be there. Commits carry
their entry id; no refused commit's id may be in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import message_factory, text_format
from google.protobuf.message import DecodeError

from epochal.client import AsyncClient, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.runtime.processes import tail
from epochal.wire.channels import channel as open_channel
from epochal.wire.roles import (
    ANY_CERTIFICATE,
    BY_KIND,
    COMMIT_KINDS,
    COMMIT_METHOD,
    EVERY_ROLE,
    METHODS,
    ROLES,
)
from epochal.wire.tls import TlsFiles
from epochal.wire.v1 import cms_pb2, metadata_pb2
from epochal.wire.v1 import replica_pb2 as pb
from tests.harness import start_ring

from .fuzz_answers import problems
from .fuzz_messages import PARTITIONS, Context, Generator, Input, Method, methods
from .fuzz_seeds import seeds

CALL_TIMEOUT_S = 8.0
# A Watch from the current epoch waits for the next one, which no fuzz input commits for a
# while: its call ends sooner (its refusals of bad input are immediate all the same).
WATCH_TIMEOUT_S = 2.0
SEEDED_SHARE = 0.5  # of the inputs: a method with realistic requests (fuzz_seeds)
MAX_SERVER_RSS_MB = 1500
_ENDED = "Internal error from Core"
ENDED_BEFORE_WRITE = "the server ended the call before a later write (its status is lost)"
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
    leaks: Counter[str] = field(default_factory=Counter)  # method: kind (fuzz_answers)
    waited: Counter[str] = field(default_factory=Counter)  # calls that ran to the timeout
    exits: int = 0
    refused_tags: set[str] = field(default_factory=set)
    refused_entry_ids: set[str] = field(default_factory=set)
    maybe_entry_ids: set[str] = field(default_factory=set)  # not refused: may be committed
    tags_checked: int = 0
    data_check: str = "done"
    seconds: float = 0.0
    by_role: Counter[str] = field(default_factory=Counter)
    wrong_role_calls: int = 0


async def run_fuzz(
    cluster: LocalCluster, count: int, seed: int, certificates: dict[str, TlsFiles]
) -> FuzzResult:
    """``certificates``: one per role (``ROLES``), of the cluster's CA."""
    await start_ring(cluster, num_tokens=4)
    async with AsyncClient(cluster.addresses) as client:
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
    generator = Generator(rng, context, seeds(metadata, context, rng))
    result = FuzzResult()
    started = time.monotonic()
    all_methods = methods()
    seeded = [m for m in all_methods if m.path in generator.seeds]
    channels = {
        (process.address, role): open_channel(process.address, certificates[role])
        for process in [*cluster.cms.members.values(), *cluster.nodes.values()]
        for role in ROLES
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
            if number < len(all_methods):
                method = all_methods[number]
            else:  # methods with realistic requests more often: those reach deeper
                method = rng.choice(seeded if rng.random() < SEEDED_SHARE else all_methods)
            await queue.put(generator.input_for(method, number))
            result.inputs += 1
            if number % 250 == 249:
                _check_alive(cluster, result)
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)
        _check_alive(cluster, result)
        await _wrong_roles(cluster, channels, generator, all_methods, count, result)
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


def _commit_kind(frame: bytes) -> str | None:
    with contextlib.suppress(DecodeError):
        return cms_pb2.CommitRequest.FromString(frame).transformation.WhichOneof("kind")
    return None


def allowed_roles(item: Input) -> list[str]:
    """The roles that may send ``item`` (a commit that names no kind: any role may try)."""
    needed = METHODS[item.method.path]
    if needed == BY_KIND:
        kind = _commit_kind(item.frames[0]) if item.frames else None
        needed = COMMIT_KINDS.get(kind, EVERY_ROLE) if kind else EVERY_ROLE
    if needed == ANY_CERTIFICATE:
        needed = EVERY_ROLE
    return sorted(needed) or sorted(EVERY_ROLE)  # a kind no one commits: refused whoever sends


def _address(cluster: LocalCluster, item: Input) -> str:
    targets = {
        "cms": [m.address for m in cluster.cms.members.values()],
        "replica": [r.address for r in cluster.nodes.values()],
    }
    pool = targets.get(item.method.targets) or [*targets["cms"], *targets["replica"]]
    return pool[item.target % len(pool)]


async def _one(
    cluster: LocalCluster,
    channels: dict[tuple[str, str], grpc.aio.Channel],
    item: Input,
    result: FuzzResult,
) -> None:
    method = item.method
    address = _address(cluster, item)
    roles = allowed_roles(item)
    role = roles[(item.target // 7) % len(roles)]  # each allowed role in turn
    result.by_role[role] += 1
    started = time.monotonic()
    code, details, replies = await _call(channels[(address, role)], item)
    elapsed = time.monotonic() - started
    result.by_code["ENDED_BEFORE_WRITE" if details == ENDED_BEFORE_WRITE else code.name] += 1
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        result.waited[method.name] += 1
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
            f"{where}: no answer within {_timeout_s(method)} s (hung); sent {_shown(item)}"
        )
    if item.kind in ("cancelled", "abandoned") and elapsed > CALL_TIMEOUT_S:
        result.violations.append(f"{where}: cancelling took {elapsed:.1f} s")
    for kind, problem in problems(code, details, method.response, replies):
        result.leaks[f"{method.path}: {kind}"] += 1
        result.violations.append(f"{where}: {problem}; sent {_shown(item)}")
    _note_refusals(item, code, replies, result)


WRONG_ROLE_INPUTS = 3  # per method and wrong role


async def _wrong_roles(
    cluster: LocalCluster,
    channels: dict[tuple[str, str], grpc.aio.Channel],
    generator: Generator,
    all_methods: list[Method],
    number: int,
    result: FuzzResult,
) -> None:
    """Every method called by every role that may not call it, and a commit of every kind by
    every role that may not commit it: each refused PERMISSION_DENIED (whatever the input)."""
    items: list[tuple[Input, str]] = []
    for method in all_methods:
        needed = METHODS[method.path]
        if needed in (BY_KIND, ANY_CERTIFICATE):
            continue
        if method.service == "epochal.v1.ReplicaTesting" and not cluster.test_hooks:
            continue  # not served here: UNIMPLEMENTED whoever calls
        for role in sorted(EVERY_ROLE - needed):
            for _ in range(WRONG_ROLE_INPUTS):
                number += 1
                item = generator.input_for(method, number)
                frames = () if method.client_streaming else item.frames[:1]
                items.append((replace(item, frames=frames, cancel_after=None), role))
    commit = next(m for m in all_methods if m.path == COMMIT_METHOD)
    for kind, needed in COMMIT_KINDS.items():
        transformation = metadata_pb2.Transformation()
        getattr(transformation, kind).SetInParent()
        request = cms_pb2.CommitRequest(transformation=transformation, entry_id=f"wrong-{kind}")
        for role in sorted(EVERY_ROLE - needed):
            items.append((Input(commit, "wrong-role", (request.SerializeToString(),)), role))
    for item, role in items:
        address = _address(cluster, item)
        code, details, replies = await _call(channels[(address, role)], item)
        result.wrong_role_calls += 1
        result.by_code[code.name] += 1
        if code is not grpc.StatusCode.PERMISSION_DENIED:
            result.violations.append(
                f"{item.method.path} by a {role} certificate ({item.kind}) to {address}: "
                f"{code.name} {details!r}, not PERMISSION_DENIED; sent {_shown(item)}"
            )
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
                call = channel.unary_stream(method.path)(frame, timeout=_timeout_s(method))
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


_LONG_RUN = re.compile(r"(.)\1{31,}")


def _abridged(run: re.Match[str]) -> str:
    return f"{run.group(1) * 4}…({len(run.group(0))} times)"


def _timeout_s(method: Method) -> float:
    return WATCH_TIMEOUT_S if method.name == "Watch" else CALL_TIMEOUT_S


def _shown(item: Input) -> str:
    """The frames, parsed where they parse, shortened: enough to replay the input by hand."""
    message_class = message_factory.GetMessageClass(item.method.request)
    shown = []
    for frame in item.frames:
        try:
            parsed = message_class.FromString(frame)
            text = text_format.MessageToString(parsed, as_one_line=True, as_utf8=True)
        except DecodeError:
            text = f"garbage {frame[:16].hex()}"
        shown.append(_LONG_RUN.sub(_abridged, text)[:600])
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
    """Whether every request of a stream that could store something was refused: on a peer
    stream, an apply that was not OK and a delivery that stored none (one that stored some of
    its mutations answers the first refusal); reads and fetches store nothing."""
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
                    if body == "apply":
                        outcomes.append(reply.apply.outcome == pb.OK)
                    elif body == "deliver":
                        delivered = reply.deliver
                        outcomes.append(delivered.outcome == pb.OK or delivered.stored > 0)
                    elif body == "malformed":
                        outcomes.append(False)
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
            logged.update(e.entry_id for e in page.records)
            if not page.records:
                break
            since = page.records[-1].epoch
    for entry_id in sorted((result.refused_entry_ids - result.maybe_entry_ids) & logged)[:10]:
        result.violations.append(f"refused commit {entry_id!r} is in the metadata log")
    async with AsyncClient(cluster.addresses, timeout_s=10.0) as client:
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


async def _check_data(client: AsyncClient, result: FuzzResult) -> None:
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
