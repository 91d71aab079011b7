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
its status, for the retry policy to judge: a stream that could not be opened or broke is
``ConnectionFailed`` naming the replica, a request that timed out ``TimedOut`` saying how long it
waited.

Each replica's health is kept as its answers come (``Health``): a replica on which requests
have been waiting for ``SUSPECT_AFTER_S`` with no answer at all (stopped, partitioned, wedged),
or that could not be reached in the last ``UNREACHABLE_FOR_S``, is *suspected*, and routing
tries it last (``epochal.routing``). One answer clears the suspicion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from epochal.encoding import reply_or_raise
from epochal.errors import ConnectionFailed, EpochalError, TimedOut
from epochal.status import error_for, from_rpc_error
from epochal.wire.channels import insecure_channel
from epochal.wire.log import LogPage, fetch_request, fetch_response
from epochal.wire.multiplex import Multiplexer
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc

MAX_IN_FLIGHT_PER_REPLICA = 4096
SUSPECT_AFTER_S = 0.5  # requests waiting this long on a replica with no answer: suspected
UNREACHABLE_FOR_S = 1.0  # a replica that could not be reached is suspected this long


@dataclass(slots=True)
class Health:
    """What a replica's answers showed lately (``time.monotonic``: read from other threads too)."""

    waiting: int = 0  # requests sent to it and not settled
    quiet_since: float = 0.0  # since when requests have waited without any answer
    unreachable_until: float = 0.0

    def suspected(self, now: float) -> bool:
        stalled = self.waiting > 0 and now - self.quiet_since >= SUSPECT_AFTER_S
        return stalled or now < self.unreachable_until


class Sessions:
    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, replica_pb2_grpc.ReplicaStub] = {}
        self._sessions: dict[tuple[str, bool], Multiplexer] = {}
        self._health: dict[str, Health] = {}

    def suspected(self) -> set[str]:
        """The replicas routing should try last (the module docstring)."""
        now = time.monotonic()
        return {address for address, health in list(self._health.items()) if health.suspected(now)}

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
        clock = time.monotonic
        health = self._health.get(address)
        if health is None:
            health = self._health[address] = Health()
        if health.waiting == 0:
            health.quiet_since = clock()
        health.waiting += 1
        try:
            reply: pb.SessionReply = await self._session(address, pinned).call(
                request, timeout_s, reply_or_raise
            )
        except EpochalError as error:
            if isinstance(error, ConnectionFailed):
                health.unreachable_until = clock() + UNREACHABLE_FOR_S
            elif not isinstance(error, TimedOut) or error.rule != NO_ANSWER_RULE:
                health.quiet_since = clock()  # it answered, if only to refuse
                health.unreachable_until = 0.0
            raise
        else:
            health.quiet_since = clock()
            health.unreachable_until = 0.0
            return reply
        finally:
            health.waiting -= 1

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
                failure=lambda reason, code: _stream_failure(address, reason, code),
            )
        return session


NO_ANSWER_RULE = "no_answer"


def _stream_failure(address: str, reason: str, code: grpc.StatusCode) -> EpochalError:
    """The error of a request that got no answer on the stream to ``address``."""
    if code is grpc.StatusCode.UNAVAILABLE:
        return ConnectionFailed(
            f"replica {address} could not be reached, or its stream broke ({reason})",
            address=address,
            status=code.name,
        )
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return TimedOut(
            f"{reason} (the coordinator {address} did not answer)",
            rule=NO_ANSWER_RULE,
            status=code.name,
        )
    return error_for(code, reason)
