"""How a coordinator reaches a replica: in-process for itself, over ReplicaPeer for the others.

Both kinds answer ``PeerReply``; a remote call that fails at the transport raises
``PeerFailed`` (the coordinator tries another replica or gives up).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from epochal.mtrack import LogDigests, MalformedSummary, MutationId, Sketch
from epochal.replica.channels import Channels
from epochal.replica.codec import bounds_to_proto, cell_to_proto, cells_from_proto, id_to_proto
from epochal.replica.local_replica import LocalReplica, Outcome, PartitionRead, PeerReply
from epochal.replica.model import Mutation
from epochal.replica.storage import CellRepair
from epochal.wire.v1 import replica_pb2 as pb

OUTCOMES = {
    pb.OK: Outcome.OK,
    pb.NOT_A_REPLICA: Outcome.NOT_A_REPLICA,
    pb.UNKNOWN_TABLE: Outcome.UNKNOWN_TABLE,
    pb.BEHIND: Outcome.BEHIND,
    pb.OVERLOADED: Outcome.OVERLOADED,
    pb.CLOCK_SKEW: Outcome.CLOCK_SKEW,
}
OUTCOME_NUMBERS = {v: k for k, v in OUTCOMES.items()}


class PeerFailed(Exception):
    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"{node_id}: {reason}")
        self.node_id = node_id
        self.reason = reason


class LocalHandle:
    """This node, called in-process."""

    def __init__(self, node_id: str, replica: LocalReplica) -> None:
        self.node_id = node_id
        self.replica = replica

    async def apply(
        self, epoch: int, mutation: Mutation, stored: pb.StoredMutation, *, timeout_s: float
    ) -> PeerReply:
        body = stored.SerializeToString()
        return await self.replica.apply(epoch, mutation, body, repair=False)

    async def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> PeerReply:
        return await self.replica.apply(epoch, mutation, body, repair=True)

    async def repair_cells(
        self, epoch: int, keyspace: str, repair: CellRepair, *, timeout_s: float
    ) -> PeerReply:
        return await self.replica.apply_cells(epoch, repair, keyspace)

    async def read(
        self,
        epoch: int,
        read: PartitionRead,
        *,
        data: bool,
        summary: bool,
        digest: bool,
        timeout_s: float,
    ) -> PeerReply:
        return await self.replica.read(epoch, read, data=data, summary=summary, want_digest=digest)

    async def sketch(
        self,
        epoch: int,
        read: PartitionRead,
        logs: Sequence[tuple[int, int]],
        cells: int,
        *,
        timeout_s: float,
    ) -> PeerReply:
        return await self.replica.sketch(epoch, read, logs, cells)

    async def fetch(self, epoch: int, ids: Sequence[MutationId], *, timeout_s: float) -> PeerReply:
        return await self.replica.fetch(epoch, ids)


class RemoteHandle:
    """Another replica, over its ReplicaPeer service."""

    def __init__(self, node_id: str, address: str, channels: Channels) -> None:
        self.node_id = node_id
        self.address = address
        self.stub = channels.peer(address)

    async def _call(self, method: object, request: object, timeout_s: float) -> object:
        try:
            return await method(request, timeout=max(timeout_s, 0.001))  # type: ignore[operator]
        except grpc.aio.AioRpcError as error:
            raise PeerFailed(
                self.node_id, f"{error.code().name}: {error.details() or 'no details'}"
            ) from None

    async def apply(
        self, epoch: int, mutation: Mutation, stored: pb.StoredMutation, *, timeout_s: float
    ) -> PeerReply:
        request = pb.ApplyRequest(epoch=epoch, mutation=stored)
        return _reply(await self._call(self.stub.Apply, request, timeout_s))

    async def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> PeerReply:
        request = pb.ApplyRequest(
            epoch=epoch, mutation=pb.StoredMutation.FromString(body), repair=True
        )
        return _reply(await self._call(self.stub.Apply, request, timeout_s))

    async def repair_cells(
        self, epoch: int, keyspace: str, repair: CellRepair, *, timeout_s: float
    ) -> PeerReply:
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
        return _reply(await self._call(self.stub.Apply, request, timeout_s))

    async def read(
        self,
        epoch: int,
        read: PartitionRead,
        *,
        data: bool,
        summary: bool,
        digest: bool,
        timeout_s: float,
    ) -> PeerReply:
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
        response = await self._call(self.stub.ReadLocal, request, timeout_s)
        try:
            digests = LogDigests.decode(response.summary) if response.summary else None  # type: ignore[attr-defined]
        except MalformedSummary as error:
            raise PeerFailed(self.node_id, f"sent a malformed summary: {error}") from None
        return PeerReply(
            response.epoch,  # type: ignore[attr-defined]
            OUTCOMES.get(response.outcome, Outcome.BEHIND),  # type: ignore[attr-defined]
            response.message,  # type: ignore[attr-defined]
            cells=tuple(cells_from_proto(response.cells)),  # type: ignore[attr-defined]
            summary=digests,
            digest=response.digest,  # type: ignore[attr-defined]
        )

    async def sketch(
        self,
        epoch: int,
        read: PartitionRead,
        logs: Sequence[tuple[int, int]],
        cells: int,
        *,
        timeout_s: float,
    ) -> PeerReply:
        request = pb.SketchRequest(
            epoch=epoch,
            keyspace=read.keyspace,
            table_id=read.table_id,
            token=read.token,
            partition_key=read.partition_key,
            logs=[pb.LogKey(node=n, log=g) for n, g in logs],
            cells=cells,
        )
        response = await self._call(self.stub.SketchLogs, request, timeout_s)
        try:
            sketch = Sketch.decode(response.sketch) if response.sketch else None  # type: ignore[attr-defined]
        except MalformedSummary as error:
            raise PeerFailed(self.node_id, f"sent a malformed sketch: {error}") from None
        return PeerReply(
            response.epoch,  # type: ignore[attr-defined]
            OUTCOMES.get(response.outcome, Outcome.BEHIND),  # type: ignore[attr-defined]
            response.message,  # type: ignore[attr-defined]
            sketch=sketch,
        )

    async def fetch(self, epoch: int, ids: Sequence[MutationId], *, timeout_s: float) -> PeerReply:
        request = pb.FetchMutationsRequest(epoch=epoch, ids=[id_to_proto(i) for i in ids])
        response = await self._call(self.stub.FetchMutations, request, timeout_s)
        return PeerReply(
            response.epoch,  # type: ignore[attr-defined]
            OUTCOMES.get(response.outcome, Outcome.BEHIND),  # type: ignore[attr-defined]
            response.message,  # type: ignore[attr-defined]
            bodies=tuple(m.SerializeToString() for m in response.mutations),  # type: ignore[attr-defined]
        )


def _reply(response: object) -> PeerReply:
    return PeerReply(
        response.epoch,  # type: ignore[attr-defined]
        OUTCOMES.get(response.outcome, Outcome.BEHIND),  # type: ignore[attr-defined]
        response.message,  # type: ignore[attr-defined]
    )


ReplicaHandle = LocalHandle | RemoteHandle
