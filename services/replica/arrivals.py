"""Replies arriving at a coordinator, and what they add up to so far.

Theory of operation
-------------------
A coordinated request calls several replicas at once (``epochal.replica.handles``: each call a
future of a ``PeerReply``, or of ``PeerFailed``) and one coroutine waits on all of them.

- ``Arrivals`` hands that coroutine the calls as they settle, each with the label it was sent
  with, in the order they settled. It is cheaper than ``asyncio.wait``, which registers on
  every future again each time. A call nobody waits for any more (the request is done) is
  left to settle; its exception is retrieved, so nothing is logged as never retrieved.
- ``Progress`` is what the replies showed: who answered OK (they count for the level), who
  failed and why, who refused the request as malformed (a retry cannot help), and the newest
  epoch any reply carried; and the *view*: the newest metadata the coordinator has checked the
  plan against, first the plan's own (the re-check is ``epochal.replica.coordinator_plan``;
  catching up for it, ``Coordinator.recheck``).
- ``collect`` is the write path's wait: send to every node, and after each reply that counts
  or reveals a newer epoch, ask ``done``; stop when it says so, when every call has settled,
  or at the deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from epochal.replica.handles import PeerFailed
from epochal.replica.local_replica import Outcome, PeerReply
from epochal.tcm import ClusterMetadata

Label = TypeVar("Label")


@dataclass(slots=True)
class Progress:
    """Answers collected so far for one request, and the newest epoch they revealed."""

    view: ClusterMetadata  # the newest metadata the plan was checked against (first its own)
    answered: set[str] = field(default_factory=set)
    failures: dict[str, str] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)  # replicas that refused it as such
    fence: int = 0  # the highest reconciliation fence a replica refused the write's id below
    newest_epoch: int = 0

    def note_reply(self, node: str, reply: PeerReply) -> bool:
        """Record a replica's answer; True when it counts."""
        self.newest_epoch = max(self.newest_epoch, reply.epoch)
        if reply.outcome is Outcome.OK:
            self.answered.add(node)
            return True
        self.failures[node] = f"{reply.outcome.value}: {reply.message}"
        if reply.outcome is Outcome.MALFORMED:
            self.malformed[node] = reply.message
        if reply.outcome is Outcome.FENCED:
            self.fence = max(self.fence, reply.fence)
        return False

    def note_failure(self, node: str, reason: str) -> None:
        """Record that ``node`` could not be asked, or gave no answer."""
        self.failures[node] = reason

    def describe_failures(self) -> str:
        """ "; failed: <node>: <why>; …", or nothing when none failed."""
        if not self.failures:
            return ""
        return "; failed: " + "; ".join(f"{n}: {why}" for n, why in sorted(self.failures.items()))


class Arrivals(Generic[Label]):
    """The calls of one request as they settle, each with its label, for the one coroutine
    that waits on them."""

    def __init__(self) -> None:
        self.outstanding = 0
        self._ready: list[tuple[Label, asyncio.Future[PeerReply]]] = []
        self._waiter: asyncio.Future[None] | None = None

    def watch(self, label: Label, future: asyncio.Future[PeerReply]) -> None:
        self.outstanding += 1
        future.add_done_callback(lambda done: self._arrived(label, done))

    def _arrived(self, label: Label, future: asyncio.Future[PeerReply]) -> None:
        if not future.cancelled():
            future.exception()  # retrieved: the answer may be taken by nobody
        self._ready.append((label, future))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self, timeout_s: float) -> bool:
        """Until a call has settled (True) or ``timeout_s`` passed (False)."""
        if not self._ready:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout_s, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        return bool(self._ready)

    def take(self) -> list[tuple[Label, asyncio.Future[PeerReply]]]:
        """The calls settled since the last take, oldest first."""
        ready, self._ready = self._ready, []
        self.outstanding -= len(ready)
        return ready


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def collect(
    nodes: Sequence[str],
    send: Callable[[str], asyncio.Future[PeerReply]],
    progress: Progress,
    deadline: float,
    done: Callable[[], Awaitable[bool]],
) -> bool:
    """``send`` to each of ``nodes``, in that order; after each reply that counts or reveals an
    epoch newer than the view, ask ``done``. True as soon as it says so; else, once every call
    has settled or ``deadline`` (loop time) passed, what it says then (False at the deadline).
    Calls still out are left to settle on their own."""
    loop = asyncio.get_running_loop()
    arrivals: Arrivals[str] = Arrivals()
    for node in nodes:
        try:
            arrivals.watch(node, send(node))
        except PeerFailed as failed:
            progress.note_failure(node, failed.reason)
    while arrivals.outstanding:
        remaining = deadline - loop.time()
        if remaining <= 0 or not await arrivals.next(remaining):
            return False
        counted_one = False
        for node, future in arrivals.take():
            try:
                counted_one |= progress.note_reply(node, future.result())
            except PeerFailed as failed:
                progress.note_failure(node, failed.reason)
        newer = progress.newest_epoch > progress.view.epoch
        if (counted_one or newer) and await done():
            return True
    return await done()
