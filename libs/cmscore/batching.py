"""Building the leader's next slot from the commits queued at it. Pure (no I/O, clock or
randomness): the member's loop hands it the state at the tail and its queue, and performs the
plan it returns.

Theory of operation
-------------------
The leader keeps one slot in flight, so the slot built here rests on the state at the tail of
the applied log — a state that really happened. Queued commits are taken in order, each
validated and executed against the state the ones before it reached:

* an entry id already applied is answered from its record (its first epoch, or "reused" when
  its transformation differs); one already in this batch joins that item when it carries the
  same transformation (one proposal answers both callers), and is refused as reused when not;
* a commit that fails at the tail is refused; one that fails only because of another commit in
  this batch is deferred to the next slot, where it is validated against a state that happened;
* one CMS voter change per slot: a second waits for the next slot;
* a ``TriggerSnapshot`` ends the batch, so that a snapshot is normally the last item of its slot
  (apply does not rely on it: ``MetadataStateMachine`` takes a snapshot at its own epoch wherever
  it stands);
* when the slot brings the log ``snapshot_frequency`` epochs past the last snapshot, the
  leader's own ``TriggerSnapshot`` closes it (unless its entry id is taken already: a client
  cannot send such an id, ``epochal.cms.codec``; the next slot's snapshot has another).

The slot is bounded by ``max_values`` commits (the InitializeCMS of an empty log counts among
them) and ``max_bytes`` of encoded transformations; the closing snapshot comes on top. What is
not taken stays queued, in order, with the deferred commits ahead of it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from epochal.cmscore.state_machine import (
    CommitResult,
    Outcome,
    ProposalItem,
    digest_of,
    validated_and_executed,
)
from epochal.errors import EpochalError, Rejected
from epochal.tcm import CMS_KINDS, ClusterMetadata, Transformation, TriggerSnapshot
from epochal.wire.metadata import encode_transformation

C = TypeVar("C")  # a queued commit as the shell keeps it: read through ``item_of``, ``origin_of``

_CMS_KINDS = frozenset(kind.kind for kind in CMS_KINDS)
# The entry ids of the members' own commits start with this; a client's may not (codec).
INTERNAL_ENTRY_ID_PREFIX = "cms:"


class Decision(enum.Enum):
    PROPOSED = "proposed"  # in this slot; its outcome comes when the slot is applied
    JOINED = "joined"  # its entry id is already in this slot: answered with that item
    DEFERRED = "deferred"  # back to the queue, ahead of what was not looked at
    ANSWERED = "answered"  # settled now (``answer``)


@dataclass(frozen=True, slots=True)
class Decided(Generic[C]):
    commit: C
    decision: Decision
    answer: CommitResult | EpochalError | None = None


@dataclass(slots=True)
class Batch(Generic[C]):
    items: list[ProposalItem] = field(default_factory=list)
    states: list[ClusterMetadata] = field(default_factory=list)  # the state after each item
    decided: list[Decided[C]] = field(default_factory=list)  # every commit taken off the queue
    learners: set[str] = field(default_factory=set)  # members that forwarded proposed commits

    def tail(self, base: ClusterMetadata) -> ClusterMetadata:
        return self.states[-1] if self.states else base

    def add(self, item: ProposalItem, state: ClusterMetadata) -> None:
        self.items.append(item)
        self.states.append(state)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchLimits:
    max_values: int
    max_bytes: int
    snapshot_frequency: int
    # False only in the simulator (MemberConfig.snapshot_closes_slot): a client's snapshot may
    # then stand in the middle of a slot, as an older leader put it.
    snapshot_closes_slot: bool = True


def build_batch(
    base: ClusterMetadata,
    queue: Iterator[C],
    *,
    item_of: Callable[[C], ProposalItem],
    origin_of: Callable[[C], str | None],
    lookup: Callable[[str], tuple[int, int] | None],
    limits: BatchLimits,
    last_snapshot_epoch: int,
    initialize: ProposalItem | None = None,
) -> Batch[C]:
    """The next slot over ``base``: ``queue`` is read lazily, one commit at a time, only while
    the slot has room (what is not read stays queued)."""
    batch: Batch[C] = Batch()
    proposed: dict[str, int] = {}  # entry id -> digest of the item proposed under it
    if base.epoch == 0 and initialize is not None and lookup(initialize.entry_id) is None:
        after = validated_and_executed(initialize, base)
        if not isinstance(after, Rejected):
            batch.add(initialize, after)
            proposed[initialize.entry_id] = initialize.digest
    size = 0
    while len(proposed) < limits.max_values and size < limits.max_bytes:
        commit = next(queue, None)
        if commit is None:
            break
        item = item_of(commit)
        decided = _decide(base, batch, commit, item, proposed, lookup)
        batch.decided.append(decided)
        if decided.decision in (Decision.PROPOSED, Decision.JOINED):
            origin = origin_of(commit)
            if origin is not None:
                batch.learners.add(origin)
        if decided.decision is Decision.PROPOSED:
            size += len(item.encoded)
            if limits.snapshot_closes_slot and isinstance(item.transformation, TriggerSnapshot):
                break  # a snapshot closes its slot
    tail = batch.tail(base)
    if (
        batch.items
        and not isinstance(batch.items[-1].transformation, TriggerSnapshot)
        and tail.epoch + 1 - last_snapshot_epoch >= limits.snapshot_frequency
    ):
        snapshot = snapshot_item(tail.epoch + 1)
        if snapshot.entry_id not in proposed and lookup(snapshot.entry_id) is None:
            batch.add(snapshot, snapshot.transformation.execute(tail))
    return batch


def _decide(
    base: ClusterMetadata,
    batch: Batch[C],
    commit: C,
    item: ProposalItem,
    proposed: dict[str, int],
    lookup: Callable[[str], tuple[int, int] | None],
) -> Decided[C]:
    known = lookup(item.entry_id)
    if known is not None:
        return Decided(commit, Decision.ANSWERED, known_answer(item, known))
    if item.entry_id in proposed:
        if proposed[item.entry_id] == item.digest:
            return Decided(commit, Decision.JOINED)
        return Decided(commit, Decision.ANSWERED, entry_id_in_use(item.entry_id))
    tail = batch.tail(base)
    if tail.cms_voters != base.cms_voters and item.transformation.kind in _CMS_KINDS:
        # One voter change per slot: the next configuration differs from this one by a single
        # member (epochal.tcm.cms), so this change waits for the next slot.
        return Decided(commit, Decision.DEFERRED)
    after = validated_and_executed(item, tail)
    if isinstance(after, Rejected):
        if tail is base or isinstance(validated_and_executed(item, base), Rejected):
            return Decided(commit, Decision.ANSWERED, Rejected(after.rule, after.message))
        return Decided(commit, Decision.DEFERRED)  # it fails only after this batch's others
    batch.add(item, after)
    proposed[item.entry_id] = item.digest
    return Decided(commit, Decision.PROPOSED)


def answer_to(
    outcome: Outcome,
    digest: int,
    known: tuple[int, int] | None,
    batch_size: int,
    slot: int,
) -> CommitResult | EpochalError | None:
    """What a commit of ``digest`` waiting on ``outcome``'s entry id is told once the slot is
    applied (``known``: the id's record after it): the outcome itself when it is this very
    transformation's; else the record's answer — "reused" (never another transformation's
    epoch); None when the slot recorded nothing under the id (this commit's fate is still open:
    its leader answers it)."""
    if digest != outcome.digest:
        return None if known is None else known_answer_of(outcome.entry_id, digest, known)
    if outcome.reused_id_of_epoch:
        return entry_id_reused(outcome.entry_id, outcome.reused_id_of_epoch)
    if outcome.rejection is not None:
        return Rejected(outcome.rejection.rule, outcome.rejection.message)
    return CommitResult(outcome.epoch, outcome.duplicate, batch_size, slot)


def proposal_item(transformation: Transformation, entry_id: str) -> ProposalItem:
    """``transformation`` as a slot carries it under ``entry_id``: its canonical encoding and
    that encoding's digest."""
    encoded = encode_transformation(transformation)
    return ProposalItem(transformation, encoded, entry_id, digest_of(encoded))


def snapshot_item(epoch: int) -> ProposalItem:
    """The leader's own TriggerSnapshot, for the slot that reaches ``epoch``."""
    return proposal_item(TriggerSnapshot(), f"{INTERNAL_ENTRY_ID_PREFIX}snapshot@{epoch}")


def known_answer(item: ProposalItem, known: tuple[int, int]) -> CommitResult | EpochalError:
    """The answer to a commit whose entry id was applied at ``known`` = (epoch, digest)."""
    return known_answer_of(item.entry_id, item.digest, known)


def known_answer_of(
    entry_id: str, digest: int, known: tuple[int, int]
) -> CommitResult | EpochalError:
    """The answer to a commit of ``digest`` under ``entry_id``, applied at ``known``."""
    epoch, known_digest = known
    if known_digest != digest:
        return entry_id_reused(entry_id, epoch)
    return CommitResult(epoch, duplicate=True)


def entry_id_in_use(entry_id: str) -> Rejected:
    """A commit whose entry id another transformation carries in the slot being built."""
    return Rejected(
        "entry_id_reused",
        f"entry_id {entry_id!r} is being committed now for a different transformation; use a "
        "new entry_id for a new transformation",
    )


def entry_id_reused(entry_id: str, epoch: int) -> Rejected:
    return Rejected(
        "entry_id_reused",
        f"entry_id {entry_id!r} was already used for a different transformation "
        f"(committed at epoch {epoch}); use a new entry_id for a new transformation",
    )
