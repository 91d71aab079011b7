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
  answered no and why (refused; among them who refused the request as malformed: a retry
  cannot help), who gave no answer and why (not answering: could not be asked, or the call
  broke or timed out), and the newest epoch any reply carried; and the *view*: the newest
  metadata the coordinator has checked the plan against, first the plan's own (the re-check
  is ``epochal.replica.coordinator_plan``; catching up for it, ``Coordinator.recheck``). A
  request that fails tells its client ``Progress.outcome``: every member of the group as
  acknowledged, refused or not answering — a replica whose call is still out at the deadline
  is not answering too, though its call never settled.
- ``collect`` is the write path's wait: send to every node, and after each reply that counts
  or reveals a newer epoch, ask ``done``; stop when it says so, when every call has settled,
  or at the deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from epochal.errors import ReplicaOutcome
from epochal.replica.coordinator_plan import Plan
from epochal.replica.handles import PeerFailed
from epochal.replica.local_replica import Outcome, PeerReply
from epochal.tcm import ClusterMetadata

Label = TypeVar("Label")


@dataclass(slots=True)
class Progress:
    """Answers collected so far for one request, and the newest epoch they revealed. Each
    replica asked is in at most one of ``answered`` (OK: counts for the level), ``refused``
    (answered no) and ``not_answering`` (could not be asked, or its call ended without an
    answer); one asked and in none is still silent."""

    view: ClusterMetadata  # the newest metadata the plan was checked against (first its own)
    asked: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)  # node -> "<outcome>: <message>"
    not_answering: dict[str, str] = field(default_factory=dict)  # node -> why
    malformed: dict[str, str] = field(default_factory=dict)  # replicas that refused it as such
    fence: int = 0  # the highest reconciliation fence a replica refused the write's id below
    newest_epoch: int = 0

    def note_asked(self, node: str) -> None:
        """``node`` was sent the request (its answer, or its failure, is to come)."""
        self.asked.add(node)

    def note_reply(self, node: str, reply: PeerReply) -> bool:
        """Record a replica's answer; True when it counts."""
        self.newest_epoch = max(self.newest_epoch, reply.epoch)
        if reply.outcome is Outcome.OK:
            self.answered.add(node)
            return True
        self.refused[node] = f"{reply.outcome.value}: {reply.message}"
        if reply.outcome is Outcome.MALFORMED:
            self.malformed[node] = reply.message
        if reply.outcome is Outcome.FENCED:
            self.fence = max(self.fence, reply.fence)
        return False

    def note_failure(self, node: str, reason: str) -> None:
        """Record that ``node`` could not be asked, or its call ended without an answer
        (``PeerFailed``: the stream broke, or no answer within the call's timeout)."""
        self.asked.add(node)
        self.not_answering[node] = reason

    def outcome(
        self, plan: Plan, *, needed: int, timeout_ms: int, timed_out: bool
    ) -> ReplicaOutcome:
        """What the replicas did, told against the plan's group at the view, of which
        ``needed`` had to answer. A member asked that neither answered nor failed is not
        answering "no answer within ``timeout_ms`` ms" when the request ``timed_out``, else
        "no answer yet"; a member never asked is "not asked" (a read asks only as many as it
        needs; a write's group may have grown since the plan)."""
        group = plan.group_at(self.view)
        silent = f"no answer within {timeout_ms} ms" if timed_out else "no answer yet"
        not_answering = dict(self.not_answering)
        for node in sorted(group - self.answered - self.refused.keys() - not_answering.keys()):
            if node in self.asked:
                not_answering[node] = silent
            elif node in plan.group:
                not_answering[node] = "not asked"
            else:
                not_answering[node] = f"not asked: not in the group at epoch {plan.epoch}"
        return ReplicaOutcome(
            consistency=plan.level.value,
            required=needed,
            replicas=tuple(sorted(group)),
            acknowledged=tuple(sorted(self.answered)),
            refused=tuple(sorted(self.refused.items())),
            not_answering=tuple(sorted(not_answering.items())),
        )


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
        else:
            progress.note_asked(node)
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
