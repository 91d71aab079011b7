"""The invariants of a simulated CMS run, checked on what the member cores emit, and what the
run exercised (``Coverage``). See ``epochal.sim.cms_cluster`` for the list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochal.cmscore.rows import LogEntryRow, SnapshotRow
from epochal.cmscore.state_machine import CommitResult, ProposalItem
from epochal.errors import EpochalError, Rejected
from epochal.tcm import ClusterMetadata
from epochal.wire.metadata import decode_metadata

if TYPE_CHECKING:
    from epochal.cmscore import MemberCore
    from epochal.sim.cms_cluster import CMSCluster


class InvariantViolation(AssertionError):
    pass


@dataclass(slots=True)
class Coverage:
    leader_changes: int = 0
    reproposed_values: int = 0
    crashes: int = 0
    crashes_losing_unsynced_state: int = 0
    duplicated_messages: int = 0
    dropped_messages: int = 0
    state_transfers: int = 0
    forwarded_commits: int = 0
    duplicate_commits_answered: int = 0  # answered from an entry id's record
    refused_commits: int = 0
    slots_of_several_commits: int = 0
    snapshots: int = 0
    reconfigurations: int = 0  # epochs whose voters differ from the epoch before
    leader_votes_needed: int = 0
    small_slots: int = 0
    small_slot_fallbacks: int = 0
    catch_up_elections: int = 0
    kinds_committed: int = 0  # distinct transformation kinds in the log (of 21)

    def add(self, other: Coverage) -> None:
        for name in self.__slots__:  # type: ignore[attr-defined]
            if name == "kinds_committed":
                self.kinds_committed = max(self.kinds_committed, other.kinds_committed)
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


class Checks:
    def __init__(self, cluster: CMSCluster) -> None:
        self.cluster = cluster
        self.coverage = Coverage()
        self.chosen_values: dict[int, tuple[bytes, ...]] = {}
        self.log: dict[int, tuple[str, bytes]] = {}  # epoch -> (entry id, transformation)
        self.epoch_of_id: dict[str, int] = {}
        self.states: dict[int, ClusterMetadata] = {}
        self.checked_epoch: dict[str, int] = {}  # per member, the epoch last compared
        self.answers: dict[str, int] = {}  # entry id -> the epoch its committed answers name
        self.snapshot_epochs: set[int] = set()
        self.kinds: set[str] = set()
        self.acknowledged = 0

    def chosen(self, member: str, slot: int, value: tuple[bytes, ...]) -> None:
        known = self.chosen_values.setdefault(slot, value)
        if known != value:
            raise InvariantViolation(f"two values chosen for slot {slot} (seen at {member})")
        if len(value) > 1 and known is value:
            self.coverage.slots_of_several_commits += 1

    def published(self, member: str, rows: Sequence[LogEntryRow]) -> None:
        for row in rows:
            logged = self.log.setdefault(row.epoch, (row.entry_id, row.transformation))
            if logged != (row.entry_id, row.transformation):
                raise InvariantViolation(
                    f"{member} applied {row.entry_id!r} at epoch {row.epoch}, others applied "
                    f"{logged[0]!r}: applied logs are not prefixes of one log"
                )
            first = self.epoch_of_id.setdefault(row.entry_id, row.epoch)
            if first != row.epoch:
                raise InvariantViolation(
                    f"entry id {row.entry_id!r} applied at epoch {first} and again at epoch "
                    f"{row.epoch} (at {member})"
                )
            self.kinds.add(row.kind)

    def state(self, member: str, core: MemberCore) -> None:
        """The member's state equals every other's at the same epoch."""
        metadata = core.sm.metadata
        epoch = metadata.epoch
        if self.checked_epoch.get(member) == epoch:
            return
        self.checked_epoch[member] = epoch
        known = self.states.setdefault(epoch, metadata)
        if known is not metadata and known != metadata:
            raise InvariantViolation(f"{member}'s state at epoch {epoch} differs from another's")
        before = self.states.get(epoch - 1)
        if known is metadata and before is not None and before.cms_voters != metadata.cms_voters:
            self.coverage.reconfigurations += 1

    def snapshots(self, member: str, rows: Sequence[SnapshotRow]) -> None:
        for row in rows:
            metadata = decode_metadata(row.metadata)
            if metadata.epoch != row.epoch:
                raise InvariantViolation(
                    f"{member}'s snapshot of epoch {row.epoch} holds the state of epoch "
                    f"{metadata.epoch}"
                )
            known = self.states.get(row.epoch)
            if known is not None and known != metadata:
                raise InvariantViolation(
                    f"{member}'s snapshot of epoch {row.epoch} differs from the state there"
                )
            self.snapshot_epochs.add(row.epoch)

    def answer_leaves(
        self, member: str, item: ProposalItem, outcome: CommitResult | EpochalError
    ) -> None:
        """An answer leaving a member: a committed one names an epoch at which some member
        applied this very transformation under this id (so its slot was chosen first)."""
        if not isinstance(outcome, CommitResult):
            return
        logged = self.log.get(outcome.epoch)
        if logged is None:
            raise InvariantViolation(
                f"{member} answered {item.entry_id!r} with epoch {outcome.epoch} before any "
                "member applied that epoch (its slot was not known to be chosen)"
            )
        if logged != (item.entry_id, item.encoded):
            raise InvariantViolation(
                f"{member} answered {item.entry_id!r} with epoch {outcome.epoch}, which holds "
                f"{logged[0]!r}"
            )
        first = self.answers.setdefault(item.entry_id, outcome.epoch)
        if first != outcome.epoch:
            raise InvariantViolation(
                f"{item.entry_id!r} answered with epoch {first} and with epoch {outcome.epoch}"
            )

    def answer_arrives(self, item: ProposalItem, outcome: CommitResult | Rejected) -> None:
        self.acknowledged += 1
        if isinstance(outcome, Rejected):
            self.coverage.refused_commits += 1
        elif outcome.duplicate:
            self.coverage.duplicate_commits_answered += 1

    def at_the_end(self) -> None:
        # Not checked: that a commit answered as refused never commits. A refusal is not
        # recorded under its entry id (only a committed id is), so another attempt of the same
        # commit still queued somewhere is validated again later and may commit against a state
        # that changed (seed 25 shows it). The answers that commit are checked above.
        epoch = next(iter(self.cluster.members.values())).core.epoch
        for entry_id, answered in self.answers.items():
            if answered > epoch:
                raise InvariantViolation(f"{entry_id!r} answered at epoch {answered} > {epoch}")

    def collect(self) -> None:
        coverage = self.coverage
        for member in self.cluster.members.values():
            if not hasattr(member, "core"):
                continue
            stats = member.core.node.stats
            coverage.leader_changes += stats.leader_changes
            coverage.reproposed_values += stats.reproposed_values
            coverage.leader_votes_needed += stats.own_votes_needed
            coverage.small_slots += stats.small_slots
            coverage.small_slot_fallbacks += stats.small_slot_fallbacks
            coverage.catch_up_elections += stats.catch_up_elections
        counters = self.cluster.world.counters
        coverage.duplicated_messages = counters.duplicated
        coverage.dropped_messages = counters.dropped
        coverage.snapshots = len(self.snapshot_epochs)
        coverage.kinds_committed = len(self.kinds)
