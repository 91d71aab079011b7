"""A member's state from what its disk holds or a peer sent: the snapshot and the log after it,
replayed entry by entry. Pure."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from epochal.cmscore.rows import LogEntryRow, StoredState
from epochal.cmscore.state_machine import MetadataStateMachine
from epochal.tcm import ClusterMetadata
from epochal.wire.metadata import MalformedInput, decode_metadata, decode_transformation

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Replayed:
    machine: MetadataStateMachine
    # Why the replay stopped short ("" when it did not): an entry this version cannot read, or
    # a damaged log. The member then stops applying (``MemberCore.stop_applying``).
    unreadable: str


def replay(stored: StoredState, entry_id_retention_epochs: int) -> Replayed:
    """The state machine from the stored snapshot and log, up to the first entry it cannot
    replay."""
    metadata = ClusterMetadata.empty()
    unreadable = ""
    try:
        if stored.snapshot is not None:
            metadata = decode_metadata(stored.snapshot.metadata)
        for row in stored.entries:
            metadata = next_state(metadata, row)
    except (MemoryError, RecursionError):
        raise
    except Exception as error:  # MalformedInput, or a value a domain type refuses
        unreadable = f"it cannot be replayed past epoch {metadata.epoch}: {error}"
    machine = MetadataStateMachine(
        metadata,
        stored.applied_slot,
        [(r.entry_id, r.epoch, r.digest) for r in stored.entry_ids],
        entry_id_retention_epochs,
    )
    return Replayed(machine, unreadable)


def next_state(metadata: ClusterMetadata, row: LogEntryRow) -> ClusterMetadata:
    """The state after a log entry read from storage or a peer's log; raises MalformedInput
    when it does not follow ``metadata`` or cannot be read."""
    if row.epoch != metadata.epoch + 1:
        raise MalformedInput(
            f"the entry of epoch {row.epoch} does not follow epoch {metadata.epoch}"
        )
    transformation = decode_transformation(row.transformation)
    try:
        return transformation.execute(metadata)
    except (MemoryError, RecursionError):
        raise  # the process's, not the entry's
    except Exception as error:  # a bug: the entry was validated when it was applied
        log.exception("replaying epoch %d (%s) failed", row.epoch, transformation)
        raise MalformedInput(f"replaying epoch {row.epoch} ({transformation}) failed") from error
