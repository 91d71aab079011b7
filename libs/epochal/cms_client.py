"""An asyncio client for the CMS: commit with at-most-once retries, describe, fetch and watch.

Retries reuse the entry id, so a commit whose answer was lost (the member died, the deadline
passed) is either committed once or not at all; a retry of a committed one answers the first
epoch with ``duplicate=True``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc

from epochal.errors import RETRYABLE, Unavailable, from_rpc_error
from epochal.tcm import Transformation
from epochal.wire.channels import insecure_channel
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc


@dataclass(frozen=True, slots=True)
class Committed:
    epoch: int
    duplicate: bool
    attempts: int


class CMSClient:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        attempt_timeout_s: float = 5.0,
        total_timeout_s: float = 30.0,
        first_member: int = 0,
    ) -> None:
        if not addresses:
            raise ValueError("CMSClient needs at least one CMS address")
        self.addresses = list(addresses)
        self.attempt_timeout_s = attempt_timeout_s
        self.total_timeout_s = total_timeout_s
        self._channels = [insecure_channel(a) for a in self.addresses]
        self._stubs = [cms_pb2_grpc.CMSStub(c) for c in self._channels]
        self._next = first_member % len(self.addresses)

    async def __aenter__(self) -> CMSClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close(grace=None)

    def _rotate(self) -> None:
        self._next = (self._next + 1) % len(self._stubs)

    async def commit(
        self, transformation: Transformation, entry_id: str | None = None
    ) -> Committed:
        request = cms_pb2.CommitRequest(
            transformation=transformation_to_proto(transformation),
            entry_id=entry_id or uuid.uuid4().hex,
        )
        return await self.commit_request(request)

    async def commit_request(self, request: cms_pb2.CommitRequest) -> Committed:
        """Send a prepared request, retrying on other members with the same entry id."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.total_timeout_s
        attempts = 0
        backoff_s = 0.02
        while True:
            attempts += 1
            stub = self._stubs[self._next]
            timeout = min(self.attempt_timeout_s, max(deadline - loop.time(), 0.01))
            try:
                response = await stub.Commit(request, timeout=timeout)
                return Committed(response.epoch, response.duplicate, attempts)
            except grpc.aio.AioRpcError as error:
                if error.code() not in RETRYABLE:
                    raise from_rpc_error(error) from None
                if loop.time() + backoff_s >= deadline:
                    raise Unavailable(
                        f"no CMS member committed entry {request.entry_id!r} within "
                        f"{self.total_timeout_s} s ({attempts} attempts; last: "
                        f"{error.code().name} {error.details()}); retry with the same entry_id",
                        code=error.code(),
                    ) from None
                if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    self._rotate()
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 0.5)

    async def describe(self, member: int | None = None) -> cms_pb2.DescribeResponse:
        """Describe ``member``, or (None) the first member that answers, in rotation."""
        candidates = (
            [member]
            if member is not None
            else [(self._next + k) % len(self._stubs) for k in range(len(self._stubs))]
        )
        for attempt, index in enumerate(candidates, start=1):
            try:
                return await self._stubs[index].Describe(
                    cms_pb2.DescribeRequest(), timeout=self.attempt_timeout_s
                )
            except grpc.aio.AioRpcError as error:
                if error.code() not in RETRYABLE or attempt == len(candidates):
                    raise from_rpc_error(error) from None
                if member is None:
                    self._rotate()
        raise AssertionError("unreachable: candidates is never empty")

    async def fetch_log(
        self, since_epoch: int = 0, member: int | None = None, max_entries: int = 0
    ) -> cms_pb2.FetchLogResponse:
        stub = self._stubs[self._next if member is None else member]
        try:
            return await stub.FetchLog(
                cms_pb2.FetchLogRequest(since_epoch=since_epoch, max_entries=max_entries),
                timeout=self.attempt_timeout_s,
            )
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None

    async def watch(
        self, since_epoch: int = 0, member: int | None = None
    ) -> AsyncIterator[cms_pb2.WatchEvent]:
        stub = self._stubs[self._next if member is None else member]
        call = stub.Watch(cms_pb2.WatchRequest(since_epoch=since_epoch))
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()
