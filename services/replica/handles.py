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

import grpc

from epochal.mtrack import MutationId
from epochal.replica import exchange_codec as codec
from epochal.replica.data_store import CellRepair
from epochal.replica.local_replica import LocalReplica, PartitionRead, PeerReply
from epochal.replica.model import Mutation
from epochal.replica.peer_tracing import served
from epochal.replica.reachability import PeerReach, counts_as_unreachable
from epochal.telemetry.context import inject
from epochal.wire.channels import Channels
from epochal.wire.multiplex import Multiplexer

MAX_IN_FLIGHT = 16_384


class PeerFailed(Exception):
    """A call to ``node_id`` got no usable answer; ``code`` says how (``reachability``: only a
    call that got no answer says the peer may be unreachable)."""

    def __init__(
        self, node_id: str, reason: str, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    ) -> None:
        super().__init__(f"{node_id}: {reason}")
        self.node_id = node_id
        self.reason = reason
        self.code = code


class LocalHandle:
    """This node, called in-process."""

    def __init__(self, node_id: str, replica: LocalReplica) -> None:
        self.node_id = node_id
        self.replica = replica

    def apply(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        return served(
            "apply",
            self.node_id,
            None,
            lambda: self.replica.apply_soon(epoch, mutation, body, repair=False, prepared=True),
        )

    def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        return served(
            "apply",
            self.node_id,
            None,
            lambda: self.replica.apply_soon(epoch, mutation, body, repair=True),
            repair=True,
        )

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
        return served(
            "read",
            self.node_id,
            None,
            lambda: asyncio.ensure_future(
                self.replica.read(
                    epoch,
                    read,
                    data=data,
                    summary=summary,
                    want_digest=digest,
                    sketch_logs=sketch_logs,
                    sketch_cells=sketch_cells,
                )
            ),
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
            failure=lambda reason, code: PeerFailed(node_id, reason, code),
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
        deadline = asyncio.get_running_loop().time() + timeout_s
        inject(request)  # the replica's span is a child of the current one (the coordinator's)
        future = self.stream.call(request, timeout_s, functools.partial(self._decoded, decode))
        if reach is not None:
            future.add_done_callback(functools.partial(self._reached, deadline))
        return future

    def _reached(self, deadline: float, future: asyncio.Future[PeerReply]) -> None:
        """What the call says about reaching the peer (``reachability``)."""
        assert self.reach is not None
        if future.cancelled():
            return  # its caller gave up on it: nothing learned about the peer
        failed = future.exception()
        if not isinstance(failed, PeerFailed):
            self.reach.record(self.node_id, ok=True)
        elif counts_as_unreachable(failed.code, asyncio.get_running_loop().time() - deadline):
            self.reach.record(self.node_id, ok=False)

    def _decoded(self, decode: Callable[[codec.Reply], PeerReply], reply: codec.Reply) -> PeerReply:
        try:
            return decode(reply)
        except codec.UnusableReply as unusable:  # an answer, if not a usable one
            raise PeerFailed(self.node_id, str(unusable), grpc.StatusCode.INTERNAL) from None

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
