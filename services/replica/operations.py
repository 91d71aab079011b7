"""Topology operations this node drives for itself: its join (bootstrap), resume and abort.

Theory of operation
-------------------
Where an operation stands lives in the metadata, not here: the node's ``InProgressSequence``
(kind, plan, last step taken) is in every copy of the log, so after a restart of any process
``resume`` reads it and carries on from the last step committed. Each step is one CMS commit
with an entry id derived from (node, PREPARE epoch, step), so a commit whose answer was lost is
retried without being applied twice. Before each step the driver waits for the progress barrier
over the step before it (``epochal.replica.barriers``); between START and MID it streams the
ranges it takes over (``epochal.replica.streaming``), whose progress is on disk.

Abort commits ``CancelSequence`` once per step taken, newest first, each after the barrier over
the change before it; the last one (undoing PREPARE) releases the lock and leaves the node LEFT,
and the data it streamed is deleted (it is not in any group, so none of it was ever served).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from epochal.cms_client import CMSClient
from epochal.replica.barriers import BarrierDriver
from epochal.replica.follower import MetadataFollower
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import OwnedRanges, ReplicaStorage
from epochal.replica.streaming import StreamProgressView, StreamReceiver
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    InProgressSequence,
    PrepareJoin,
    SequenceKind,
    Step,
    Transformation,
)
from epochal.tcm.allocation import DEFAULT_NUM_TOKENS
from epochal.tcm.barrier import BarrierLevel, barrier_for_step
from epochal.tcm.movements import movements
from epochal.tcm.tokens import TokenRange
from epochal.tcm.topology import placements_before_last_change
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 60.0
APPLY_TIMEOUT_S = 30.0


class OperationRefused(Exception):
    """The operation cannot start or go on as asked (the message says what to do instead)."""


class Operations:
    def __init__(
        self,
        settings: ReplicaSettings,
        follower: MetadataFollower,
        storage: ReplicaStorage,
        barriers: BarrierDriver,
        receiver: StreamReceiver,
        metrics: ReplicaMetrics,
    ) -> None:
        self.settings = settings
        self.follower = follower
        self.storage = storage
        self.barriers = barriers
        self.receiver = receiver
        self.metrics = metrics
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one of bootstrap / resume / abort at a time
        self.state = "idle"
        self.message = ""
        self.barrier_level = ""
        self.view = StreamProgressView()

    # ------------------------------------------------------------------ status

    def status(self) -> pb.OperationStatus:
        metadata = self.follower.metadata
        me = self.follower.node_id
        sequence = metadata.sequences.get(me)
        state, message = self.state, self.message
        if sequence is not None and not self._running():
            state = "interrupted" if state in ("idle", "failed") else state
            message = message or f"{sequence.describe()}: resume or abort it"
        view = self.view
        return pb.OperationStatus(
            node_id=me,
            epoch=metadata.epoch,
            kind=sequence.kind.value if sequence else "",
            step=sequence.done.value if sequence else "",
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
        )

    def _running(self) -> bool:
        return self._task is not None and not self._task.done()

    # ------------------------------------------------------------------ bootstrap

    async def bootstrap(self, tokens: Sequence[int], num_tokens: int) -> None:
        async with self._lock:
            me = self._me()
            if self._running():
                raise OperationRefused(f"{me} is already running its operation: ask Status")
            sequence = self.follower.metadata.sequences.get(me)
            if sequence is not None:
                raise OperationRefused(
                    f"{sequence.describe()}: use bootstrap resume or bootstrap abort"
                )
            prepare = PrepareJoin(
                node_id=me, tokens=tuple(tokens), num_tokens=num_tokens or DEFAULT_NUM_TOKENS
            )
            await self._commit(prepare, f"{me}:prepare-join")
            self._start()
        await self._wait()

    async def resume(self) -> None:
        async with self._lock:
            if not self._running():
                sequence = self._sequence()
                if sequence.cancelling:
                    raise OperationRefused(
                        f"{sequence.describe()}: it is being cancelled; "
                        "bootstrap abort finishes that"
                    )
                self._start()
        await self._wait()

    async def abort(self) -> None:
        async with self._lock:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._sequence()  # refuses when there is nothing to abort
            self.state, self.message = "aborting", ""
            try:
                await self._undo_all()
            except Exception as error:
                self.state, self.message = "failed", f"abort: {error}"
                raise
            self.state, self.message = "aborted", "every step undone; the node is LEFT"

    def _me(self) -> str:
        me = self.follower.node_id
        if not me:
            raise OperationRefused("this node has not registered with the CMS yet")
        return me

    def _sequence(self) -> InProgressSequence:
        me = self._me()
        sequence = self.follower.metadata.sequences.get(me)
        if sequence is None:
            raise OperationRefused(f"{me} has no topology operation in progress")
        if sequence.kind is not SequenceKind.JOIN:
            raise OperationRefused(f"{sequence.describe()} is not a join")
        return sequence

    def _start(self) -> None:
        self.state, self.message = "running", ""
        self.view = StreamProgressView()
        self._task = asyncio.get_running_loop().create_task(self._drive())

    async def _wait(self) -> None:
        task = self._task
        assert task is not None
        await asyncio.shield(task)

    async def _drive(self) -> None:
        try:
            while True:
                metadata = self.follower.metadata
                sequence = metadata.sequences.get(self.follower.node_id)
                if sequence is None:
                    break
                step = sequence.next_step
                if step is None:
                    raise OperationRefused(f"{sequence.describe()}: it is being cancelled")
                await self._barrier(metadata, sequence, f"{sequence.kind.value} {step.value}")
                if step is Step.MID:
                    self.state = "streaming"
                    await self.receiver.receive(sequence, movements(metadata, sequence), self.view)
                self.state = "running"
                await self._commit(
                    AdvanceSequence(node_id=sequence.node_id, step=step),
                    f"{sequence.node_id}@{sequence.prepared_epoch}:{step.value}",
                )
                self.metrics.operation_steps.labels(step.value).inc()
            self.state, self.message = "finished", ""
            log.info("join of %s finished at epoch %d", self.follower.node_id, self.follower.epoch)
        except asyncio.CancelledError:
            self.state, self.message = "cancelled", "stopped by an abort"
            raise
        except Exception as error:
            self.state, self.message = "failed", str(error)
            log.error("join of %s failed: %s (resume or abort it)", self.follower.node_id, error)
            raise

    async def _undo_all(self) -> None:
        me = self._me()
        while True:
            metadata = self.follower.metadata
            sequence = metadata.sequences.get(me)
            if sequence is None:
                break
            undo = "prepare" if sequence.done is Step.PREPARE else sequence.done.value
            await self._barrier(metadata, sequence, f"{sequence.kind.value} undo {undo}")
            await self._commit(
                CancelSequence(node_id=me), f"{me}@{sequence.prepared_epoch}:undo-{undo}"
            )
            self.metrics.operation_steps.labels(f"undo-{undo}").inc()
        removed = self.storage.cleanup(owned_ranges(self.follower.metadata, me))
        log.info("join of %s aborted; %d streamed cells and log entries deleted", me, removed)

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
        async with CMSClient(self.settings.cms, total_timeout_s=COMMIT_TIMEOUT_S) as cms:
            committed = await cms.commit(transformation, entry_id=entry_id)
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
