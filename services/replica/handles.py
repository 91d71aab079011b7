"""How a coordinator reaches a replica: in-process for itself, over an Exchange stream for the
others.

Every call returns a future of a ``PeerReply`` at once (the coordinator waits on several). A
remote call that fails at the transport — the stream broke, no answer in time, the replica
could not parse it — settles with ``PeerFailed``: the coordinator tries another replica or
gives up.

Each remote replica is reached over one long-lived ``Exchange`` stream
(``epochal.wire.multiplex.Multiplexer``): requests batched, answered by id, bounded in flight.
Handles work on domain values; ``epochal.replica.exchange_codec`` turns them into the stream's
messages and back. A mutation is passed as the bytes it is stored as (``body``), encoded once
by the coordinator for every replica.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

from epochal.mtrack import MutationId
from epochal.replica import exchange_codec as codec
from epochal.replica.data_store import CellRepair
from epochal.replica.local_replica import LocalReplica, PartitionRead, PeerReply
from epochal.replica.model import Mutation
from epochal.replica.reachability import PeerReach
from epochal.wire.channels import Channels
from epochal.wire.multiplex import Multiplexer

MAX_IN_FLIGHT = 16_384


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

    def apply(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
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
        self,
        epoch: int,
        ids: Sequence[MutationId],
        *,
        timeout_s: float,
        keyspace: str = "",
        token: int = 0,
    ) -> asyncio.Future[PeerReply]:
        return asyncio.ensure_future(self.replica.fetch(epoch, ids, keyspace=keyspace, token=token))


class RemoteHandle:
    """Another replica, over its Exchange stream (encoded by ``epochal.replica.exchange_codec``)."""

    def __init__(
        self, node_id: str, address: str, channels: Channels, reach: PeerReach | None = None
    ) -> None:
        self.node_id = node_id
        self.address = address
        self.reach = reach
        stub = channels.peer(address)
        self.stream = Multiplexer(
            stub.Exchange,
            codec.batch,
            max_in_flight=MAX_IN_FLIGHT,
            name=node_id,
            failure=lambda reason, _: PeerFailed(node_id, reason),
        )

    def _call(
        self,
        request: codec.Request,
        timeout_s: float,
        decode: Callable[[codec.Reply], PeerReply],
    ) -> asyncio.Future[PeerReply]:
        reach = self.reach
        if reach is not None and self.node_id in reach.cut_off:
            cut: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
            cut.set_exception(PeerFailed(self.node_id, "cut off by a test hook"))
            return cut
        future = self.stream.call(request, timeout_s, functools.partial(self._decoded, decode))
        if reach is not None:
            future.add_done_callback(self._reached)
        return future

    def _reached(self, future: asyncio.Future[PeerReply]) -> None:
        assert self.reach is not None
        failed = future.cancelled() or isinstance(future.exception(), PeerFailed)
        self.reach.record(self.node_id, ok=not failed)

    def _decoded(self, decode: Callable[[codec.Reply], PeerReply], reply: codec.Reply) -> PeerReply:
        try:
            return decode(reply)
        except codec.UnusableReply as unusable:
            raise PeerFailed(self.node_id, str(unusable)) from None

    def apply(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = codec.apply_request(epoch, body, repair=False)
        return self._call(request, timeout_s, codec.applied)

    def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = codec.apply_request(epoch, body, repair=True)
        return self._call(request, timeout_s, codec.applied)

    def deliver(
        self, epoch: int, bodies: Sequence[bytes], *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        """A reconciliation delivery: mutations this replica's log holds, stored there as
        repairs (idempotent; dropped below that replica's low bound) in one group commit;
        ``examined`` of the reply says how many are durable there."""
        return self._call(codec.deliver_request(epoch, bodies), timeout_s, codec.delivered)

    def repair_cells(
        self, epoch: int, keyspace: str, repair: CellRepair, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        request = codec.cell_repair_request(epoch, keyspace, repair)
        return self._call(request, timeout_s, codec.applied)

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
        request = codec.read_request(
            epoch,
            read,
            data=data,
            summary=summary,
            digest=digest,
            sketch_logs=sketch_logs,
            sketch_cells=sketch_cells,
        )
        return self._call(request, timeout_s, codec.read_reply)

    def fetch(
        self,
        epoch: int,
        ids: Sequence[MutationId],
        *,
        timeout_s: float,
        keyspace: str = "",
        token: int = 0,
    ) -> asyncio.Future[PeerReply]:
        request = codec.fetch_request(epoch, ids, keyspace, token)
        return self._call(request, timeout_s, codec.fetched)

    def close(self) -> None:
        self.stream.close()


ReplicaHandle = LocalHandle | RemoteHandle
