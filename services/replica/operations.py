"""Topology operations this node drives: its join, leave, replace or move, the removal of a dead
node, and resume, abort (cancel) and cleanup.

Theory of operation
-------------------
Where an operation stands lives in the metadata, not here: the node's ``InProgressSequence``
(kind, plan, last step taken) is in every copy of the log, so after a restart of any process
``resume`` reads it and carries on from the last step committed. Each step is one CMS commit
with an entry id derived from (node, PREPARE epoch, step), so a commit whose answer was lost is
retried without being applied twice. Before each step the driver waits for the progress barrier
over the step before it (``epochal.replica.barriers``); between START and MID every node the
sequence moves ranges to streams them (``epochal.replica.stream_receiver``): this node itself
when it is a receiver (a join, a replace, the ranges a move gains), the others when this node
asks them with ``PullRanges`` (a decommission, a removal, the ranges a move gives up). Stream
progress is on each receiver's disk. Every call to another replica goes through
``epochal.replica.peer_client``; this module sees domain values only.

The node under operation drives its own sequence; a removal is driven by the node the operator
asks, for a dead one. Resume and cancel work from any node: the plan is in the metadata.

Cancel (abort) commits ``CancelSequence`` once per step taken, newest first, each after the
barrier over the change before it; the last one (undoing PREPARE) releases the lock. Then the
receivers delete what they streamed and no longer own: none of it was ever served, since a
receiver becomes a read replica only at MID.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from epochal.admin import OperationStatus
from epochal.cms_client import CMSClient
from epochal.errors import EpochalError, OperationRefused, Unavailable
from epochal.errors import Rejected as CommitRefused
from epochal.replica.barriers import BarrierDriver
from epochal.replica.data_store import OwnedRanges
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.peer_client import PeerClient
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_receiver import StreamProgressView, StreamReceiver
from epochal.replica.stream_values import PullRequest
from epochal.runtime.commit_tracing import traced_commit
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    InProgressSequence,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    SequenceKind,
    Step,
    Transformation,
)
from epochal.tcm.allocation import DEFAULT_NUM_TOKENS
from epochal.tcm.barrier import BarrierLevel, barrier_for_step
from epochal.tcm.movements import movements
from epochal.tcm.tokens import TokenRange
from epochal.tcm.topology import placements_before_last_change
from epochal.telemetry import attributes as attr

log = logging.getLogger(__name__)
MAX_UNDO_PASSES = 64

COMMIT_TIMEOUT_S = 60.0
APPLY_TIMEOUT_S = 30.0
PULL_ATTEMPTS = 5
RETRIED_PULL_ERRORS = Unavailable  # DEADLINE_EXCEEDED's TimedOut too: it may answer if asked again
LIVENESS_TIMEOUT_S = 2.0  # a node named dead that answers its Describe within this is alive


@dataclass(eq=False, repr=False)
class Operations:
    settings: ReplicaSettings
    follower: MetadataFollower
    storage: ReplicaStorage
    barriers: BarrierDriver
    receiver: StreamReceiver
    peers: PeerClient
    metrics: ReplicaMetrics

    def __post_init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one start / resume / cancel at a time
        self.target = ""  # the node whose sequence this node drives (itself unless a removal)
        self.kind = ""  # that sequence's kind and last step, kept once it is gone
        self.step = ""
        self.state = "idle"
        self.message = ""
        self.barrier_level = ""
        self.view = StreamProgressView()

    # ------------------------------------------------------------------ status

    def status(self) -> OperationStatus:
        metadata = self.follower.metadata
        target = self.target or self.follower.node_id
        sequence = metadata.sequences.get(target)
        state, message = self.state, self.message
        if sequence is not None and not self._running():
            state = "interrupted" if state in ("idle", "failed") else state
            message = message or f"{sequence.describe()}: resume or cancel it"
        view = self.view
        return OperationStatus(
            node_id=target,
            epoch=metadata.epoch,
            kind=sequence.kind.value if sequence else self.kind,
            step=sequence.done.value if sequence else self.step,
            state=state,
            message=message,
            prepared_epoch=sequence.prepared_epoch if sequence else 0,
            streamed_bytes=view.bytes,
            streamed_cells=view.cells,
            streamed_mutations=view.mutations,
            ranges_done=view.pieces_done,
            ranges_total=view.pieces_total,
            eta_s=view.eta_s,
            barrier_level=self.barrier_level,
            reconciled_mutations=view.reconciled,
        )

    def note(self, state: str, message: str) -> None:
        """What the automatic join is doing while no operation runs here (waiting for a range
        lock, retrying, refused), for ``status``."""
        if not self._running():
            self.target = self.follower.node_id
            self.kind = SequenceKind.JOIN.value
            self.state, self.message = state, message

    def _running(self) -> bool:
        return self._task is not None and not self._task.done()

    # ------------------------------------------------------------------ starting

    async def bootstrap(self, tokens: Sequence[int], num_tokens: int) -> None:
        me = self._me()
        await self._begin(
            PrepareJoin(
                node_id=me, tokens=tuple(tokens), num_tokens=num_tokens or DEFAULT_NUM_TOKENS
            ),
            me,
        )

    async def decommission(self) -> None:
        me = self._me()
        await self._begin(PrepareLeave(node_id=me), me)

    async def remove(self, node_id: str) -> None:
        me = self._me()
        if not node_id:
            raise OperationRefused("name the dead node to remove (node_id)")
        if node_id == me:
            raise OperationRefused(f"{me} cannot remove itself: decommission it instead")
        await self._refuse_if_alive(node_id, "decommission it instead, or stop it first")
        await self._begin(PrepareLeave(node_id=node_id, remove=True), node_id)

    async def replace(self, replaced: str) -> None:
        me = self._me()
        if not replaced:
            raise OperationRefused("name the dead node to replace (replaced)")
        await self._refuse_if_alive(replaced, "stop it before replacing it")
        await self._begin(PrepareReplace(node_id=me, replaced=replaced), me)

    async def move(self, tokens: Sequence[int]) -> None:
        me = self._me()
        if not tokens:
            raise OperationRefused("name the tokens to move to")
        await self._begin(PrepareMove(node_id=me, tokens=tuple(tokens)), me)

    async def _refuse_if_alive(self, node_id: str, instead: str) -> None:
        """Remove and replace are for dead nodes: refuse when ``node_id`` answers, as itself, at
        its address (the data it holds and would keep serving is not the streamed copy). A node
        that does not answer in time counts as dead; the PREPARE's validation names one that is
        not in the directory. Only an answer naming ``node_id`` counts: not another node that
        answers at that address now."""
        info = self.follower.metadata.nodes.get(node_id)
        if info is None:
            return
        try:
            answer = await self.peers.describe(info.address, timeout_s=LIVENESS_TIMEOUT_S)
        except EpochalError:
            return
        if answer.node_id == node_id:
            raise OperationRefused(
                f"{node_id} is alive: it answered at {info.address} (epoch {answer.epoch}); "
                f"{instead}"
            )

    async def _begin(self, prepare: Transformation, target: str) -> None:
        async with self._lock:
            self._check_idle()
            sequence = self.follower.metadata.sequences.get(target)
            if sequence is not None:
                raise OperationRefused(f"{sequence.describe()}: resume or cancel it")
            # A new id per attempt (the epoch it was asked at): after a cancel the same
            # operation may be asked again, and must not be answered from the first one.
            await self._commit(prepare, f"{target}:{prepare.kind}@{self.follower.epoch}")
            self._start(target)
        await self._wait()

    async def resume(self, node_id: str = "", kind: SequenceKind | None = None) -> None:
        async with self._lock:
            target = node_id or self._me()
            if not (self._running() and self.target == target):
                self._check_idle()
                sequence = self._sequence(target, kind)
                if sequence.cancelling:
                    raise OperationRefused(
                        f"{sequence.describe()}: it is being cancelled; cancel finishes that"
                    )
                self._start(target)
        await self._wait()

    def _check_idle(self) -> None:
        if self._running():
            raise OperationRefused(
                f"{self._me()} is already driving the operation of {self.target}: ask Status"
            )

    # ------------------------------------------------------------------ cancel, cleanup

    async def abort(self, node_id: str = "", kind: SequenceKind | None = None) -> None:
        async with self._lock:
            target = node_id or self._me()
            if self._task is not None and self.target == target:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._check_idle()
            sequence = self._sequence(target, kind)  # refuses when there is nothing to cancel
            self.target = target
            self.state, self.message = "aborting", ""
            try:
                await self._undo_all(sequence)
            except Exception as error:
                self.state, self.message = "failed", f"abort: {_why(error)}"
                raise
            self.state, self.message = "aborted", "every step undone"

    async def cleanup(self, epoch: int = 0) -> tuple[int, int]:
        """Delete what this node no longer replicates, once caught up to ``epoch``; answers
        (the epoch it read the owners at, how many cells and log entries went). A stream
        still running here stores nothing after that: its guard reads the same metadata."""
        if epoch > self.follower.epoch and not await self.follower.catch_up(epoch, APPLY_TIMEOUT_S):
            raise OperationRefused(f"could not catch up to epoch {epoch} to clean up")
        metadata = self.follower.metadata
        removed = self.storage.data.cleanup(owned_ranges(metadata, self._me()))
        self.metrics.cleanup_removed.inc(removed)
        log.info("cleanup at epoch %d removed %d cells and log entries", metadata.epoch, removed)
        return metadata.epoch, removed

    # ------------------------------------------------------------------ driving

    def _me(self) -> str:
        me = self.follower.node_id
        if not me:
            raise OperationRefused("this node has not registered with the CMS yet")
        return me

    def _sequence(self, target: str, kind: SequenceKind | None) -> InProgressSequence:
        sequence = self.follower.metadata.sequences.get(target)
        if sequence is None:
            raise OperationRefused(f"{target} has no topology operation in progress")
        if kind is not None and sequence.kind is not kind:
            raise OperationRefused(f"{sequence.describe()} is not a {kind.value}")
        return sequence

    def _start(self, target: str) -> None:
        self.target = target
        self.state, self.message = "running", ""
        self.view = StreamProgressView()
        self._task = asyncio.get_running_loop().create_task(self._drive(target))

    async def _wait(self) -> None:
        task = self._task
        assert task is not None
        await asyncio.shield(task)

    async def _drive(self, target: str) -> None:
        what = target
        try:
            while True:
                metadata = self.follower.metadata
                sequence = metadata.sequences.get(target)
                if sequence is None:
                    break
                what = f"{sequence.kind.value} of {target}"
                self.kind, self.step = sequence.kind.value, sequence.done.value
                step = sequence.next_step
                if step is None:
                    raise OperationRefused(f"{sequence.describe()}: it is being cancelled")
                await self._barrier(metadata, sequence, f"{sequence.kind.value} {step.value}")
                if step is Step.MID:
                    self.state = "streaming"
                    await self._stream(metadata, sequence)
                self.state = "running"
                await self._commit(
                    AdvanceSequence(node_id=sequence.node_id, step=step),
                    f"{sequence.node_id}@{sequence.prepared_epoch}:{step.value}",
                )
                self.metrics.operation_steps.labels(step.value).inc()
                self.step = step.value
            self.state, self.message = "finished", ""
            log.info("%s finished at epoch %d", what, self.follower.epoch)
        except asyncio.CancelledError:
            self.state, self.message = "cancelled", "stopped by a cancel"
            raise
        except Exception as error:
            self.state, self.message = "failed", _why(error)
            log.error(
                "%s failed: %s (resume or cancel it)", what, error, exc_info=not _expected(error)
            )
            raise

    async def _stream(self, metadata: ClusterMetadata, sequence: InProgressSequence) -> None:
        """Every receiver streams what the sequence moves to it; answers when all are done."""
        moved = movements(metadata, sequence)
        me = self.follower.node_id
        receivers = sorted({m.receiver for m in moved})
        jobs = [
            self.receiver.receive(sequence, moved, self.view)
            if receiver == me
            else self._pull(metadata, sequence, receiver)
            for receiver in receivers
        ]
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        failed = []
        for receiver, outcome in zip(receivers, outcomes, strict=True):
            if isinstance(outcome, Exception):
                if not _expected(outcome):
                    log.error("streaming to %s failed", receiver, exc_info=outcome)
                failed.append(f"{receiver}: {_why(outcome)}")
            elif isinstance(outcome, BaseException):
                failed.append(f"{receiver}: cancelled")
        if failed:
            shown = "; ".join(failed)
            raise OperationRefused(f"streaming failed on {len(failed)} node(s): {shown}")

    async def _pull(
        self, metadata: ClusterMetadata, sequence: InProgressSequence, receiver: str
    ) -> None:
        info = metadata.nodes.get(receiver)
        if info is None:
            raise OperationRefused(f"{receiver} is not in the directory at epoch {metadata.epoch}")
        request = PullRequest(
            epoch=self.follower.epoch,
            sequence_node=sequence.node_id,
            prepared_epoch=sequence.prepared_epoch,
        )
        for attempt in range(PULL_ATTEMPTS):
            try:
                reply = await self.peers.pull_ranges(
                    info.address, request, timeout_s=self.settings.stream_timeout_s
                )
                break
            except EpochalError as error:
                problem = f"{error.status} {error.message}"
                if not isinstance(error, RETRIED_PULL_ERRORS) or attempt == PULL_ATTEMPTS - 1:
                    raise OperationRefused(problem) from None
                log.warning("%s could not pull its ranges (%s); asking again", receiver, problem)
                await asyncio.sleep(self.settings.barrier_backoff_ms / 1000)
        self.view.add(reply)
        log.info(
            "%s pulled %d ranges (%d bytes) for %s",
            receiver,
            reply.ranges_done,
            reply.streamed_bytes,
            sequence.describe(),
        )

    async def _undo_all(self, sequence: InProgressSequence) -> None:
        target = sequence.node_id
        receivers = {m.receiver for m in movements(self.follower.metadata, sequence)}
        # Each pass undoes a step or learns a newer epoch (a stale cancel); a sequence has
        # four steps, so a bound this loose is only ever met by a bug.
        for _ in range(MAX_UNDO_PASSES):
            metadata = self.follower.metadata
            current = metadata.sequences.get(target)
            if current is None:
                break
            self.kind, self.step = current.kind.value, current.done.value
            undo = "prepare" if current.done is Step.PREPARE else current.done.value
            await self._barrier(metadata, current, f"{current.kind.value} undo {undo}")
            cancel = CancelSequence(node_id=target, last_step=current.done)
            try:
                await self._commit(cancel, f"{target}@{current.prepared_epoch}:undo-{undo}")
            except CommitRefused as refused:
                if refused.rule != "stale_cancel":
                    raise
                # The sequence's driver took a step after the metadata read here: learn it,
                # then undo that one (the entry id names the step, so no id is reused).
                log.info("%s; catching up before the next undo", refused.message)
                await self.follower.catch_up(metadata.epoch + 1, APPLY_TIMEOUT_S)
                continue
            self.metrics.operation_steps.labels(f"undo-{undo}").inc()
        else:
            raise OperationRefused(
                f"{sequence.describe()} is still there after {MAX_UNDO_PASSES} undo passes"
            )
        me = self._me()
        removed = self.storage.data.cleanup(owned_ranges(self.follower.metadata, me))
        log.info(
            "%s of %s cancelled; %d streamed cells and log entries deleted here",
            sequence.kind.value,
            target,
            removed,
        )
        for receiver in sorted(receivers - {me}):
            await self._remote_cleanup(receiver)

    async def _remote_cleanup(self, node_id: str) -> None:
        info = self.follower.metadata.nodes.get(node_id)
        if info is None:
            return
        try:
            removed = await self.peers.cleanup(
                info.address, self.follower.epoch, timeout_s=COMMIT_TIMEOUT_S
            )
            log.info("%s deleted %d streamed cells and log entries", node_id, removed)
        except EpochalError as error:
            log.warning(
                "%s could not delete what it streamed (%s %s): run cleanup on it",
                node_id,
                error.status,
                error.message,
            )

    async def _barrier(
        self, metadata: ClusterMetadata, sequence: InProgressSequence, what: str
    ) -> None:
        self.state = "waiting_for_barrier"
        barrier = barrier_for_step(
            placements_before_last_change(metadata.placements, sequence),
            metadata.placements,
            sequence.locked,
            epoch=metadata.epoch,
            locations=metadata.locations(),
            local_node=self.follower.node_id,
            minimum=self.settings.barrier_level_minimum,
            dead=_dead(sequence),
        )
        await self.barriers.wait(barrier, what, self._on_level)

    def _on_level(self, level: BarrierLevel) -> None:
        self.barrier_level = level.value

    async def _commit(self, transformation: Transformation, entry_id: str) -> None:
        async with CMSClient(
            self.settings.cms, total_timeout_s=COMMIT_TIMEOUT_S, observer=self.metrics.commits
        ) as cms:
            committed = await traced_commit(cms, attr.REPLICA_COMMIT, transformation, entry_id)
        log.info("committed %s at epoch %d", transformation, committed.epoch)
        if not await self.follower.catch_up(committed.epoch, APPLY_TIMEOUT_S):
            raise OperationRefused(
                f"{transformation} was committed at epoch {committed.epoch} but this node did "
                f"not apply it within {APPLY_TIMEOUT_S} s"
            )


def _dead(sequence: InProgressSequence) -> frozenset[str]:
    if sequence.kind is SequenceKind.REPLACE:
        return frozenset({sequence.replaced})
    if sequence.kind is SequenceKind.REMOVE:
        return frozenset({sequence.node_id})
    return frozenset()


def owned_ranges(metadata: ClusterMetadata, node_id: str) -> list[OwnedRanges]:
    """Per keyspace, the non-wrapping token ranges whose read or write group holds ``node_id``."""
    owned = []
    for keyspace in metadata.keyspaces.values():
        placement = metadata.placements.get(keyspace.replication)
        ranges: list[tuple[int, int]] = []
        if placement is not None and placement.points:
            for index, point in enumerate(placement.points):
                if node_id in placement.reads[index] | placement.writes[index]:
                    ranges.extend(TokenRange(placement.points[index - 1], point).pieces())
        table_ids = tuple(sorted(t.id for t in keyspace.tables.values()))
        owned.append(OwnedRanges(keyspace.name, table_ids, tuple(ranges)))
    return owned


def _expected(error: Exception) -> bool:
    return isinstance(error, EpochalError)


def _why(error: Exception) -> str:
    """What an operation's status says of the error that failed it: an expected error's
    message; of a bug, only that it was one (its text and traceback are in the log)."""
    if _expected(error):
        return str(error)
    return "an internal error (logged by the replica with its traceback)"
