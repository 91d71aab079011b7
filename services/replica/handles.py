"""How a coordinator reaches a replica: in-process for itself, over an Exchange stream for the
others.

Every call returns a future of a ``PeerReply`` at once (the coordinator waits on several). A
remote call that fails at the transport — the stream broke, no answer in time, the replica
could not parse it — settles with ``PeerFailed``: the coordinator tries another replica or
gives up.

Each remote replica is reached over one long-lived ``Exchange`` stream
(``epochal.wire.multiplex.Multiplexer``): requests batched, answered by id, bounded in flight.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from epochal.mtrack import LogDigests, MalformedSummary, MutationId, Sketch
from epochal.replica.codec import bounds_to_proto, cell_to_proto, cells_from_proto, id_to_proto
from epochal.replica.local_replica import LocalReplica, Outcome, PartitionRead, PeerReply
from epochal.replica.model import Mutation
from epochal.replica.storage import CellRepair
from epochal.wire.channels import Channels
from epochal.wire.multiplex import Multiplexer
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)

OUTCOMES = {
    pb.OK: Outcome.OK,
    pb.NOT_A_REPLICA: Outcome.NOT_A_REPLICA,
    pb.UNKNOWN_TABLE: Outcome.UNKNOWN_TABLE,
    pb.BEHIND: Outcome.BEHIND,
    pb.OVERLOADED: Outcome.OVERLOADED,
    pb.CLOCK_SKEW: Outcome.CLOCK_SKEW,
    pb.TOO_LARGE: Outcome.TOO_LARGE,
    pb.MALFORMED: Outcome.MALFORMED,
}
OUTCOME_NUMBERS = {v: k for k, v in OUTCOMES.items()}
MAX_IN_FLIGHT = 16_384


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
        return self.replica.apply_soon(epoch, mutation, body, repair=False, prepared=True)

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
        sketch_logs: Sequence[tuple[int, int]] = (),
        sketch_cells: int = 0,
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(
            self.replica.read(
                epoch,
                read,
                data=data,
                summary=summary,
                want_digest=digest,
                sketch_logs=sketch_logs,
                sketch_cells=sketch_cells,
            )
        )

    def fetch(
        self, epoch: int, ids: Sequence[MutationId], *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(self.replica.fetch(epoch, ids))


class RemoteHandle:
    """Another replica, over its Exchange stream."""

    def __init__(self, node_id: str, address: str, channels: Channels) -> None:
        self.node_id = node_id
        self.address = address
        stub = channels.peer(address)
        self.stream = Multiplexer(
            stub.Exchange,
            lambda requests: pb.PeerRequests(requests=requests),
            max_in_flight=MAX_IN_FLIGHT,
            name=node_id,
            failure=lambda reason, _: PeerFailed(node_id, reason),
        )

    def _call(
        self, timeout_s: float, convert: Callable[[pb.PeerReply], PeerReply], **body: Any
    ) -> asyncio.Future[PeerReply]:
        return self.stream.call(
            pb.PeerRequest(**body), timeout_s, functools.partial(self._checked, convert)
        )

    def _checked(
        self, convert: Callable[[pb.PeerReply], PeerReply], reply: pb.PeerReply
    ) -> PeerReply:
        if reply.WhichOneof("body") == "malformed":
            raise PeerFailed(self.node_id, f"refused: {reply.malformed}")
        try:
            return convert(reply)
        except MalformedSummary as malformed:
            raise PeerFailed(self.node_id, f"sent a malformed summary: {malformed}") from None

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
        sketch_logs: Sequence[tuple[int, int]] = (),
        sketch_cells: int = 0,
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
            sketch_logs=[pb.LogKey(node=n, log=g) for n, g in sketch_logs],
            sketch_cells=sketch_cells,
        )
        return self._call(timeout_s, _read, read=request)

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
        sketch=Sketch.decode(response.sketch) if response.sketch else None,
    )


def _fetched(reply: pb.PeerReply) -> PeerReply:
    response = reply.fetch
    return PeerReply(
        *_outcome(response),
        bodies=tuple(m.SerializeToString() for m in response.mutations),
        examined=response.examined,
    )


ReplicaHandle = LocalHandle | RemoteHandle
