"""Every call through epochal.wire.handlers.add_servicer gets a status that says what happened,
against a real grpc.aio server on 127.0.0.1: while the server's gate names a reason, every
method answers UNAVAILABLE with it; a method that fails unexpectedly is logged with its
traceback and answered INTERNAL naming the exception (never UNKNOWN), unary or streaming; a
status the method chose itself passes through unchanged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
import pytest

from epochal.runtime.processes import free_ports
from epochal.wire.channels import channel as open_channel
from epochal.wire.handlers import add_servicer
from epochal.wire.tls import INSECURE
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

SERVICE = cms_pb2.DESCRIPTOR.services_by_name["CMS"]


class Broken:
    """A CMS servicer with a bug in Commit and in Watch, and a deliberate refusal."""

    async def Commit(
        self, request: cms_pb2.CommitRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.CommitResponse:
        raise AttributeError("'CMSMemberLoop' object has no attribute 'sm'")

    async def FetchLog(
        self, request: cms_pb2.FetchLogRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.FetchLogResponse:
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not from here")
        raise AssertionError("unreachable")

    async def Watch(
        self, request: cms_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cms_pb2.WatchEvent]:
        yield cms_pb2.WatchEvent(latest_epoch=7)
        raise KeyError("gone")

    async def Describe(
        self, request: cms_pb2.DescribeRequest, context: grpc.aio.ServicerContext
    ) -> cms_pb2.DescribeResponse:
        return cms_pb2.DescribeResponse(member_id="m1")


async def serving(refusal: list[str]) -> tuple[grpc.aio.Server, str]:
    """A server whose gate refuses with ``refusal[0]`` while the list is not empty."""
    server = grpc.aio.server()
    add_servicer(server, SERVICE, Broken(), lambda method: refusal[0] if refusal else None)
    address = f"127.0.0.1:{free_ports(1)[0]}"
    server.add_insecure_port(address)
    await server.start()
    return server, address


async def watch(stub: cms_pb2_grpc.CMSStub) -> list[cms_pb2.WatchEvent]:
    return [event async for event in stub.Watch(cms_pb2.WatchRequest(), timeout=5)]


def test_a_gated_server_answers_every_method_unavailable_with_the_reason() -> None:
    async def scenario() -> None:
        refusal = ["m1 is starting: loading its state; try another member"]
        server, address = await serving(refusal)
        try:
            async with open_channel(address, INSECURE) as channel:
                stub = cms_pb2_grpc.CMSStub(channel)
                calls = {
                    "Commit": stub.Commit(cms_pb2.CommitRequest(), timeout=5),
                    "FetchLog": stub.FetchLog(cms_pb2.FetchLogRequest(), timeout=5),
                    "Watch": watch(stub),
                    "Describe": stub.Describe(cms_pb2.DescribeRequest(), timeout=5),
                }
                for method, call in calls.items():
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await call
                    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, method
                    assert refused.value.details() == refusal[0], method
                refusal.clear()  # ready
                assert (await stub.Describe(cms_pb2.DescribeRequest(), timeout=5)).member_id
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_bug_is_answered_internal_and_logged_never_unknown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        server, address = await serving([])
        try:
            async with open_channel(address, INSECURE) as channel:
                stub = cms_pb2_grpc.CMSStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as unary:
                    await stub.Commit(cms_pb2.CommitRequest(), timeout=5)
                # Which call failed, never the bug's Python text (that goes to the log).
                assert unary.value.code() == grpc.StatusCode.INTERNAL
                assert "internal error in /epochal.v1.CMS/Commit" in unary.value.details()
                assert "AttributeError" not in unary.value.details()
                assert "'sm'" not in unary.value.details()

                events: list[cms_pb2.WatchEvent] = []
                with pytest.raises(grpc.aio.AioRpcError) as streaming:
                    async for event in stub.Watch(cms_pb2.WatchRequest(), timeout=5):
                        events.append(event)
                assert [e.latest_epoch for e in events] == [7]
                assert streaming.value.code() == grpc.StatusCode.INTERNAL
                assert "internal error in /epochal.v1.CMS/Watch" in streaming.value.details()
                assert "KeyError" not in streaming.value.details()

                with pytest.raises(grpc.aio.AioRpcError) as chosen:
                    await stub.FetchLog(cms_pb2.FetchLogRequest(), timeout=5)
                assert chosen.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert chosen.value.details() == "not from here"
        finally:
            await server.stop(None)

    with caplog.at_level(logging.ERROR, logger="epochal.wire.handlers"):
        asyncio.run(scenario())
    logged = [r for r in caplog.records if r.name == "epochal.wire.handlers"]
    assert [r.getMessage() for r in logged] == [
        "/epochal.v1.CMS/Commit failed unexpectedly",
        "/epochal.v1.CMS/Watch failed unexpectedly",
    ]
    assert all(r.exc_info is not None for r in logged)  # with the traceback
