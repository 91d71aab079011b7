"""How a coordinator reaches a replica: in-process for itself, over an Exchange stream for the
others.

Every call returns a future of a ``PeerReply`` at once (the coordinator waits on several). A
remote call that fails at the transport — the stream broke, no answer in time, the replica
could not parse it — settles with ``PeerFailed``: the coordinator tries another replica or
gives up.

Theory of operation of ``PeerStream``: one long-lived bidirectional ``Exchange`` stream per
replica. Requests queued while a batch is being written go together in the next batch; the
replica answers each by its id, in any order. A request waits at most its timeout (a timer,
not a task); when the stream breaks, every request on it fails at once, and the next call opens
a new stream. The number of requests in flight per replica is bounded.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from epochal.mtrack import LogDigests, MalformedSummary, MutationId, Sketch
from epochal.replica.channels import Channels
from epochal.replica.codec import bounds_to_proto, cell_to_proto, cells_from_proto, id_to_proto
from epochal.replica.local_replica import LocalReplica, Outcome, PartitionRead, PeerReply
from epochal.replica.model import Mutation
from epochal.replica.storage import CellRepair
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)

OUTCOMES = {
    pb.OK: Outcome.OK,
    pb.NOT_A_REPLICA: Outcome.NOT_A_REPLICA,
    pb.UNKNOWN_TABLE: Outcome.UNKNOWN_TABLE,
    pb.BEHIND: Outcome.BEHIND,
    pb.OVERLOADED: Outcome.OVERLOADED,
    pb.CLOCK_SKEW: Outcome.CLOCK_SKEW,
}
OUTCOME_NUMBERS = {v: k for k, v in OUTCOMES.items()}
MAX_IN_FLIGHT = 16_384
MAX_BATCH = 512


class PeerFailed(Exception):
    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"{node_id}: {reason}")
        self.node_id = node_id
        self.reason = reason


def _settled(reply: PeerReply) -> asyncio.Future[PeerReply]:
    future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
    future.set_result(reply)
    return future


class LocalHandle:
    """This node, called in-process."""

    def __init__(self, node_id: str, replica: LocalReplica) -> None:
        self.node_id = node_id
        self.replica = replica

    def apply(
        self, epoch: int, mutation: Mutation, stored: pb.StoredMutation, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        body = stored.SerializeToString()
        return self.replica.apply_soon(epoch, mutation, body, repair=False)

    def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        return self.replica.apply_soon(epoch, mutation, body, repair=True)

    def repair_cells(
        self, epoch: int, keyspace: str, repair: CellRepair, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(self.replica.apply_cells(epoch, repair, keyspace))

    def read(
        self,
        epoch: int,
        read: PartitionRead,
        *,
        data: bool,
        summary: bool,
        digest: bool,
        timeout_s: float,
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(
            self.replica.read(epoch, read, data=data, summary=summary, want_digest=digest)
        )

    def sketch(
        self,
        epoch: int,
        read: PartitionRead,
        logs: Sequence[tuple[int, int]],
        cells: int,
        *,
        timeout_s: float,
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(self.replica.sketch(epoch, read, logs, cells))

    def fetch(
        self, epoch: int, ids: Sequence[MutationId], *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(self.replica.fetch(epoch, ids))


class PeerStream:
    """The Exchange stream to one replica (see the module docstring)."""

    def __init__(self, node_id: str, stub: Any) -> None:
        self.node_id = node_id
        self._stub = stub
        self._ids = itertools.count(1)
        self._queue: list[pb.PeerRequest] = []
        self._waiting: dict[int, asyncio.Future[pb.PeerReply]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def call(self, timeout_s: float, **body: Any) -> asyncio.Future[pb.PeerReply]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[pb.PeerReply] = loop.create_future()
        if len(self._waiting) >= MAX_IN_FLIGHT:
            future.set_exception(
                PeerFailed(self.node_id, f"{MAX_IN_FLIGHT} requests already in flight")
            )
            return future
        request_id = next(self._ids)
        self._waiting[request_id] = future
        self._queue.append(pb.PeerRequest(id=request_id, **body))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        timer = loop.call_later(max(timeout_s, 0.001), self._expire, request_id, timeout_s)
        future.add_done_callback(lambda _: timer.cancel())
        return future

    def _expire(self, request_id: int, timeout_s: float) -> None:
        future = self._waiting.pop(request_id, None)
        if future is not None and not future.done():
            future.set_exception(PeerFailed(self.node_id, f"no answer within {timeout_s:.3f} s"))

    async def _run(self) -> None:
        call = self._stub.Exchange()
        reader = asyncio.get_running_loop().create_task(self._read(call))
        reason = "the stream ended"
        try:
            while not call.done():
                await self._wake.wait()
                self._wake.clear()
                while self._queue and not call.done():
                    batch = self._queue[:MAX_BATCH]
                    del self._queue[:MAX_BATCH]
                    await call.write(pb.PeerRequests(requests=batch))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            reason = _describe(error)
        finally:
            reader.cancel()
            call.cancel()
            self._fail_all(reason)

    async def _read(self, call: Any) -> None:
        try:
            async for replies in call:
                for reply in replies.replies:
                    future = self._waiting.pop(reply.id, None)
                    if future is not None and not future.done():
                        future.set_result(reply)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.debug("stream to %s broke: %s", self.node_id, _describe(error))
        self._wake.set()  # the writer sees the call is done, fails what waits, and ends

    def _fail_all(self, reason: str) -> None:
        waiting, self._waiting = self._waiting, {}
        self._queue.clear()
        for future in waiting.values():
            if not future.done():
                future.set_exception(PeerFailed(self.node_id, reason))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _describe(error: Exception) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details() or 'no details'}"
    return f"{type(error).__name__}: {error}"


class RemoteHandle:
    """Another replica, over its Exchange stream."""

    def __init__(self, node_id: str, address: str, channels: Channels) -> None:
        self.node_id = node_id
        self.address = address
        self.stream = PeerStream(node_id, channels.peer(address))

    def _call(
        self, timeout_s: float, convert: Callable[[pb.PeerReply], PeerReply], **body: Any
    ) -> asyncio.Future[PeerReply]:
        raw = self.stream.call(timeout_s, **body)
        future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()

        def settle(done: asyncio.Future[pb.PeerReply]) -> None:
            if future.done():
                return
            error = done.exception()
            if error is not None:
                future.set_exception(error)
                return
            reply = done.result()
            if reply.WhichOneof("body") == "malformed":
                future.set_exception(PeerFailed(self.node_id, f"refused: {reply.malformed}"))
                return
            try:
                future.set_result(convert(reply))
            except MalformedSummary as malformed:
                future.set_exception(
                    PeerFailed(self.node_id, f"sent a malformed summary: {malformed}")
                )

        raw.add_done_callback(settle)
        return future

    def apply(
        self, epoch: int, mutation: Mutation, stored: pb.StoredMutation, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = pb.ApplyRequest(epoch=epoch, mutation=stored)
        return self._call(timeout_s, _applied, apply=request)

    def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = pb.ApplyRequest(
            epoch=epoch, mutation=pb.StoredMutation.FromString(body), repair=True
        )
        return self._call(timeout_s, _applied, apply=request)

    def repair_cells(
        self, epoch: int, keyspace: str, repair: CellRepair, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = pb.ApplyRequest(
            epoch=epoch,
            repair=True,
            cell_repair=pb.CellRepair(
                keyspace=keyspace,
                table_id=repair.table_id,
                token=repair.token,
                partition_key=repair.partition_key,
                cells=[cell_to_proto(c) for c in repair.cells],
            ),
        )
        return self._call(timeout_s, _applied, apply=request)

    def read(
        self,
        epoch: int,
        read: PartitionRead,
        *,
        data: bool,
        summary: bool,
        digest: bool,
        timeout_s: float,
    ) -> asyncio.Future[PeerReply]:
        request = pb.LocalReadRequest(
            epoch=epoch,
            keyspace=read.keyspace,
            table_id=read.table_id,
            token=read.token,
            partition_key=read.partition_key,
            bounds=bounds_to_proto(read.bounds),
            data=data,
            summary=summary,
            digest=digest,
        )
        return self._call(timeout_s, _read, read=request)

    def sketch(
        self,
        epoch: int,
        read: PartitionRead,
        logs: Sequence[tuple[int, int]],
        cells: int,
        *,
        timeout_s: float,
    ) -> asyncio.Future[PeerReply]:
        request = pb.SketchRequest(
            epoch=epoch,
            keyspace=read.keyspace,
            table_id=read.table_id,
            token=read.token,
            partition_key=read.partition_key,
            logs=[pb.LogKey(node=n, log=g) for n, g in logs],
            cells=cells,
        )
        return self._call(timeout_s, _sketched, sketch=request)

    def fetch(
        self, epoch: int, ids: Sequence[MutationId], *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = pb.FetchMutationsRequest(epoch=epoch, ids=[id_to_proto(i) for i in ids])
        return self._call(timeout_s, _fetched, fetch=request)

    def close(self) -> None:
        self.stream.close()


def _outcome(response: Any) -> tuple[int, Outcome, str]:
    return response.epoch, OUTCOMES.get(response.outcome, Outcome.BEHIND), response.message


def _applied(reply: pb.PeerReply) -> PeerReply:
    return PeerReply(*_outcome(reply.apply))


def _read(reply: pb.PeerReply) -> PeerReply:
    response = reply.read
    return PeerReply(
        *_outcome(response),
        cells=tuple(cells_from_proto(response.cells)),
        summary=LogDigests.decode(response.summary) if response.summary else None,
        digest=response.digest,
    )


def _sketched(reply: pb.PeerReply) -> PeerReply:
    response = reply.sketch
    return PeerReply(
        *_outcome(response),
        sketch=Sketch.decode(response.sketch) if response.sketch else None,
    )


def _fetched(reply: pb.PeerReply) -> PeerReply:
    response = reply.fetch
    return PeerReply(
        *_outcome(response),
        bodies=tuple(m.SerializeToString() for m in response.mutations),
    )


ReplicaHandle = LocalHandle | RemoteHandle
