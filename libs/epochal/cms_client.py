"""An asyncio client for the CMS: commit with at-most-once retries, describe, fetch and watch.

Failed attempts are retried as the retry table says (``epochal.status.RETRIES``), on the next
member in turn (the same one after RESOURCE_EXHAUSTED, after a backoff). A commit's retries
reuse its entry id, so a commit whose answer was lost (the member died, the deadline passed) is
either committed once or not at all; a retry of a committed one answers the first epoch with
``duplicate=True``. Reads (``describe``, ``fetch_log``) try each member once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc

from epochal.errors import Unavailable
from epochal.status import Operation, Retry, from_rpc_error, retry_for
from epochal.tcm import Transformation
from epochal.wire.channels import insecure_channel
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

Reply = TypeVar("Reply")


@dataclass(frozen=True, slots=True)
class Committed:
    epoch: int
    duplicate: bool
    attempts: int
    # The status of each attempt that failed before the one that committed, in order.
    failed_attempts: tuple[grpc.StatusCode, ...] = ()


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
        failed: list[grpc.StatusCode] = []
        backoff_s = 0.02
        while True:
            stub = self._stubs[self._next]
            timeout = min(self.attempt_timeout_s, max(deadline - loop.time(), 0.01))
            try:
                response = await stub.Commit(request, timeout=timeout)
                return Committed(response.epoch, response.duplicate, len(failed) + 1, tuple(failed))
            except grpc.aio.AioRpcError as error:
                code = error.code()
                failed.append(code)
                retry = retry_for(Operation.COMMIT, code)
                if retry is Retry.NO:
                    raise from_rpc_error(error) from None
                assert retry is Retry.SAME, retry  # a commit keeps its entry id
                if loop.time() + backoff_s >= deadline:
                    raise Unavailable(
                        f"no CMS member committed entry {request.entry_id!r} within "
                        f"{self.total_timeout_s} s ({len(failed)} attempts; last: "
                        f"{code.name} {error.details()}); retry with the same entry_id",
                        code=grpc.StatusCode.UNAVAILABLE,
                    ) from None
                if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    self._rotate()
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 0.5)

    async def describe(self, member: int | None = None) -> cms_pb2.DescribeResponse:
        """Describe ``member``, or (None) the first member that answers, in rotation."""
        return await self._read(
            member,
            lambda stub: stub.Describe(cms_pb2.DescribeRequest(), timeout=self.attempt_timeout_s),
        )

    async def fetch_log(
        self,
        since_epoch: int = 0,
        member: int | None = None,
        max_entries: int = 0,
        *,
        entries_only: bool = False,
    ) -> cms_pb2.FetchLogResponse:
        """The log after ``since_epoch`` from ``member``, or (None) the first member that
        answers, in rotation: a page of entries (``has_more``: more follow), or, for a caller
        more than the snapshot frequency behind, the newest snapshot plus the entries after
        it. With ``entries_only`` the answer is never a snapshot but the entries themselves,
        page by page: how to read the whole log, also below a snapshot (from a member whose
        Describe says ``log_complete``; one still filling in the entries below a snapshot it
        installed may lack some)."""
        request = cms_pb2.FetchLogRequest(
            since_epoch=since_epoch, max_entries=max_entries, entries_only=entries_only
        )
        return await self._read(
            member, lambda stub: stub.FetchLog(request, timeout=self.attempt_timeout_s)
        )

    async def _read(
        self,
        member: int | None,
        call: Callable[[cms_pb2_grpc.CMSStub], Awaitable[Reply]],
    ) -> Reply:
        """``call`` on ``member``, or (None) on each member in turn until one answers or a
        failure is not worth retrying (the retry table)."""
        candidates = (
            [member]
            if member is not None
            else [(self._next + k) % len(self._stubs) for k in range(len(self._stubs))]
        )
        for attempt, index in enumerate(candidates, start=1):
            try:
                return await call(self._stubs[index])
            except grpc.aio.AioRpcError as error:
                retry = retry_for(Operation.READ, error.code())
                if retry is Retry.NO or attempt == len(candidates):
                    raise from_rpc_error(error) from None
                if member is None:
                    self._rotate()
        raise AssertionError("unreachable: candidates is never empty")

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
