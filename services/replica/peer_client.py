"""What topology operations ask of other replicas, in domain values: the one place their calls
meet protobuf (the coordinator's ``Exchange`` streams are ``epochal.replica.handles``).

Theory of operation
-------------------
Each method makes one call over the node's shared ``Channels`` and converts both ways with
``epochal.replica.codec``. A call that fails raises the error of ``epochal.errors`` its status
stands for (``epochal.status.from_rpc_error``), so ``error.status`` names the status the peer
answered — which is how a caller tells a peer's failure, worth asking again or elsewhere, from
one raised here. A ``StreamRange`` stream that ends without its DONE message failed too
(``DATA_LOSS``): the source stopped before it said it was complete.

| method           | rpc                     | asked by                                     |
| ---------------- | ----------------------- | -------------------------------------------- |
| ``await_epoch``  | ReplicaPeer.AwaitEpoch  | the progress barrier: the epoch it reached   |
| ``stream_range`` | ReplicaPeer.StreamRange | the receiver: a piece's chunks from a source |
| ``pull_ranges``  | ReplicaPeer.PullRanges  | the driver: another receiver streams its own |
| ``describe``     | Replica.Describe        | remove, replace: is the named node alive     |
| ``cleanup``      | ReplicaAdmin.Cleanup    | cancel: a receiver deletes what it streamed  |
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import grpc

from epochal.errors import Unavailable
from epochal.replica.codec import (
    chunk_from_proto,
    pull_report_from_proto,
    pull_request_to_proto,
    range_request_to_proto,
)
from epochal.replica.stream_values import PullReport, PullRequest, RangeRequest, ReceivedChunk
from epochal.status import from_rpc_error
from epochal.wire.channels import Channels
from epochal.wire.v1 import replica_pb2 as pb

AWAIT_EPOCH_MARGIN_S = 1.0  # the call outlives the peer's own wait by this much


@dataclass(frozen=True, slots=True)
class Described:
    """Who answered ``Describe`` at an address, and at which epoch."""

    node_id: str
    epoch: int


class PeerClient:
    def __init__(self, channels: Channels) -> None:
        self.channels = channels

    async def await_epoch(self, address: str, epoch: int, *, wait_s: float) -> int:
        """The epoch the node reached, once it has caught up to ``epoch`` or waited ``wait_s``."""
        request = pb.AwaitEpochRequest(epoch=epoch, timeout_ms=int(wait_s * 1000))
        with _answered():
            reply = await self.channels.peer(address).AwaitEpoch(
                request, timeout=wait_s + AWAIT_EPOCH_MARGIN_S
            )
        return reply.epoch

    async def stream_range(
        self, address: str, request: RangeRequest, *, timeout_s: float
    ) -> AsyncIterator[ReceivedChunk]:
        """The piece's chunks, up to the one whose cursor is DONE."""
        call = self.channels.peer(address).StreamRange(
            range_request_to_proto(request), timeout=timeout_s
        )
        done = False
        try:
            with _answered():
                async for message in call:
                    chunk = chunk_from_proto(message)
                    done = chunk.cursor.done
                    yield chunk
        finally:
            call.cancel()  # the receiver stopped reading (a no-op once the call ended)
        if not done:
            raise Unavailable(
                f"{address} ended the stream before its last message", status="DATA_LOSS"
            )

    async def pull_ranges(
        self, address: str, request: PullRequest, *, timeout_s: float
    ) -> PullReport:
        with _answered():
            reply = await self.channels.peer(address).PullRanges(
                pull_request_to_proto(request), timeout=timeout_s
            )
        return pull_report_from_proto(reply)

    async def describe(self, address: str, *, timeout_s: float) -> Described:
        with _answered():
            reply = await self.channels.replica(address).Describe(
                pb.ReplicaDescribeRequest(), timeout=timeout_s
            )
        return Described(reply.node_id, reply.epoch)

    async def cleanup(self, address: str, epoch: int, *, timeout_s: float) -> int:
        """How many cells and log entries the node deleted, once caught up to ``epoch``."""
        with _answered():
            reply = await self.channels.admin(address).Cleanup(
                pb.OperationRequest(epoch=epoch), timeout=timeout_s
            )
        return reply.removed


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    try:
        yield
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error) from None
