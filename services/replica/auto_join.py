"""The join a replica makes by itself (``--auto-join``, on by default): a cluster forms and grows
without anyone calling ``bootstrap``.

Theory of operation
-------------------
Once registered and caught up with the log, the node reads where it stands in the metadata
(``decide``, pure) and acts:

- it owns tokens (joined, or in a later operation), or it left: nothing — a restart never joins
  again, and a node that left stays out;
- its join is in the log but not finished (the process died mid-join): it resumes that join
  from the last step committed (streams resume from what is on disk);
- an operation other than a join is in flight for it (a replace): nothing; that is the
  operator's to resume or cancel (start replacing nodes with ``--no-auto-join``);
- it is registered and owns nothing: it joins, as ``epochal bootstrap`` does, with
  ``--initial-tokens`` or ``--num-tokens`` allocated tokens.

Which node counts as first: there is no special case. A join's plan moves to it exactly the
ranges whose replicas change; while no node owns tokens those ranges have no replicas, so there
is nothing to stream and no one for a barrier to wait for, and the join only commits its steps.
The first PREPARE the log orders is the first node. If keyspaces exist, its PREPARE locks their
whole ring, and joins prepared after it wait for that lock and then bootstrap with streaming
from it; if none exist there is nothing to lock and nodes started together all join at once
(none streams: there is no data). Their tokens split the ring in the order of their PREPAREs
(``epochal.tcm.allocation`` counts the tokens of joins in flight as owned).

A refusal that may come from someone else's operation — a range locked by another sequence,
or any refusal while other sequences are in flight — waits until the metadata changes and tries
again; one that cannot change by waiting (tokens owned by a joined node, a bad token) is logged
and the node stays out of the ring, serving as a coordinator only. An unreachable CMS or a
failed stream is retried with backoff, for ever: the join holds its ranges, and only finishing
or cancelling it frees them. A cancel (``epochal cancel NODE``) ends the automatic join
until the next start. Progress is in the log and in the node's operation status
(``epochal operations``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from epochal.admin import JOIN_REFUSED
from epochal.errors import EpochalError, Rejected
from epochal.replica.operations import Operations
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata, SequenceKind
from epochal.tcm.directory import NodeState

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0
CHANGE_WAIT_S = 5.0  # a wait for the metadata to change looks again this often at most
CATCH_UP_S = 2.0
# Refusals no wait can change while no other operation is in flight: the node stays out.
FINAL_RULES = frozenset({"bad_tokens", "token_taken"})


class Action(enum.Enum):
    NOTHING = "nothing"
    JOIN = "join"
    RESUME = "resume"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    why: str


def decide(metadata: ClusterMetadata, node_id: str) -> Decision:
    """What a node with the join setting on does at ``metadata``. Pure."""
    node = metadata.nodes.get(node_id)
    if node is None:
        return Decision(Action.NOTHING, f"{node_id} is not in the directory")
    sequence = metadata.sequences.get(node_id)
    if sequence is not None:
        if sequence.kind is not SequenceKind.JOIN:
            return Decision(
                Action.NOTHING,
                f"{sequence.describe()}: not a join; resume or cancel it with `epochal`",
            )
        if sequence.cancelling:
            return Decision(
                Action.NOTHING,
                f"{sequence.describe()}: finish the cancel with `epochal cancel {node_id}`",
            )
        return Decision(Action.RESUME, f"{sequence.describe()}: resuming the join")
    if node.state is NodeState.LEFT:
        return Decision(
            Action.NOTHING,
            f"{node_id} left the ring; it does not join again (start a new node, with an empty "
            "data directory, to add one)",
        )
    if node.state is not NodeState.REGISTERED:
        owned = len(metadata.tokens.owners.get(node_id, ()))
        return Decision(Action.NOTHING, f"{node_id} is {node.state.value} with {owned} tokens")
    owners = len(metadata.tokens.owners)
    if owners:
        where = f"{owners} nodes own tokens: bootstrapping with streaming"
    else:
        where = "no node owns tokens yet: nothing to stream"
    return Decision(Action.JOIN, f"{node_id} owns no tokens ({where})")


class AutoJoin:
    """Drives this node's join until it has joined, cannot, or is cancelled."""

    def __init__(
        self,
        follower: MetadataFollower,
        operations: Operations,
        *,
        tokens: Sequence[int],
        num_tokens: int,
    ) -> None:
        self.follower = follower
        self.operations = operations
        self.tokens = tuple(tokens)
        self.num_tokens = num_tokens
        self._changed = asyncio.Event()
        follower.on_change.append(lambda _: self._changed.set())

    async def run(self) -> None:
        while not self.follower.caught_up:  # decide on the log as the CMS has it, not older
            await self._newer_than(self.follower.epoch)
        me = self.follower.node_id
        backoff_s = RETRY_FIRST_S
        prepared = False  # this run saw its join in the log
        while True:
            metadata = self.follower.metadata
            decision = decide(metadata, me)
            if decision.action is Action.NOTHING:
                log.info("auto-join: nothing to do: %s", decision.why)
                return
            if decision.action is Action.JOIN and prepared:
                log.warning("auto-join: the join of %s was cancelled; not joining again", me)
                self.operations.note("cancelled", "the automatic join was cancelled")
                return
            log.info("auto-join: %s", decision.why)
            try:
                if decision.action is Action.RESUME:
                    prepared = True
                    await self.operations.resume()
                else:
                    await self.operations.bootstrap(self.tokens, self.num_tokens)
                prepared = True
                node = self.follower.metadata.nodes.get(me)
                if node is not None and node.state is NodeState.JOINED:
                    log.info("auto-join: %s joined the ring at epoch %d", me, self.follower.epoch)
                    return
                continue  # the sequence is gone without a join: cancelled (decided above)
            except Rejected as refused:
                # The refusal may come from a view of the log older than the CMS's: learn what
                # it knows before judging it.
                await self.follower.catch_up(self.follower.epoch + 1, CATCH_UP_S)
                judged = self.follower.metadata
                others = [s.describe() for n, s in judged.sequences.items() if n != me]
                if me in judged.sequences:  # refused after its PREPARE (a step): resume it
                    prepared = True
                    log.warning(
                        "auto-join: the join stopped (%s); resuming in %.1f s", refused, backoff_s
                    )
                    self.operations.note("retrying", f"{refused}; resuming in {backoff_s:.1f} s")
                elif others:
                    message = (
                        refused.message
                        if refused.rule == "range_locked"
                        else f"{', '.join(others)} in flight: {refused}"
                    )
                    log.info("auto-join: waiting: %s", message)
                    self.operations.note("waiting", message)
                    await self._newer_than(judged.epoch)
                    backoff_s = RETRY_FIRST_S
                    continue
                elif refused.rule == "range_locked":  # the holder finished since: again, soon
                    log.info("auto-join: the lock is free now (%s)", refused.message)
                    backoff_s = RETRY_FIRST_S
                elif refused.rule in FINAL_RULES:
                    log.error("auto-join: %s refused: %s; not joining", me, refused)
                    self.operations.note(JOIN_REFUSED, f"automatic join refused: {refused}")
                    return
                else:
                    log.warning(
                        "auto-join: refused (%s); trying again in %.1f s", refused, backoff_s
                    )
                    self.operations.note("retrying", f"refused: {refused}")
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # this node stops
                # The operation it drove was cancelled (`epochal cancel` on this node).
                log.warning("auto-join: the join of %s was cancelled; not joining again", me)
                return
            except EpochalError as error:
                prepared = prepared or me in self.follower.metadata.sequences
                log.warning(
                    "auto-join: %s: %s; trying again in %.1f s",
                    type(error).__name__,
                    error,
                    backoff_s,
                )
                self.operations.note("retrying", f"{error}; trying again in {backoff_s:.1f} s")
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, RETRY_MAX_S)

    async def _newer_than(self, epoch: int) -> None:
        """Until the follower has applied an epoch after ``epoch`` (it may have already: then
        at once) or learnt where the CMS stands; every ``CHANGE_WAIT_S`` without news it
        fetches, in case a push was lost."""
        while True:
            self._changed.clear()
            if self.follower.epoch > epoch:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), CHANGE_WAIT_S)
                return
            except TimeoutError:
                self.follower.fetch_now()
