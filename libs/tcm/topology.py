"""Topology transformations: prepare a sequence, advance it one step, cancel it step by step. Pure.

Theory of operation
-------------------
``Prepare*`` validates the operation, plans it (``plan_operation`` in ``topology_rules``, with
the rules it checks: the target token map, the split placements, the deltas to the natural
replicas of the target, the ranges they touch) and rejects it when those ranges intersect
another sequence's lock. Validation then plays the plan's steps
on the ranges it changes and refuses it when two views of a range that can be alive at once
(adjacent steps, or one step's read and write groups) have quorums that need not meet
(``quorum_intersection``, see ``epochal.tcm.intersection``); a cancel retraces the same views
backwards, so it needs no check of its own. ``AdvanceSequence`` takes the next step of a
sequence and ``CancelSequence`` undoes its last one; what a step does to placements and the
token map is the table in ``epochal.tcm.sequences``. Planning is deterministic, so the CMS's
validation and every member's execution compute the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.allocation import DEFAULT_NUM_TOKENS, allocate_tokens
from epochal.tcm.directory import NodeState
from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.placement import Placement
from epochal.tcm.schema import ReplicationParams, frozen_map
from epochal.tcm.sequences import (
    NEXT_STEP,
    NODE_STATES,
    PREVIOUS_STEP,
    InProgressSequence,
    SequenceKind,
    Step,
)
from epochal.tcm.topology_rules import (
    apply_step,
    check_enough_left,
    check_free_to_operate,
    check_quorum_intersection,
    check_tokens,
    merge_at,
    node_info,
    plan_operation,
    planned_tokens,
    prepared_metadata,
    sequence_of,
    with_node_state,
)
from epochal.tcm.transformations import Transformation


class _Prepare(Transformation):
    """A PREPARE step: subclasses build the draft sequence (validating as they go)."""

    def _draft(self, metadata: ClusterMetadata) -> InProgressSequence:
        raise NotImplementedError

    def check(self, metadata: ClusterMetadata) -> None:
        sequence, placements = plan_operation(metadata, self._draft(metadata))
        check_quorum_intersection(metadata, sequence, placements)

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        return prepared_metadata(metadata, epoch, self._draft(metadata))


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareJoin(_Prepare):
    """Bootstrap: explicit ``tokens``, or ``num_tokens`` allocated for balance."""

    node_id: str
    tokens: tuple[int, ...] = ()
    num_tokens: int = DEFAULT_NUM_TOKENS
    kind: ClassVar[str] = "prepare_join"

    def _draft(self, metadata: ClusterMetadata) -> InProgressSequence:
        node = check_free_to_operate(metadata, SequenceKind.JOIN, self.node_id)
        tokens = self.tokens
        if not tokens:
            try:
                tokens = allocate_tokens(
                    metadata.tokens,
                    metadata.locations(),
                    node.datacenter,
                    self.num_tokens,
                    planned=planned_tokens(metadata),
                )
            except ValueError as error:
                raise Rejected("bad_tokens", str(error)) from None
        check_tokens(metadata, tokens)
        return InProgressSequence(
            kind=SequenceKind.JOIN,
            node_id=self.node_id,
            tokens_before=(),
            tokens_after=tuple(sorted(tokens)),
            prepared_epoch=metadata.epoch + 1,
            locked=(),
        )

    def __str__(self) -> str:
        shown = f"tokens={list(self.tokens)}" if self.tokens else f"num_tokens={self.num_tokens}"
        return f"PrepareJoin({self.node_id}, {shown})"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareLeave(_Prepare):
    """Decommission (the node streams its data away) or, with ``remove``, removal of a dead node
    (the data comes from the surviving replicas)."""

    node_id: str
    remove: bool = False
    kind: ClassVar[str] = "prepare_leave"

    def _draft(self, metadata: ClusterMetadata) -> InProgressSequence:
        kind = SequenceKind.REMOVE if self.remove else SequenceKind.LEAVE
        node = check_free_to_operate(metadata, kind, self.node_id)
        check_enough_left(metadata, node, "removing" if self.remove else "decommissioning")
        return InProgressSequence(
            kind=kind,
            node_id=self.node_id,
            tokens_before=metadata.tokens.owners.get(self.node_id, ()),
            tokens_after=(),
            prepared_epoch=metadata.epoch + 1,
            locked=(),
        )

    def __str__(self) -> str:
        return f"PrepareLeave({self.node_id}{', remove' if self.remove else ''})"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareReplace(_Prepare):
    """A registered node takes over the tokens of a dead one in the same datacenter."""

    node_id: str
    replaced: str
    kind: ClassVar[str] = "prepare_replace"

    def _draft(self, metadata: ClusterMetadata) -> InProgressSequence:
        node = check_free_to_operate(metadata, SequenceKind.REPLACE, self.node_id)
        dead = node_info(metadata, self.replaced)
        if dead.state is not NodeState.JOINED:
            raise Rejected(
                "wrong_node_state",
                f"only a joined node can be replaced; {dead.node_id} is {dead.state.value}",
            )
        if self.replaced in metadata.sequences:
            raise Rejected(
                "sequence_in_progress",
                f"{self.replaced} is in a sequence: {metadata.sequences[self.replaced].describe()}",
            )
        if dead.datacenter != node.datacenter:
            raise Rejected(
                "wrong_datacenter",
                f"{self.node_id} is in {node.datacenter} but {self.replaced} was in "
                f"{dead.datacenter}; a replacement must be in the same datacenter",
            )
        tokens = metadata.tokens.owners.get(self.replaced, ())
        return InProgressSequence(
            kind=SequenceKind.REPLACE,
            node_id=self.node_id,
            replaced=self.replaced,
            tokens_before=tokens,
            tokens_after=tokens,
            prepared_epoch=metadata.epoch + 1,
            locked=(),
        )

    def __str__(self) -> str:
        return f"PrepareReplace({self.node_id} replaces {self.replaced})"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareMove(_Prepare):
    node_id: str
    tokens: tuple[int, ...]
    kind: ClassVar[str] = "prepare_move"

    def check_input(self) -> None:
        # Where the commit arrives only: at apply, the check stays as it was, so that members
        # of two versions apply a log alike (this one let a token listed twice, one the node
        # owns, through to the token map).
        if len(set(self.tokens)) != len(self.tokens):
            raise Rejected("bad_tokens", f"tokens must be distinct: {sorted(self.tokens)}")

    def _draft(self, metadata: ClusterMetadata) -> InProgressSequence:
        check_free_to_operate(metadata, SequenceKind.MOVE, self.node_id)
        before = metadata.tokens.owners.get(self.node_id, ())
        check_tokens(metadata, [t for t in self.tokens if t not in before])
        if set(self.tokens) == set(before):
            raise Rejected("bad_tokens", f"{self.node_id} already owns {sorted(self.tokens)}")
        return InProgressSequence(
            kind=SequenceKind.MOVE,
            node_id=self.node_id,
            tokens_before=before,
            tokens_after=tuple(sorted(self.tokens)),
            prepared_epoch=metadata.epoch + 1,
            locked=(),
        )

    def __str__(self) -> str:
        return f"PrepareMove({self.node_id}, tokens={list(self.tokens)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdvanceSequence(Transformation):
    """Take the next step (START, MID or FINISH) of ``node_id``'s sequence."""

    node_id: str
    step: Step
    kind: ClassVar[str] = "advance_sequence"

    def check(self, metadata: ClusterMetadata) -> None:
        if self.step is Step.PREPARE:
            raise Rejected("wrong_step", "PREPARE is its own transformation (Prepare*)")
        sequence_of(metadata, self.node_id).advanced(self.step)

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        sequence = metadata.sequences[self.node_id].advanced(self.step)
        placements = apply_step(metadata.placements, sequence, self.step, undo=False)
        sequences = dict(metadata.sequences)
        tokens = metadata.tokens
        nodes = metadata.nodes
        if self.step is Step.MID:
            tokens = sequence.after_mid(tokens)
        if self.step is Step.FINISH:
            del sequences[self.node_id]
            nodes = with_node_state(nodes, self.node_id, NODE_STATES[sequence.kind].finished)
            if sequence.replaced:
                nodes = with_node_state(nodes, sequence.replaced, NodeState.LEFT)
            finished = replace(
                metadata, tokens=tokens, placements=placements, sequences=frozen_map(sequences)
            )
            placements, merged_sequences = merge_at(finished, sequence.merge_tokens)
            sequences = dict(merged_sequences)
        else:
            sequences[self.node_id] = sequence
        return replace(
            metadata,
            nodes=nodes,
            tokens=tokens,
            placements=placements,
            sequences=frozen_map(sequences),
        )

    def __str__(self) -> str:
        return f"AdvanceSequence({self.node_id}, {self.step.value})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelSequence(Transformation):
    """Operator-initiated: undo the last step taken of ``node_id``'s sequence (one per epoch;
    commit it again until the sequence is gone). ``last_step``, when given, is the step the
    committer saw last: refused (``stale_cancel``) when another is, so that a cancel decided on
    a stale view — the driver took a step meanwhile — undoes nothing it did not mean to, and
    its entry id (which names that step) stays tied to what it did."""

    node_id: str
    last_step: Step | None = None
    kind: ClassVar[str] = "cancel_sequence"

    def check(self, metadata: ClusterMetadata) -> None:
        sequence = sequence_of(metadata, self.node_id)
        if self.last_step is not None and sequence.done is not self.last_step:
            raise Rejected(
                "stale_cancel",
                f"{sequence.describe()}: its last step is {sequence.done.value}, not "
                f"{self.last_step.value}; look again and cancel that one",
            )

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        sequence = metadata.sequences[self.node_id]
        sequences = dict(metadata.sequences)
        nodes = metadata.nodes
        tokens = metadata.tokens
        if sequence.done is Step.PREPARE:
            del sequences[self.node_id]
            nodes = with_node_state(nodes, self.node_id, NODE_STATES[sequence.kind].cancelled)
            released = replace(metadata, sequences=frozen_map(sequences))
            placements, merged_sequences = merge_at(released, sequence.split_tokens)
            sequences = dict(merged_sequences)
        else:
            placements = apply_step(metadata.placements, sequence, sequence.done, undo=True)
            if sequence.done is Step.MID:
                tokens = sequence.before_mid(tokens)
            sequences[self.node_id] = replace(
                sequence, done=PREVIOUS_STEP[sequence.done], cancelling=True
            )
        return replace(
            metadata,
            nodes=nodes,
            tokens=tokens,
            placements=placements,
            sequences=frozen_map(sequences),
        )

    def __str__(self) -> str:
        last = f", {self.last_step.value}" if self.last_step is not None else ""
        return f"CancelSequence({self.node_id}{last})"


TOPOLOGY_KINDS: tuple[type[Transformation], ...] = (
    PrepareJoin,
    PrepareLeave,
    PrepareReplace,
    PrepareMove,
    AdvanceSequence,
    CancelSequence,
)


def placements_before_last_change(
    placements: Mapping[ReplicationParams, Placement], sequence: InProgressSequence
) -> Mapping[ReplicationParams, Placement]:
    """``placements`` as they were before ``sequence``'s last step or undo: the "before" of the
    progress barrier that gates its next one. A step taken (``done``) is undone; an undo (a
    cancelling sequence, back at ``done``) is redone. PREPARE changes no group (its barrier is
    over the locked ranges at the split placements)."""
    if sequence.cancelling:
        return apply_step(placements, sequence, NEXT_STEP[sequence.done], undo=False)
    if sequence.done is Step.PREPARE:
        return placements
    return apply_step(placements, sequence, sequence.done, undo=True)
