"""What a CMS member keeps on disk, as plain values: its votes, the applied log, the entry ids
and snapshots. The member core emits them to persist; storage (and the simulator's disk) keep
them and hand them back at start."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AcceptedRow:
    slot: int
    ballot_round: int
    ballot_node: str
    value: bytes


@dataclass(frozen=True, slots=True)
class LogEntryRow:
    epoch: int
    slot: int
    entry_id: str
    kind: str
    transformation: bytes


@dataclass(frozen=True, slots=True)
class EntryIdRow:
    entry_id: str
    epoch: int
    digest: int


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    epoch: int
    slot: int
    metadata: bytes


@dataclass(frozen=True, slots=True)
class StoredState:
    promised: tuple[int, str] | None
    accepted: tuple[AcceptedRow, ...]
    applied_slot: int
    snapshot: SnapshotRow | None
    entries: tuple[LogEntryRow, ...]  # after the snapshot (all of them without one)
    entry_ids: tuple[EntryIdRow, ...]
