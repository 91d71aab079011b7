"""The CMS state machine: chosen Paxos slots in, epochs out. Pure (no I/O, clock or randomness).

Theory of operation
-------------------
A chosen slot holds a batch of proposal items, each a transformation with the client's entry id.
Every member applies the same slots in the same order, so every decision here must depend only
on the slots: items are applied in order; an item whose entry id was already applied is a no-op
that answers the first epoch (at-most-once, checked and recorded at apply, DESIGN.md); an item
whose id is known with another digest is a reused id and a no-op with an error; an item that no
longer validates is a no-op with its rejection (the leader validated it against this very state
when it had one slot in flight, so this is a second line of defence, not the normal path); any
other item takes the next epoch. Applying is total (DESIGN.md principle 7): whatever a chosen
slot holds, every member reaches the same state; a transformation whose validate or execute
raises (a bug) is a no-op with a ``validation_failed`` rejection, alike everywhere.

A ``TriggerSnapshot`` may stand anywhere in a slot (a client's is batched like any other
commit): its snapshot is the state right after it, at its own epoch, whatever follows it in
the slot.

Entry ids are remembered for ``retention_epochs`` epochs; forgetting is decided by epoch alone,
so every member forgets the same ids at the same point. The at-most-once window therefore
covers retries that come within that many epochs of the first attempt.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochal.cmscore.config import BUG_FORGET_ENTRY_ID, BUG_SNAPSHOT_AS_IF_LAST
from epochal.tcm import ClusterMetadata, Rejected, Transformation, TriggerSnapshot

log = logging.getLogger(__name__)

DEFAULT_RETENTION_EPOCHS = 100_000


def digest_of(encoded_transformation: bytes) -> int:
    """A stable signed 64-bit digest of a transformation's deterministic encoding."""
    raw = hashlib.blake2b(encoded_transformation, digest_size=8).digest()
    return int.from_bytes(raw, "big", signed=True)


@dataclass(frozen=True, slots=True)
class ProposalItem:
    transformation: Transformation
    encoded: bytes
    entry_id: str
    digest: int


@dataclass(frozen=True, slots=True)
class AppliedEntry:
    epoch: int
    slot: int
    entry_id: str
    kind: str
    encoded: bytes
    digest: int


@dataclass(frozen=True, slots=True)
class Outcome:
    entry_id: str
    digest: int  # of the item this is the outcome of
    epoch: int = 0
    duplicate: bool = False
    rejection: Rejected | None = None
    reused_id_of_epoch: int = 0  # the id was first used for another transformation, at this epoch

    @property
    def committed(self) -> bool:
        return self.epoch > 0 and self.reused_id_of_epoch == 0


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a client is told of a committed transformation."""

    epoch: int
    duplicate: bool
    batch_size: int = 0  # values in the slot that carried it, when known
    slot: int = 0  # the slot that carried it; 0 when answered from the entry-id record


@dataclass(frozen=True, slots=True)
class SlotResult:
    slot: int
    entries: tuple[AppliedEntry, ...]
    outcomes: tuple[Outcome, ...]
    # (epoch, state at that epoch) of each TriggerSnapshot the slot applied, in order
    snapshots: tuple[tuple[int, ClusterMetadata], ...]
    forget_ids_below_epoch: int | None


class MetadataStateMachine:
    # Bugs a simulator run plants (epochal.cmscore.config); never set otherwise.
    planted_bugs: frozenset[str] = frozenset()

    def __init__(
        self,
        metadata: ClusterMetadata,
        applied_slot: int,
        entry_ids: Iterable[tuple[str, int, int]] = (),
        retention_epochs: int = DEFAULT_RETENTION_EPOCHS,
    ) -> None:
        if retention_epochs < 1:
            raise ValueError(f"retention_epochs must be >= 1, got {retention_epochs}")
        self.metadata = metadata
        self.applied_slot = applied_slot
        self.retention_epochs = retention_epochs
        # Insertion order is epoch order, so forgetting pops from the front.
        self._ids: OrderedDict[str, tuple[int, int]] = OrderedDict()
        for entry_id, epoch, digest in sorted(entry_ids, key=lambda record: record[1]):
            self._ids[entry_id] = (epoch, digest)

    @property
    def epoch(self) -> int:
        return self.metadata.epoch

    def lookup(self, entry_id: str) -> tuple[int, int] | None:
        """(epoch, digest) of an applied entry id still remembered."""
        return self._ids.get(entry_id)

    def entry_ids(self) -> list[tuple[str, int, int]]:
        return [(entry_id, epoch, digest) for entry_id, (epoch, digest) in self._ids.items()]

    def apply_slot(self, slot: int, items: Sequence[ProposalItem]) -> SlotResult:
        assert slot == self.applied_slot + 1, f"slot {slot} applied after {self.applied_slot}"
        entries: list[AppliedEntry] = []
        outcomes: list[Outcome] = []
        snapshots: list[tuple[int, ClusterMetadata]] = []
        for item in items:
            outcome = self._apply_item(slot, item, entries)
            outcomes.append(outcome)
            if (
                outcome.committed
                and not outcome.duplicate
                and isinstance(item.transformation, TriggerSnapshot)
            ):
                snapshots.append((outcome.epoch, self.metadata))
        self.applied_slot = slot
        return SlotResult(
            slot=slot,
            entries=tuple(entries),
            outcomes=tuple(outcomes),
            snapshots=self._planted_snapshots(snapshots),
            forget_ids_below_epoch=self._forget_old_ids(),
        )

    def apply_validated(
        self, slot: int, items: Sequence[ProposalItem], states: Sequence[ClusterMetadata]
    ) -> SlotResult:
        """The leader's own batch: it validated and executed these items, in order, against
        exactly the current state, reaching ``states`` (the state after each item). Same result
        as ``apply_slot``, without doing that work a second time (the caller checks the state
        is the one it started from). A batch that is not what the builder promises — an entry
        id known already or twice in it, states that do not follow — is applied the long way,
        as any member applies a chosen slot: the slot is chosen whatever the leader thought."""
        assert slot == self.applied_slot + 1, f"slot {slot} applied after {self.applied_slot}"
        base_epoch = self.metadata.epoch
        ids = {item.entry_id for item in items}
        if (
            len(states) != len(items)
            or len(ids) != len(items)
            or any(entry_id in self._ids for entry_id in ids)
            or any(state.epoch != base_epoch + n for n, state in enumerate(states, start=1))
        ):
            return self.apply_slot(slot, items)
        entries: list[AppliedEntry] = []
        outcomes: list[Outcome] = []
        snapshots: list[tuple[int, ClusterMetadata]] = []
        for epoch, item, state in zip(
            range(base_epoch + 1, base_epoch + 1 + len(items)), items, states, strict=True
        ):
            outcomes.append(self._record(slot, epoch, item, entries))
            if isinstance(item.transformation, TriggerSnapshot):
                snapshots.append((epoch, state))
        if states:
            self.metadata = states[-1]
        self.applied_slot = slot
        return SlotResult(
            slot=slot,
            entries=tuple(entries),
            outcomes=tuple(outcomes),
            snapshots=self._planted_snapshots(snapshots),
            forget_ids_below_epoch=self._forget_old_ids(),
        )

    def _apply_item(self, slot: int, item: ProposalItem, entries: list[AppliedEntry]) -> Outcome:
        known = self._ids.get(item.entry_id)
        if known is not None:
            epoch, digest = known
            if digest != item.digest:
                return Outcome(item.entry_id, item.digest, reused_id_of_epoch=epoch)
            return Outcome(item.entry_id, item.digest, epoch=epoch, duplicate=True)
        after = validated_and_executed(item, self.metadata)
        if isinstance(after, Rejected):
            return Outcome(item.entry_id, item.digest, rejection=after)
        self.metadata = after
        return self._record(slot, self.metadata.epoch, item, entries)

    def _record(
        self, slot: int, epoch: int, item: ProposalItem, entries: list[AppliedEntry]
    ) -> Outcome:
        """An item that took ``epoch``: remember its id, add its log entry."""
        if BUG_FORGET_ENTRY_ID not in self.planted_bugs:
            self._ids[item.entry_id] = (epoch, item.digest)
        entries.append(
            AppliedEntry(
                epoch=epoch,
                slot=slot,
                entry_id=item.entry_id,
                kind=item.transformation.kind,
                encoded=item.encoded,
                digest=item.digest,
            )
        )
        return Outcome(item.entry_id, item.digest, epoch=epoch)

    def _planted_snapshots(
        self, snapshots: list[tuple[int, ClusterMetadata]]
    ) -> tuple[tuple[int, ClusterMetadata], ...]:
        if BUG_SNAPSHOT_AS_IF_LAST in self.planted_bugs:
            return tuple((epoch, self.metadata) for epoch, _ in snapshots)
        return tuple(snapshots)

    def _forget_old_ids(self) -> int | None:
        bound = self.metadata.epoch - self.retention_epochs
        forgot = False
        while self._ids:
            entry_id, (epoch, _) = next(iter(self._ids.items()))
            if epoch > bound:
                break
            del self._ids[entry_id]
            forgot = True
        return bound + 1 if forgot else None

    def install(
        self,
        metadata: ClusterMetadata,
        applied_slot: int,
        entry_ids: Iterable[tuple[str, int, int]],
    ) -> None:
        """Replace the state with one copied from a peer (state transfer)."""
        self.metadata = metadata
        self.applied_slot = applied_slot
        self._ids = OrderedDict()
        for entry_id, epoch, digest in sorted(entry_ids, key=lambda record: record[1]):
            self._ids[entry_id] = (epoch, digest)
        self._forget_old_ids()


def validated_and_executed(
    item: ProposalItem, metadata: ClusterMetadata
) -> ClusterMetadata | Rejected:
    """The state after ``item``, or the rule it breaks. A bug in a transformation (an
    exception that is not a refusal) refuses that one item, logged, rather than stopping
    whoever applies or batches it: the leader building a batch (which then proposes every
    commit queued behind it) and every member applying a chosen slot, alike."""
    transformation = item.transformation
    try:
        rejection = transformation.validate(metadata)
        if rejection is not None:
            return rejection
        return transformation.execute(metadata)
    except (MemoryError, RecursionError):
        raise  # the process's, not the input's: another member would apply the item
    except Exception:
        log.exception("applying entry %r (%s) failed", item.entry_id, transformation)
        return Rejected(
            "validation_failed",
            f"applying {transformation.kind} entry {item.entry_id!r} failed (a bug, logged by "
            "the CMS member with its traceback); it was not applied",
        )
