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

| method         | rpc                       | used by                                       |
| -------------- | ------------------------- | --------------------------------------------- |
| ``stream_range`` | ReplicaPeer.StreamRange | the receiver: a piece's chunks from a source  |
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import grpc

from epochal.errors import Unavailable
from epochal.replica.codec import chunk_from_proto, range_request_to_proto
from epochal.replica.stream_values import RangeRequest, ReceivedChunk
from epochal.status import from_rpc_error
from epochal.wire.channels import Channels


class PeerClient:
    def __init__(self, channels: Channels) -> None:
        self.channels = channels

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


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    try:
        yield
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error) from None
