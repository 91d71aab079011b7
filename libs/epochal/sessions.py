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

Each replica's health is kept as its answers come (``Health``). A replica is *suspected*, and
routing tries it last (``epochal.routing``), while requests have waited on it for
``SUSPECT_AFTER_S`` with no answer at all (stopped, partitioned, wedged), and from the moment a
request to it got no answer or could not reach it until it answers again: a suspect gets few
requests, so a probe (a gRPC health check, every ``PROBE_INTERVAL_S``) asks it in the
background until it answers. Any answer — a reply, a refusal, the probe's — clears the
suspicion.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from epochal.encoding import reply_or_raise
from epochal.errors import ConnectionFailed, EpochalError, TimedOut
from epochal.status import error_for, from_rpc_error
from epochal.telemetry.context import detached
from epochal.wire.channels import channel
from epochal.wire.log import LogPage, fetch_request, fetch_response
from epochal.wire.multiplex import Multiplexer
from epochal.wire.status import NO_ANSWER
from epochal.wire.tls import Security
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc

MAX_IN_FLIGHT_PER_REPLICA = 4096
SUSPECT_AFTER_S = 1.0  # requests waiting this long on a replica with no answer: suspected
PROBE_INTERVAL_S = 1.0  # between health checks of a silent replica
PROBE_TIMEOUT_S = 1.0


@dataclass(slots=True)
class Health:
    """What a replica's answers showed lately (``time.monotonic``: read from other threads too)."""

    waiting: int = 0  # requests sent to it and not settled
    quiet_since: float = 0.0  # since when requests have waited without any answer
    silent: bool = False  # a request got no answer, and nothing has answered since

    def suspected(self, now: float) -> bool:
        return self.silent or (self.waiting > 0 and now - self.quiet_since >= SUSPECT_AFTER_S)

    def answered(self, now: float) -> None:
        self.quiet_since = now
        self.silent = False


class Sessions:
    def __init__(self, security: Security | None = None) -> None:
        self.security = security  # None: the process's (epochal.wire.channels.use)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, replica_pb2_grpc.ReplicaStub] = {}
        self._sessions: dict[tuple[str, bool], Multiplexer] = {}
        self._health: dict[str, Health] = {}
        self._probes: dict[str, asyncio.Task[None]] = {}

    def suspected(self) -> set[str]:
        """The replicas routing should try last (the module docstring)."""
        now = time.monotonic()
        return {address for address, health in list(self._health.items()) if health.suspected(now)}

    async def close(self) -> None:
        for probe in self._probes.values():
            probe.cancel()
        self._probes.clear()
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        for opened in self._channels.values():
            await opened.close(grace=None)
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
            if no_answer(error):
                health.silent = True
                self._probe(address)
            else:
                health.answered(clock())  # it answered, if only to refuse
            raise
        else:
            health.answered(clock())
            return reply
        finally:
            health.waiting -= 1

    def _probe(self, address: str) -> None:
        """Health-check the silent replica at ``address`` until it answers (one probe each)."""
        probe = self._probes.get(address)
        if probe is None or probe.done():
            self._probes[address] = detached(self._until(address))

    async def _until(self, address: str) -> None:
        stub = health_pb2_grpc.HealthStub(self._channels[address])
        health = self._health[address]
        while health.silent:
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=PROBE_TIMEOUT_S)
            except grpc.aio.AioRpcError as error:
                if error.code() not in NO_ANSWER:
                    health.answered(time.monotonic())  # it answered, if only to refuse
                    return
                await asyncio.sleep(PROBE_INTERVAL_S)
            else:
                health.answered(time.monotonic())

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
            self._channels[address] = channel(address, self.security)
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


def no_answer(error: EpochalError) -> bool:
    """Whether ``error`` says the replica gave no answer at all (as opposed to a refusal)."""
    return isinstance(error, ConnectionFailed) or (
        isinstance(error, TimedOut) and error.rule == NO_ANSWER_RULE
    )


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
