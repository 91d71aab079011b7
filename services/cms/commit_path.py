"""A client's commit through a CMS member: answered from the entry-id record, queued here when
this member leads, forwarded to the leader, or held until there is one — each decided by the
core (``MemberCore.route``), retried with the same entry id when leadership moves, within the
commit timeout. Part of ``CMSMemberLoop``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from opentelemetry import trace

from epochal.cms.shell_support import crash_on_broken_invariant, time_out
from epochal.cmscore import MemberCore, Route
from epochal.cmscore.state_machine import CommitResult, ProposalItem
from epochal.errors import CommitTimeout, EpochalError, NotLeader
from epochal.telemetry import attributes as attr

if TYPE_CHECKING:
    from epochal.cms.commit_tracing import CommitTraces
    from epochal.cms.peers import PeerTransport
    from epochal.cms.settings import CMSSettings


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class CommitPath:
    # CMSMemberLoop's (declared here for the type checker).
    core: MemberCore
    settings: CMSSettings
    peers: PeerTransport
    traces: CommitTraces
    _leader_changed: asyncio.Event

    if TYPE_CHECKING:

        def _process(self) -> None: ...

        def _perform(self) -> None: ...

    async def commit(self, item: ProposalItem) -> CommitResult:
        """Commit through whichever member leads."""
        deadline = time.monotonic() + self.settings.commit_timeout_ms / 1000
        while True:
            routing = self.core.route(item)
            if routing.route is Route.ANSWERED:
                assert routing.answer is not None
                if isinstance(routing.answer, EpochalError):
                    raise routing.answer
                return routing.answer
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommitTimeout(
                    f"no outcome within {self.settings.commit_timeout_ms} ms; "
                    "retry with the same entry_id"
                )
            try:
                if routing.route is Route.LEAD:
                    return await self._enqueue(item, remaining, None)
                if routing.route is Route.WAIT:
                    await self._wait_for_leader(min(remaining, 0.5))
                    continue
                return await self._forward(routing.leader, item, remaining)
            except NotLeader:
                # Leadership moved while we waited: the loop retries with the same entry id.
                await self._wait_for_leader(min(max(deadline - time.monotonic(), 0), 0.05))

    async def _forward(self, leader: str, item: ProposalItem, timeout_s: float) -> CommitResult:
        span = trace.get_current_span()  # the commit's (its context goes with it)
        if span.is_recording():
            span.set_attribute(attr.FORWARDED, True)
            span.set_attribute(attr.LEADER, leader)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CommitResult] = loop.create_future()
        self.core.commits.forwarding(item, future)
        self.peers.forward(leader, item, future)
        timer = loop.call_later(timeout_s, time_out, future, timeout_s)
        try:
            return await future
        finally:
            timer.cancel()
            self.core.commits.forward_over(item.entry_id, future)

    def commit_forwarded(
        self, item: ProposalItem, origin: str | None
    ) -> asyncio.Future[CommitResult]:
        """A commit ``origin`` forwarded: answered here if leader, else told who leads."""
        answer = self.core.route_forwarded(item)
        if answer is None:
            try:
                return self._enqueue(item, self.settings.commit_timeout_ms / 1000, origin)
            except EpochalError as error:  # Overloaded
                answer = error
        future: asyncio.Future[CommitResult] = asyncio.get_running_loop().create_future()
        if isinstance(answer, EpochalError):
            future.set_exception(answer)
        else:
            future.set_result(answer)
        return future

    async def _wait_for_leader(self, timeout_s: float) -> None:
        self._leader_changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._leader_changed.wait(), timeout_s)

    def _enqueue(
        self, item: ProposalItem, timeout_s: float, origin: str | None
    ) -> asyncio.Future[CommitResult]:
        """Queue a commit for the next batch; the future is settled by its outcome or by a
        timeout. Raises Overloaded when the queue is full."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CommitResult] = loop.create_future()
        with crash_on_broken_invariant():  # also on the commit path
            proposed = self.core.enqueue(item, future, origin, now_ms())
        self.traces.queued(item.entry_id, future)
        if proposed:
            self._process()
        else:
            self._perform()
        # A timer rather than asyncio.wait_for: one handle per commit instead of two tasks.
        timer = loop.call_later(timeout_s, time_out, future, timeout_s)
        future.add_done_callback(lambda _: timer.cancel())
        return future
