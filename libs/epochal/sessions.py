"""The SDK's transport to replicas: one channel per replica, and on it one ``Session`` stream that
multiplexes the client's requests (with ``epochal.encoding``, the only modules of the SDK that
touch ``replica.proto``).

Theory of operation
-------------------
A request goes out on the ``Session`` stream to its coordinator, tagged with an id; the reply
with that id settles it (``epochal.wire.multiplex``). A stream is opened on first use and again
after it broke. There are two streams per replica: a pinned coordinator's waits for the channel
to connect (``wait_for_ready``: the caller asked for that replica), any other fails at once when
the replica cannot be reached, so that the next replica is tried. At most
``MAX_IN_FLIGHT_PER_REPLICA`` requests wait on one stream; one more fails as
``RESOURCE_EXHAUSTED`` without being sent. Every failure — an in-band failure reply, a stream
that broke, a request that timed out, a FetchLog that failed — is an ``EpochalError`` carrying
its status, for the retry policy to judge.
"""

from __future__ import annotations

import grpc

from epochal.encoding import reply_or_raise
from epochal.status import error_for, from_rpc_error
from epochal.wire.channels import insecure_channel
from epochal.wire.log import LogPage, fetch_request, fetch_response
from epochal.wire.multiplex import Multiplexer
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc

MAX_IN_FLIGHT_PER_REPLICA = 4096


class Sessions:
    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, replica_pb2_grpc.ReplicaStub] = {}
        self._sessions: dict[tuple[str, bool], Multiplexer] = {}

    async def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        for channel in self._channels.values():
            await channel.close(grace=None)
        self._channels.clear()
        self._stubs.clear()

    async def call(
        self, address: str, pinned: bool, request: pb.SessionRequest, timeout_s: float
    ) -> pb.SessionReply:
        """One request on the session to ``address``: its reply, or an EpochalError."""
        reply: pb.SessionReply = await self._session(address, pinned).call(
            request, timeout_s, reply_or_raise
        )
        return reply

    async def fetch_log(self, address: str, since_epoch: int, timeout_s: float) -> LogPage:
        """A page of the metadata log after ``since_epoch`` from the replica at ``address``."""
        try:
            response = await self._stub(address).FetchLog(
                fetch_request(since_epoch), timeout=timeout_s
            )
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        return fetch_response(response)

    def _stub(self, address: str) -> replica_pb2_grpc.ReplicaStub:
        stub = self._stubs.get(address)
        if stub is None:
            self._channels[address] = insecure_channel(address)
            stub = self._stubs[address] = replica_pb2_grpc.ReplicaStub(self._channels[address])
        return stub

    def _session(self, address: str, pinned: bool) -> Multiplexer:
        session = self._sessions.get((address, pinned))
        if session is None:
            stub = self._stub(address)
            session = self._sessions[address, pinned] = Multiplexer(
                lambda: stub.Session(wait_for_ready=pinned),
                lambda requests: pb.SessionRequests(requests=requests),
                max_in_flight=MAX_IN_FLIGHT_PER_REPLICA,
                name=address,
                failure=lambda reason, code: error_for(code, reason),
            )
        return session
