"""An asyncio client for the CMS: commit with at-most-once retries, describe, fetch and watch.

Failed attempts are retried by the one retry policy (``epochal.retry``, which follows the retry
table ``epochal.status.RETRIES``), on the next member in turn (the same one after
RESOURCE_EXHAUSTED, after a backoff). A commit's retries reuse its entry id, so a commit whose
answer was lost (the member died, the deadline passed) is either committed once or not at all;
a retry of a committed one answers the first epoch with ``duplicate=True``. Reads
(``describe``, ``fetch_log``) try each member once.

Every answer is a domain value: ``describe`` a ``CMSView``, ``fetch_log`` and each event of
``watch`` an ``epochal.wire.log.LogPage`` (a snapshot as ``ClusterMetadata``, entries with their
transformations decoded).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc

from epochal import retry
from epochal.errors import EpochalError, InvalidRequest, Rejected, Unavailable
from epochal.paxos import Ballot
from epochal.status import Operation, code_of, from_rpc_error
from epochal.tcm import Transformation
from epochal.wire.channels import channel
from epochal.wire.log import LogPage, fetch_response, watch_event
from epochal.wire.metadata import transformation_to_proto
from epochal.wire.paxos import ballot_from_proto
from epochal.wire.tls import Security
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc

Reply = TypeVar("Reply")
Answer = TypeVar("Answer")


def commit_policy(*, attempt_timeout_s: float, total_timeout_s: float) -> retry.RetrySchedule:
    """How a commit is retried (README "Errors and retries"): until ``total_timeout_s``,
    backing off from 20 ms to 0.5 s."""
    return retry.RetrySchedule(
        Operation.COMMIT,
        attempt_timeout_s=attempt_timeout_s,
        total_timeout_s=total_timeout_s,
        first_backoff_s=0.02,
        max_backoff_s=0.5,
    )


def read_policy(*, attempt_timeout_s: float, members: int) -> retry.RetrySchedule:
    """How a read (Describe, FetchLog) is retried: once on each of ``members``, at once."""
    return retry.RetrySchedule(
        Operation.READ, attempt_timeout_s=attempt_timeout_s, max_attempts=members
    )


class CommitObserver(Protocol):
    """Told of every commit a ``CMSClient`` made: the transformation's kind, the outcome
    (``success``; ``rejection``: a rule refused it; ``failure``: no member committed it in
    time), its time from the first attempt to the answer, and how many attempts were retried."""

    def committed(self, kind: str, outcome: str, seconds: float, retries: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Committed:
    epoch: int
    duplicate: bool
    attempts: int
    # The status of each attempt that failed before the one that committed, in order.
    failed_attempts: tuple[grpc.StatusCode, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    address: str
    role: str  # "voter", "joining" (being added) or "learner" (a candidate)


@dataclass(frozen=True, slots=True, kw_only=True)
class CMSView:
    """What a CMS member says of the CMS: its own id and applied epoch, the leader it knows
    ("": none), the members and their roles, and its own progress."""

    member_id: str
    epoch: int
    leader_id: str
    members: tuple[MemberView, ...]
    ready: bool
    # It holds every log entry from epoch 1 to ``epoch`` (after installing a snapshot it fills
    # the gap below it in the background).
    log_complete: bool
    snapshot_epochs: tuple[int, ...]  # the epochs of the snapshots it keeps
    ballot: Ballot  # the highest it promised
    applied_slot: int
    snapshots_installed: int  # snapshots it installed from a peer to catch up since it started

    def role_of(self, member_id: str) -> str:
        """The member's role ("": not a member)."""
        return next((m.role for m in self.members if m.member_id == member_id), "")


class CMSClient:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        attempt_timeout_s: float = 5.0,
        total_timeout_s: float = 30.0,
        first_member: int = 0,
        observer: CommitObserver | None = None,
        security: Security | None = None,
    ) -> None:
        """``security``: TLS files or INSECURE; None: the process's
        (``epochal.wire.channels.use``)."""
        if not addresses:
            raise ValueError("CMSClient needs at least one CMS address")
        self.addresses = list(addresses)
        self.attempt_timeout_s = attempt_timeout_s
        self.total_timeout_s = total_timeout_s
        self._channels = [channel(a, security) for a in self.addresses]
        self._stubs = [cms_pb2_grpc.CMSStub(c) for c in self._channels]
        self._next = first_member % len(self.addresses)
        self.observer = observer

    async def __aenter__(self) -> CMSClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close(grace=None)

    def rotate(self) -> None:
        """Ask the next member first from now on (a watcher whose member's stream ended)."""
        self._rotate()

    def _rotate(self) -> None:
        self._next = (self._next + 1) % len(self._stubs)

    @property
    def current_address(self) -> str:
        """The member the next commit or read goes to first."""
        return self.addresses[self._next]

    async def commit(
        self, transformation: Transformation, entry_id: str | None = None
    ) -> Committed:
        return await self.commit_request(
            self.commit_request_of(transformation, entry_id or uuid.uuid4().hex)
        )

    @staticmethod
    def commit_request_of(transformation: Transformation, entry_id: str) -> cms_pb2.CommitRequest:
        return cms_pb2.CommitRequest(
            transformation=transformation_to_proto(transformation), entry_id=entry_id
        )

    async def commit_once(self, request: cms_pb2.CommitRequest, timeout_s: float) -> Committed:
        """One attempt of a commit, on the current member; after a failure the next attempt
        goes to the next member (to the same one after RESOURCE_EXHAUSTED: it is there, only
        busy)."""
        try:
            response = await self._stubs[self._next].Commit(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                self._rotate()
            raise from_rpc_error(error) from None
        return Committed(response.epoch, response.duplicate, 1)

    async def commit_request(self, request: cms_pb2.CommitRequest) -> Committed:
        """Send a prepared request, retrying on other members with the same entry id."""
        policy = commit_policy(
            attempt_timeout_s=self.attempt_timeout_s, total_timeout_s=self.total_timeout_s
        )
        failed: list[grpc.StatusCode] = []

        async def attempt(current: retry.Attempt) -> Committed:
            assert current.carry_id == request.entry_id, current  # a commit keeps its entry id
            try:
                committed = await self.commit_once(request, current.timeout_s)
            except EpochalError as error:
                failed.append(code_of(error) or grpc.StatusCode.UNKNOWN)
                raise
            return Committed(committed.epoch, committed.duplicate, current.number, tuple(failed))

        def out_of_time(last: retry.Attempt, error: EpochalError) -> EpochalError:
            return Unavailable(
                f"no CMS member committed entry {request.entry_id!r} within "
                f"{self.total_timeout_s} s ({last.number} attempts; last: "
                f"{error.status} {error.message}); retry with the same entry_id",
                status=grpc.StatusCode.UNAVAILABLE.name,
            )

        if self.observer is None:
            return await retry.run(
                policy, attempt, carry_id=request.entry_id, exhausted=out_of_time
            )
        started = time.monotonic()
        outcome = "failure"
        try:
            committed = await retry.run(
                policy, attempt, carry_id=request.entry_id, exhausted=out_of_time
            )
            outcome = "success"
            return committed
        except (Rejected, InvalidRequest):
            outcome = "rejection"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"  # the caller gave up: a failure, its last attempt unfinished
            raise
        finally:
            kind = request.transformation.WhichOneof("kind") or ""  # the field is the kind
            # The attempts that failed and were tried again: not the last, if it failed too.
            retries = max(len(failed) - (outcome in ("rejection", "failure")), 0)
            outcome = "failure" if outcome == "cancelled" else outcome
            self.observer.committed(kind, outcome, time.monotonic() - started, retries)

    async def describe(self, member: int | None = None) -> CMSView:
        """Describe ``member``, or (None) the first member that answers, in rotation."""
        return await self._read(
            member,
            lambda stub, timeout_s: stub.Describe(cms_pb2.DescribeRequest(), timeout=timeout_s),
            view_from_proto,
        )

    async def fetch_log(
        self,
        since_epoch: int = 0,
        member: int | None = None,
        max_entries: int = 0,
        *,
        entries_only: bool = False,
    ) -> LogPage:
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
            member,
            lambda stub, timeout_s: stub.FetchLog(request, timeout=timeout_s),
            fetch_response,
        )

    async def _read(
        self,
        member: int | None,
        call: Callable[[cms_pb2_grpc.CMSStub, float], Awaitable[Answer]],
        decode: Callable[[Answer], Reply],
    ) -> Reply:
        """``call`` on ``member``, or (None) on each member in turn until one answers what
        decodes or a failure is not worth retrying (the retry policy). An answer that does not
        decode is the member's failure (Unavailable): the next member is asked."""
        candidates = (
            [member]
            if member is not None
            else [(self._next + k) % len(self._stubs) for k in range(len(self._stubs))]
        )
        policy = read_policy(attempt_timeout_s=self.attempt_timeout_s, members=len(candidates))

        async def attempt(current: retry.Attempt) -> Reply:
            asked = candidates[current.number - 1]
            try:
                answer = await call(self._stubs[asked], current.timeout_s)
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error) from None
            return _decoded(answer, decode, asked)

        def next_member(_: EpochalError) -> None:
            if member is None:
                self._rotate()

        return await retry.run(policy, attempt, before_retry=next_member)

    async def watch(
        self, since_epoch: int = 0, member: int | None = None
    ) -> AsyncIterator[LogPage]:
        """The pages ``member`` (None: the next in rotation) pushes from ``since_epoch`` on:
        the backlog, then each new entry, until the caller stops or the stream fails."""
        stub = self._stubs[self._next if member is None else member]
        call = stub.Watch(cms_pb2.WatchRequest(since_epoch=since_epoch))
        try:
            async for event in call:
                yield _decoded(event, watch_event, self._next if member is None else member)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()


def view_from_proto(described: cms_pb2.DescribeResponse) -> CMSView:
    return CMSView(
        member_id=described.member_id,
        epoch=described.epoch,
        leader_id=described.leader_id,
        members=tuple(MemberView(m.member_id, m.address, m.role) for m in described.members),
        ready=described.ready,
        log_complete=described.log_complete,
        snapshot_epochs=tuple(described.snapshot_epochs),
        ballot=ballot_from_proto(described.ballot),
        applied_slot=described.applied_slot,
        snapshots_installed=described.snapshots_installed,
    )


def _decoded(answer: Answer, decode: Callable[[Answer], Reply], member: int) -> Reply:
    """``decode(answer)``; an answer that does not decode raises Unavailable naming the member."""
    try:
        return decode(answer)
    except ValueError as error:  # MalformedInput is one
        raise Unavailable(f"CMS member {member} answered what does not decode: {error}") from None
