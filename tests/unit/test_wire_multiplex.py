"""Many requests over one stream (epochal.wire.multiplex), against a real grpc.aio server on
127.0.0.1: answers reach their callers whatever order they come back in, requests queued
together travel in one batch, a request past its timeout fails alone, a broken stream fails
every request on it and the next call opens a new one, in-flight requests are bounded, a batch
that does not parse ends the stream with INVALID_ARGUMENT, and a stopping server answers the
requests it took, then ends the stream with UNAVAILABLE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from epochal.runtime.processes import free_ports
from epochal.wire.channels import channel as open_channel
from epochal.wire.handlers import add_servicer
from epochal.wire.multiplex import (
    CORE_LOST_STATUS,
    MAX_REQUEST_BYTES,
    Multiplexer,
    StreamFailed,
    answer_with,
    ended_with,
    serve,
)
from epochal.wire.tls import INSECURE
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc
from tests.harness import until

SERVICE = pb.DESCRIPTOR.services_by_name["ReplicaPeer"]


class OtherPeerMethods:
    """The service's methods besides Exchange: not what these tests are about."""

    async def AwaitEpoch(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this test")

    async def StreamRange(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this test")

    async def PullRanges(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this test")


class Echo(OtherPeerMethods):
    """Answers each request with a PeerReply naming its epoch, after ``delay_s(epoch)``;
    epoch 0 is answered at once, without a future."""

    def __init__(self, delay_s: Callable[[int], float]) -> None:
        self.delay_s = delay_s
        self.batches: list[int] = []
        self.closing = asyncio.Event()  # set: the streams end, as a stopping server's do

    async def Exchange(
        self, requests: AsyncIterator[pb.PeerRequests], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PeerReplies]:
        async def counted() -> AsyncIterator[pb.PeerRequests]:
            async for batch in requests:
                self.batches.append(len(batch.requests) if hasattr(batch, "requests") else -1)
                yield batch

        async for replies in serve(
            counted(),
            context,
            self.answer,
            lambda r: pb.PeerReplies(replies=r),
            self.closing,
            "echo is shutting down",
        ):
            yield replies

    def answer(self, request: pb.PeerRequest) -> Any:
        epoch = request.apply.epoch
        reply = pb.PeerReply(id=request.id, apply=pb.ApplyResponse(epoch=epoch))
        if epoch == 0:
            return reply
        return answer_with(
            asyncio.ensure_future(self._later(epoch)),
            lambda _: reply,
            lambda error: pb.PeerReply(id=request.id, malformed=repr(error)),
        )

    async def _later(self, epoch: int) -> None:
        await asyncio.sleep(self.delay_s(epoch))


async def start(servicer: Echo) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    add_servicer(server, SERVICE, servicer)
    address = f"127.0.0.1:{free_ports(1)[0]}"
    server.add_insecure_port(address)
    await server.start()
    return server, address


def multiplexer(channel: grpc.aio.Channel, max_in_flight: int = 1000) -> Multiplexer:
    stub = replica_pb2_grpc.ReplicaPeerStub(channel)
    return Multiplexer(
        stub.Exchange,
        lambda requests: pb.PeerRequests(requests=requests),
        max_in_flight=max_in_flight,
        name="echo",
    )


def request(epoch: int) -> pb.PeerRequest:
    return pb.PeerRequest(apply=pb.ApplyRequest(epoch=epoch))


def test_answers_reach_their_callers_in_any_order_and_queued_requests_share_a_batch() -> None:
    async def scenario() -> None:
        servicer = Echo(lambda epoch: 0.05 if epoch % 2 else 0.001)
        server, address = await start(servicer)
        try:
            async with open_channel(address, INSECURE) as channel:
                mux = multiplexer(channel)
                futures = [mux.call(request(epoch), 5.0) for epoch in range(1, 41)]
                replies = await asyncio.gather(*futures)
                assert [r.apply.epoch for r in replies] == list(range(1, 41))
                assert servicer.batches[0] == 40  # queued in one loop pass: one batch
                assert (await mux.call(request(0), 5.0)).apply.epoch == 0  # answered at once
                mux.close()
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_request_past_its_timeout_fails_alone() -> None:
    async def scenario() -> None:
        server, address = await start(Echo(lambda epoch: 1.0 if epoch == 2 else 0.0))
        try:
            async with open_channel(address, INSECURE) as channel:
                mux = multiplexer(channel)
                slow = mux.call(request(2), 0.1)
                fast = mux.call(request(3), 5.0)
                assert (await fast).apply.epoch == 3
                with pytest.raises(StreamFailed) as failed:
                    await slow
                assert failed.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
                mux.close()
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_broken_stream_fails_every_request_on_it_and_the_next_call_opens_a_new_one() -> None:
    async def scenario() -> None:
        servicer = Echo(lambda epoch: 5.0 if epoch < 100 else 0.0)
        server, address = await start(servicer)
        port = address.rpartition(":")[2]
        async with open_channel(address, INSECURE) as channel:
            mux = multiplexer(channel)
            waiting = [mux.call(request(epoch), 10.0) for epoch in (1, 2, 3)]
            await until(
                "the server reads the three requests", lambda: sum(servicer.batches) >= 3, 5
            )
            await server.stop(None)  # the stream breaks under the requests
            for future in waiting:
                with pytest.raises(StreamFailed) as failed:
                    await future
                assert failed.value.code == grpc.StatusCode.UNAVAILABLE
            server = grpc.aio.server()
            add_servicer(server, SERVICE, Echo(lambda epoch: 0.0))
            server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            try:
                for _ in range(50):  # the channel reconnects with backoff
                    try:
                        assert (await mux.call(request(100), 2.0)).apply.epoch == 100
                        break
                    except StreamFailed:
                        await asyncio.sleep(0.1)
                else:
                    raise AssertionError("no new stream after the server came back")
            finally:
                mux.close()
                await server.stop(None)

    asyncio.run(scenario())


def test_requests_in_flight_are_bounded() -> None:
    async def scenario() -> None:
        server, address = await start(Echo(lambda epoch: 0.2))
        try:
            async with open_channel(address, INSECURE) as channel:
                mux = multiplexer(channel, max_in_flight=2)
                first = [mux.call(request(e), 5.0) for e in (1, 2)]
                with pytest.raises(StreamFailed) as refused:
                    await mux.call(request(3), 5.0)
                assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                await asyncio.gather(*first)
                assert (await mux.call(request(4), 5.0)).apply.epoch == 4
                mux.close()
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_batch_that_does_not_parse_ends_the_stream_with_invalid_argument() -> None:
    async def scenario() -> None:
        server, address = await start(Echo(lambda epoch: 0.0))
        try:
            async with open_channel(address, INSECURE) as channel:
                call = channel.stream_stream("/epochal.v1.ReplicaPeer/Exchange")()
                await call.write(b"\xff\xff not a batch")
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await call.read()
                assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_request_too_large_for_one_message_is_refused_alone() -> None:
    async def scenario() -> None:
        server, address = await start(Echo(lambda epoch: 0.0))
        try:
            async with open_channel(address, INSECURE) as channel:
                mux = multiplexer(channel)
                huge = pb.PeerRequest(
                    apply=pb.ApplyRequest(
                        epoch=1,
                        mutation=pb.StoredMutation(partition_key=b"x" * (MAX_REQUEST_BYTES + 1)),
                    )
                )
                with pytest.raises(StreamFailed) as refused:
                    await mux.call(huge, 5.0)
                assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert (await mux.call(request(5), 5.0)).apply.epoch == 5
                mux.close()
        finally:
            await server.stop(None)

    asyncio.run(scenario())


class Refusing(OtherPeerMethods):
    async def Exchange(
        self, requests: AsyncIterator[pb.PeerRequests], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PeerReplies]:
        async for _ in requests:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no, thanks")
        yield pb.PeerReplies()


def test_a_stream_the_server_refuses_fails_its_requests_with_the_servers_status() -> None:
    async def scenario() -> None:
        server, address = await start(Refusing())  # type: ignore[arg-type]
        try:
            async with open_channel(address, INSECURE) as channel:
                mux = multiplexer(channel)
                with pytest.raises(StreamFailed) as refused:
                    await mux.call(request(1), 5.0)
                assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert "no, thanks" in refused.value.reason
                mux.close()
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_stopping_server_answers_what_it_took_then_ends_the_stream_unavailable() -> None:
    async def scenario() -> None:
        servicer = Echo(lambda epoch: 0.3)
        server, address = await start(servicer)
        try:
            async with open_channel(address, INSECURE) as channel:
                mux = multiplexer(channel)
                taken = [mux.call(request(epoch), 5.0) for epoch in (1, 2, 3)]
                await until("the server reads all three", lambda: sum(servicer.batches) >= 3, 5)
                servicer.closing.set()
                assert [(await f).apply.epoch for f in taken] == [1, 2, 3]
                with pytest.raises(StreamFailed) as refused:
                    await mux.call(request(4), 5.0)
                assert refused.value.code == grpc.StatusCode.UNAVAILABLE
                assert "echo is shutting down" in refused.value.reason
                mux.close()
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_requests_written_as_a_stopping_server_ends_the_stream_fail_unavailable_and_why() -> None:
    """A write that races the server's end of the stream makes grpc's client replace the
    server's status with its own INTERNAL "Internal error from Core"; the requests still fail
    UNAVAILABLE (retried elsewhere) with the server's reason. One request per turn of the loop
    after ``closing``: most rounds have a write under way as the status arrives."""

    async def scenario() -> None:
        for _ in range(20):
            servicer = Echo(lambda epoch: 0.0)
            server, address = await start(servicer)
            try:
                async with open_channel(address, INSECURE) as channel:
                    mux = multiplexer(channel)
                    await mux.call(request(1), 5.0)
                    servicer.closing.set()
                    futures = []
                    for epoch in range(2, 202):
                        futures.append(mux.call(request(epoch), 5.0))
                        await asyncio.sleep(0)
                    outcomes = await asyncio.gather(*futures, return_exceptions=True)
                    mux.close()
                    failed = [o for o in outcomes if isinstance(o, StreamFailed)]
                    assert failed, "the stopping server answered requests it was sent after closing"
                    assert {f.code for f in failed} == {grpc.StatusCode.UNAVAILABLE}
                    assert all("echo is shutting down" in f.reason for f in failed), {
                        f.reason for f in failed
                    }
            finally:
                await server.stop(None)

    asyncio.run(scenario())


class EndedCall:
    """What a grpc call answers once grpc put its own INTERNAL in place of the peer's status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    async def code(self) -> grpc.StatusCode:
        return self._code

    async def details(self) -> str:
        return self._details


def test_a_status_grpc_lost_without_the_peers_status_kept_reads_as_a_stream_that_went_away() -> (
    None
):
    async def scenario() -> None:
        lost = EndedCall(grpc.StatusCode.INTERNAL, CORE_LOST_STATUS)
        assert await ended_with(lost) == (
            "the stream ended while a batch was being written to it",
            grpc.StatusCode.UNAVAILABLE,
        )
        internal = EndedCall(grpc.StatusCode.INTERNAL, "a bug at the peer")
        assert await ended_with(internal) == (
            "INTERNAL: a bug at the peer",
            grpc.StatusCode.INTERNAL,
        )

    asyncio.run(scenario())
