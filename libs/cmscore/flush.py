"""Applied state waiting for its lazy write: the log entries, entry ids and snapshots of the
slots applied since the last flush, handed to the shell as rows (DESIGN.md "Commit point": the
applied log is derived from slots a quorum holds, so it need not be written slot by slot)."""

from __future__ import annotations

from dataclasses import dataclass, field

from epochal.cmscore.rows import EntryIdRow, LogEntryRow, SnapshotRow
from epochal.cmscore.state_machine import SlotResult
from epochal.tcm import ClusterMetadata
from epochal.wire.metadata import MetadataEncoder


@dataclass(frozen=True, slots=True)
class AppliedBatch:
    """One lazy transaction: every slot applied up to ``applied_slot``."""

    applied_slot: int
    entries: list[LogEntryRow]
    entry_ids: list[EntryIdRow]
    snapshots: list[SnapshotRow]
    forget_entry_ids_below_epoch: int | None


@dataclass(slots=True)
class Unflushed:
    applied_slot: int = 0
    entries: list[LogEntryRow] = field(default_factory=list)
    entry_ids: list[EntryIdRow] = field(default_factory=list)
    snapshots: list[tuple[int, int, ClusterMetadata]] = field(default_factory=list)
    forget_ids_below: int | None = None
    due_announced: bool = False  # the shell was told a flush is due

    def add(self, result: SlotResult) -> tuple[LogEntryRow, ...]:
        """Queue a slot's applied state; its new log entries."""
        rows = tuple(
            LogEntryRow(e.epoch, e.slot, e.entry_id, e.kind, e.encoded) for e in result.entries
        )
        self.entries.extend(rows)
        self.entry_ids.extend(EntryIdRow(e.entry_id, e.epoch, e.digest) for e in result.entries)
        self.snapshots.extend((epoch, result.slot, md) for epoch, md in result.snapshots)
        if result.forget_ids_below_epoch is not None:
            self.forget_ids_below = result.forget_ids_below_epoch
        self.applied_slot = result.slot
        return rows

    def batch(self, encoder: MetadataEncoder) -> AppliedBatch | None:
        if self.applied_slot == 0:
            return None
        return AppliedBatch(
            applied_slot=self.applied_slot,
            entries=self.entries,
            entry_ids=self.entry_ids,
            snapshots=[
                SnapshotRow(epoch, at_slot, encoder.encode(metadata))
                for epoch, at_slot, metadata in self.snapshots
            ],
            forget_entry_ids_below_epoch=self.forget_ids_below,
        )
