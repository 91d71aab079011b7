"""A CMS member's disk in the simulator: the rows ``epochal.cms.storage`` keeps, with the same
write semantics, held in memory. A vote (``save_acceptor``) and an installed state transfer are
durable when written, and make every lazy write before them durable too (one WAL, flushed in
order). The applied state (``save_applied``) is lazy: readers see it at once, a process crash
keeps it (the operating system holds it), and a power loss drops it unless a durable write
followed. A restart loads what is left, as the server loads its database."""

from __future__ import annotations

from dataclasses import dataclass, field

from epochal.cmscore import AppliedBatch
from epochal.cmscore.rows import AcceptedRow, EntryIdRow, LogEntryRow, SnapshotRow, StoredState


@dataclass(slots=True)
class SimDisk:
    promised: tuple[int, str] | None = None
    accepted: dict[int, AcceptedRow] = field(default_factory=dict)
    applied_slot: int = 0
    entries: dict[int, LogEntryRow] = field(default_factory=dict)  # by epoch
    entry_ids: dict[str, EntryIdRow] = field(default_factory=dict)
    snapshots: dict[int, SnapshotRow] = field(default_factory=dict)  # by epoch
    lazy: list[AppliedBatch] = field(default_factory=list)  # written, not yet durable

    def save_acceptor(self, promised: tuple[int, str] | None, rows: list[AcceptedRow]) -> int:
        """Durable; returns the applied slot the lazy writes before it made durable (0: none)."""
        synced = self.sync()
        if promised is not None:
            self.promised = promised
        for row in rows:
            self.accepted[row.slot] = row
        return synced

    def save_applied(self, batch: AppliedBatch) -> None:
        self.lazy.append(batch)

    def sync(self) -> int:
        synced = 0
        for batch in self.lazy:
            self._apply(batch)
            synced = batch.applied_slot
        self.lazy = []
        return synced

    def power_loss(self) -> bool:
        """Drops the lazy writes; returns whether there were any."""
        lost = bool(self.lazy)
        self.lazy = []
        return lost

    def readable(self) -> SimDisk:
        """What a reader sees (a peer's FetchLog): the lazy writes too."""
        view = SimDisk(
            self.promised,
            dict(self.accepted),
            self.applied_slot,
            dict(self.entries),
            dict(self.entry_ids),
            dict(self.snapshots),
            list(self.lazy),
        )
        view.sync()
        return view

    def _apply(self, batch: AppliedBatch) -> None:
        for row in batch.entries:
            self.entries.setdefault(row.epoch, row)
        for id_row in batch.entry_ids:
            self.entry_ids[id_row.entry_id] = id_row
        if batch.forget_entry_ids_below_epoch is not None:
            bound = batch.forget_entry_ids_below_epoch
            self.entry_ids = {i: r for i, r in self.entry_ids.items() if r.epoch >= bound}
        for snapshot in batch.snapshots:
            self.snapshots.setdefault(snapshot.epoch, snapshot)
        self._forget_accepted(batch.applied_slot)
        self.applied_slot = max(self.applied_slot, batch.applied_slot)

    def install(
        self,
        snapshot: SnapshotRow | None,
        entries: list[LogEntryRow],
        entry_ids: list[EntryIdRow],
        applied_slot: int,
    ) -> None:
        self.sync()
        if snapshot is not None:
            self.snapshots = {e: s for e, s in self.snapshots.items() if e < snapshot.epoch}
            self.snapshots[snapshot.epoch] = snapshot
        if entries:
            first = entries[0].epoch
            self.entries = {e: r for e, r in self.entries.items() if e < first}
            self.entries.update((row.epoch, row) for row in entries)
        self.entry_ids = {row.entry_id: row for row in entry_ids}
        self._forget_accepted(applied_slot)
        self.applied_slot = applied_slot

    def _forget_accepted(self, up_to: int) -> None:
        for slot in [s for s in self.accepted if s <= up_to]:
            del self.accepted[slot]

    def latest_snapshot(self) -> SnapshotRow | None:
        return self.snapshots[max(self.snapshots)] if self.snapshots else None

    def entries_after(self, epoch: int) -> list[LogEntryRow]:
        """The log after ``epoch`` as far as it runs without a gap."""
        rows = []
        while (row := self.entries.get(epoch + 1)) is not None:
            rows.append(row)
            epoch += 1
        return rows

    def load(self) -> StoredState:
        self.sync()  # a process restarting reads what its writes left, synced or not
        snapshot = self.latest_snapshot()
        return StoredState(
            promised=self.promised,
            accepted=tuple(self.accepted[s] for s in sorted(self.accepted)),
            applied_slot=self.applied_slot,
            snapshot=snapshot,
            entries=tuple(self.entries_after(snapshot.epoch if snapshot else 0)),
            entry_ids=tuple(sorted(self.entry_ids.values(), key=lambda r: r.epoch)),
        )

    def snapshot_epochs(self) -> list[int]:
        return sorted(self.snapshots)
