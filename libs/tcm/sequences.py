"""Topology sequences as data: kinds, steps, node states, and what each step does. Pure.

Theory of operation
-------------------
Every topology operation — join, leave, remove, replace, move — is one ``InProgressSequence``
recorded in the metadata from PREPARE until FINISH (or until a cancel has undone PREPARE), so a
restarted node reads where it was and resumes. PREPARE records the plan: the node's tokens
before and after, the ``RangeDelta``s per replication params, and the ranges they touch, which it
locks. Then each step is one epoch:

    step    placements                                   token map
    START   write groups += added                        -
    MID     read groups  += added, -= removed            the node's tokens change
    FINISH  write groups -= removed; merge split points  -

A cancel undoes the last step taken, one step per epoch, in reverse order (undoing two at once
would let a write quorum of one epoch miss a read quorum of the next). Undoing PREPARE merges the
ranges it split, releases the lock and drops the sequence.

Node states (seed 003): the node under operation is in the kind's *during* state from PREPARE;
FINISH puts it in the *finished* state, an undone PREPARE in the *cancelled* one. A replaced node
becomes LEFT when the replacement finishes.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from epochal.errors import Rejected
from epochal.tcm.directory import NodeState
from epochal.tcm.placement import RangeDelta
from epochal.tcm.replication import TokenMap
from epochal.tcm.schema import ReplicationParams, frozen_map
from epochal.tcm.tokens import TokenRange


class SequenceKind(enum.Enum):
    JOIN = "join"
    LEAVE = "leave"
    REMOVE = "remove"
    REPLACE = "replace"
    MOVE = "move"


class Step(enum.Enum):
    PREPARE = "prepare"
    START = "start"
    MID = "mid"
    FINISH = "finish"


NEXT_STEP: Mapping[Step, Step] = {
    Step.PREPARE: Step.START,
    Step.START: Step.MID,
    Step.MID: Step.FINISH,
}
PREVIOUS_STEP: Mapping[Step, Step] = {b: a for a, b in NEXT_STEP.items()}


@dataclass(frozen=True, slots=True)
class NodeStates:
    required: tuple[NodeState, ...]  # the node's state before PREPARE
    during: NodeState
    finished: NodeState
    cancelled: NodeState


NODE_STATES: Mapping[SequenceKind, NodeStates] = {
    SequenceKind.JOIN: NodeStates(
        (NodeState.REGISTERED,), NodeState.JOINING, NodeState.JOINED, NodeState.LEFT
    ),
    SequenceKind.LEAVE: NodeStates(
        (NodeState.JOINED,), NodeState.LEAVING, NodeState.LEFT, NodeState.JOINED
    ),
    SequenceKind.REMOVE: NodeStates(
        (NodeState.JOINED,), NodeState.REMOVING, NodeState.LEFT, NodeState.JOINED
    ),
    SequenceKind.REPLACE: NodeStates(
        (NodeState.REGISTERED,), NodeState.REPLACING, NodeState.JOINED, NodeState.LEFT
    ),
    SequenceKind.MOVE: NodeStates(
        (NodeState.JOINED,), NodeState.MOVING, NodeState.JOINED, NodeState.JOINED
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class InProgressSequence:
    """An operation in progress: its plan and the last step taken."""

    kind: SequenceKind
    node_id: str  # the node joining, leaving, moving, being removed, or replacing
    replaced: str = ""  # REPLACE: the dead node whose tokens the node takes
    tokens_before: tuple[int, ...]  # the node's (REPLACE: the replaced node's) owned tokens
    tokens_after: tuple[int, ...]  # the node's tokens once MID is applied
    done: Step = Step.PREPARE
    cancelling: bool = False
    prepared_epoch: int
    locked: tuple[TokenRange, ...]
    deltas: Mapping[ReplicationParams, tuple[RangeDelta, ...]] = field(default_factory=frozen_map)

    @property
    def next_step(self) -> Step | None:
        return None if self.cancelling else NEXT_STEP.get(self.done)

    @property
    def split_tokens(self) -> frozenset[int]:
        """Split points this sequence needs that the token map may not have."""
        return frozenset(self.tokens_after) - frozenset(self.tokens_before)

    @property
    def merge_tokens(self) -> frozenset[int]:
        """Split points that stop being owned tokens when this sequence finishes."""
        return frozenset(self.tokens_before) - frozenset(self.tokens_after)

    def after_mid(self, token_map: TokenMap) -> TokenMap:
        """The token map once this sequence's MID is applied to ``token_map``."""
        if self.kind is SequenceKind.REPLACE:
            return token_map.renamed(self.replaced, self.node_id)
        return token_map.with_tokens(self.node_id, self.tokens_after)

    def before_mid(self, token_map: TokenMap) -> TokenMap:
        """The inverse of ``after_mid``: the token map with MID undone."""
        if self.kind is SequenceKind.REPLACE:
            return token_map.renamed(self.node_id, self.replaced)
        return token_map.with_tokens(self.node_id, self.tokens_before)

    def describe(self) -> str:
        target = f"{self.node_id} replacing {self.replaced}" if self.replaced else self.node_id
        state = "cancelling" if self.cancelling else "in progress"
        return (
            f"{self.kind.value} of {target} (prepared at epoch {self.prepared_epoch}, "
            f"{self.done.value} done, {state})"
        )

    def advanced(self, step: Step) -> InProgressSequence:
        if self.cancelling:
            raise Rejected(
                "sequence_cancelling", f"{self.describe()}: a cancelled sequence only goes back"
            )
        expected = NEXT_STEP.get(self.done)
        if step is not expected:
            raise Rejected(
                "wrong_step",
                f"{self.describe()}: the next step is {expected.value if expected else 'none'}, "
                f"not {step.value}",
            )
        return replace(self, done=step)


class RangeLocked(Rejected):
    """The operation's ranges intersect the ranges another sequence holds."""

    def __init__(self, holder: InProgressSequence, ranges: tuple[TokenRange, ...]) -> None:
        shown = ", ".join(str(r) for r in ranges[:3]) + (" …" if len(ranges) > 3 else "")
        super().__init__(
            "range_locked",
            f"ranges {shown} are locked by the {holder.kind.value} of {holder.node_id} "
            f"prepared at epoch {holder.prepared_epoch}; wait for it to finish or cancel it",
        )
        self.holder_node_id = holder.node_id
        self.holder_kind = holder.kind
        self.holder_epoch = holder.prepared_epoch


def check_unlocked(
    sequences: Mapping[str, InProgressSequence], wanted: tuple[TokenRange, ...]
) -> None:
    """Raise ``RangeLocked`` naming the first sequence whose lock intersects ``wanted``."""
    for holder in sorted(sequences.values(), key=lambda s: s.prepared_epoch):
        clashing = tuple(r for r in wanted if any(r.intersects(h) for h in holder.locked))
        if clashing:
            raise RangeLocked(holder, clashing)
