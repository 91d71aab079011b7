"""Mutation ids issued by this node as coordinator: the HLC, and one log per replicated range.

Theory of operation
-------------------
A mutation id is ``(node, log, sequence, hlc)`` (epochal.mtrack). This node keeps one open log
per (keyspace, range of the keyspace's placement at the coordinator's epoch); a log never spans
a range boundary, so when a later epoch splits or merges ranges the next write opens a new log
for its new range and seals the open logs that overlap it. A log is recorded durably before its
first id; sequence numbers and HLC values are reserved on disk in blocks before they are used
(``SequenceBlock``, ``HybridClock``), so a restart never issues an id or a timestamp twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from epochal.mtrack import HybridClock, MutationId, SequenceBlock
from epochal.replica.identity_store import LogRow
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.service import fatal
from epochal.tcm import ClusterMetadata, Keyspace
from epochal.tcm.tokens import TokenRange

LogKey = tuple[str, int, int, int]  # keyspace, its created epoch, range left, range right


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _OpenLog:
    row: LogRow
    block: SequenceBlock


class MutationIds:
    def __init__(
        self,
        node: int,
        storage: ReplicaStorage,
        *,
        max_skew_ms: int,
        hlc_reserve_ms: int,
        sequence_block: int,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self.node = node
        self.storage = storage
        self.sequence_block = sequence_block
        self.clock_ms = clock_ms
        self.hlc = HybridClock(
            max_skew_ms=max_skew_ms,
            reserve_ms=hlc_reserve_ms,
            ceiling=storage.identity.node_state().hlc_ceiling,
        )
        self._open: dict[LogKey, _OpenLog] = {}
        self._next_log = 1
        for row in storage.identity.coordinator_logs():
            self._next_log = max(self._next_log, row.log + 1)
            if not row.sealed:
                key = (row.keyspace, row.keyspace_epoch, row.range_left, row.range_right)
                self._open[key] = _OpenLog(row, self._block(row.sequence_ceiling))

    def _block(self, ceiling: int) -> SequenceBlock:
        # A reopened log resumes at its persisted ceiling: the sequences below it that were
        # never used are permanent holes, which reconciliation expects.
        return SequenceBlock(block_size=self.sequence_block, ceiling=ceiling)

    def observe(self, remote_hlc: int) -> None:
        """Advance past a client's or peer's clock (raises ClockSkew when it is too far ahead)."""
        if remote_hlc:
            self.hlc.observe(remote_hlc, self.clock_ms())

    def next_id(self, metadata: ClusterMetadata, keyspace: Keyspace, token: int) -> MutationId:
        log = self._log_for(metadata, keyspace, token)
        sequence, ceiling = log.block.allocate()
        tick = self.hlc.tick(self.clock_ms())
        try:
            if ceiling is not None:
                self.storage.identity.set_sequence_ceiling(log.row.log, ceiling)
            if tick.persist_ceiling is not None:
                self.storage.identity.set_hlc_ceiling(tick.persist_ceiling)
        except Exception as error:
            # The clock and the log already count past what the disk holds: going on would
            # let a restart issue these ids again.
            fatal(f"reserving mutation ids failed: {error!r}")
            raise
        return MutationId(node=self.node, log=log.row.log, sequence=sequence, hlc=tick.hlc)

    def _log_for(self, metadata: ClusterMetadata, keyspace: Keyspace, token: int) -> _OpenLog:
        placement = metadata.placements[keyspace.replication]
        assert placement.points, "the coordinator checks the token has replicas first"
        index = placement.index_of(token)
        left, right = placement.points[index - 1], placement.points[index]
        key = (keyspace.name, keyspace.created_epoch, left, right)
        log = self._open.get(key)
        if log is None:
            log = self._open_log(key, metadata.epoch)
        return log

    def _open_log(self, key: LogKey, epoch: int) -> _OpenLog:
        name, created, left, right = key
        wanted = TokenRange(left, right)
        replaced = [
            k
            for k in self._open
            if k[0] == name and (k[1] != created or TokenRange(k[2], k[3]).intersects(wanted))
        ]
        row = LogRow(self._next_log, name, created, left, right, epoch, False, 0)
        self.storage.identity.open_log(row, [self._open[k].row.log for k in replaced])
        for k in replaced:
            del self._open[k]
        self._next_log += 1
        log = self._open[key] = _OpenLog(row, self._block(row.sequence_ceiling))
        return log

    def could_have_issued(self, mutation_id: MutationId) -> bool:
        """Whether this node could have issued ``mutation_id`` (a client resends only ids a
        coordinator gave it): a log it opened, a sequence below that log's reserved ceiling."""
        if mutation_id.node != self.node:
            raise ValueError(f"{mutation_id} is another node's")
        if mutation_id.log >= self._next_log:
            return False
        for log in self._open.values():
            if log.row.log == mutation_id.log:
                return mutation_id.sequence < log.block.next_sequence
        return True  # a sealed log: its ceiling is on disk only, the id may be from it

    @property
    def open_logs(self) -> int:
        return len(self._open)
