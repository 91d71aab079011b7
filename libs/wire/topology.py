"""Topology <-> epochal.v1 protobuf: node states, the token map, placements, in-progress
sequences, and the topology transformations.

Placements are the bulk of a large cluster's metadata, so a range carries its right end only
(its left is the previous range's right) and replicas as indices into the directory sorted by
node id; the write group is sent as what it adds to the read group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    InProgressSequence,
    NodeState,
    Placement,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    RangeDelta,
    SequenceKind,
    Step,
    TokenRange,
    Transformation,
)
from epochal.tcm.allocation import DEFAULT_NUM_TOKENS
from epochal.tcm.schema import ReplicationParams, frozen_map
from epochal.wire.fields import (
    MalformedInput,
    enum_from,
    replication_from_proto,
    replication_to_proto,
    required,
)
from epochal.wire.v1 import metadata_pb2 as pb

NODE_STATES = {
    pb.REGISTERED: NodeState.REGISTERED,
    pb.JOINING: NodeState.JOINING,
    pb.JOINED: NodeState.JOINED,
    pb.LEAVING: NodeState.LEAVING,
    pb.LEFT: NodeState.LEFT,
    pb.MOVING: NodeState.MOVING,
    pb.REPLACING: NodeState.REPLACING,
    pb.REMOVING: NodeState.REMOVING,
}
NODE_STATE_NUMBERS = {v: k for k, v in NODE_STATES.items()}
_KINDS = {
    pb.SEQUENCE_KIND_JOIN: SequenceKind.JOIN,
    pb.SEQUENCE_KIND_LEAVE: SequenceKind.LEAVE,
    pb.SEQUENCE_KIND_REMOVE: SequenceKind.REMOVE,
    pb.SEQUENCE_KIND_REPLACE: SequenceKind.REPLACE,
    pb.SEQUENCE_KIND_MOVE: SequenceKind.MOVE,
}
_KIND_NUMBERS = {v: k for k, v in _KINDS.items()}
_STEPS = {
    pb.SEQUENCE_STEP_PREPARE: Step.PREPARE,
    pb.SEQUENCE_STEP_START: Step.START,
    pb.SEQUENCE_STEP_MID: Step.MID,
    pb.SEQUENCE_STEP_FINISH: Step.FINISH,
}
_STEP_NUMBERS = {v: k for k, v in _STEPS.items()}


# --------------------------------------------------------------------------- metadata parts


def topology_to_proto(metadata: ClusterMetadata) -> dict[str, Any]:
    """The topology fields of a ClusterMetadata message, as keyword arguments."""
    index = {node_id: i for i, node_id in enumerate(sorted(metadata.nodes))}
    return {
        "tokens": [
            pb.NodeTokens(node_id=node_id, tokens=metadata.tokens.owners[node_id])
            for node_id in sorted(metadata.tokens.owners)
        ],
        "placements": [
            _placement_to_proto(params, metadata.placements[params], index)
            for params in sorted(metadata.placements, key=str)
        ],
        "sequences": [
            _sequence_to_proto(metadata.sequences[node_id])
            for node_id in sorted(metadata.sequences)
        ],
    }


def _placement_to_proto(
    params: ReplicationParams, placement: Placement, index: Mapping[str, int]
) -> pb.Placement:
    message = pb.Placement(params=replication_to_proto(params))
    add = message.ranges.add
    for point, read, write in zip(placement.points, placement.reads, placement.writes, strict=True):
        add(
            right=point,
            reads=sorted(index[n] for n in read),
            extra_writes=sorted(index[n] for n in write - read),
        )
    return message


def placements_from_proto(
    messages: Iterable[pb.Placement], node_ids: Sequence[str]
) -> Mapping[ReplicationParams, Placement]:
    placements = {}
    groups: dict[tuple[int, ...], frozenset[str]] = {}  # shared: most groups recur

    def group(indices: Iterable[int], where: str) -> frozenset[str]:
        key = tuple(indices)
        found = groups.get(key)
        if found is None:
            if any(n >= len(node_ids) for n in key):
                raise MalformedInput(f"{where}: replica index beyond the directory")
            found = groups[key] = frozenset(node_ids[n] for n in key)
        return found

    for i, message in enumerate(messages):
        field = f"placements[{i}]"
        params = replication_from_proto(message.params, f"{field}.params")
        points, reads, writes = [], [], []
        for r in message.ranges:
            read = group(r.reads, f"{field}.ranges")
            points.append(r.right)
            reads.append(read)
            writes.append(
                read | group(r.extra_writes, f"{field}.ranges") if r.extra_writes else read
            )
        if points != sorted(set(points)):
            raise MalformedInput(f"{field}.ranges: right ends are not strictly increasing")
        placements[params] = Placement(tuple(points), tuple(reads), tuple(writes))
    return frozen_map(placements)


def _sequence_to_proto(sequence: InProgressSequence) -> pb.InProgressSequence:
    return pb.InProgressSequence(
        kind=_KIND_NUMBERS[sequence.kind],
        node_id=sequence.node_id,
        replaced=sequence.replaced,
        tokens_before=sequence.tokens_before,
        tokens_after=sequence.tokens_after,
        done=_STEP_NUMBERS[sequence.done],
        cancelling=sequence.cancelling,
        prepared_epoch=sequence.prepared_epoch,
        locked=[pb.TokenRange(left=r.left, right=r.right) for r in sequence.locked],
        deltas=[
            pb.PlacementDeltas(
                params=replication_to_proto(params),
                deltas=[
                    pb.RangeDelta(point=d.point, added=sorted(d.added), removed=sorted(d.removed))
                    for d in sequence.deltas[params]
                ],
            )
            for params in sorted(sequence.deltas, key=str)
        ],
    )


def sequences_from_proto(
    messages: Iterable[pb.InProgressSequence],
) -> Mapping[str, InProgressSequence]:
    sequences = {}
    for m in messages:
        field = f"sequence of {m.node_id or '?'}"
        deltas = {
            replication_from_proto(d.params, f"{field}.deltas"): tuple(
                RangeDelta(x.point, frozenset(x.added), frozenset(x.removed)) for x in d.deltas
            )
            for d in m.deltas
        }
        sequences[m.node_id] = InProgressSequence(
            kind=enum_from(SequenceKind, _KINDS, m.kind, f"{field}.kind"),
            node_id=required(m.node_id, "sequence.node_id"),
            replaced=m.replaced,
            tokens_before=tuple(m.tokens_before),
            tokens_after=tuple(m.tokens_after),
            done=enum_from(Step, _STEPS, m.done, f"{field}.done"),
            cancelling=m.cancelling,
            prepared_epoch=m.prepared_epoch,
            locked=tuple(TokenRange(r.left, r.right) for r in m.locked),
            deltas=frozen_map(deltas),
        )
    return frozen_map(sequences)


# --------------------------------------------------------------------------- transformations


def _to_prepare_join(t: PrepareJoin) -> pb.PrepareJoin:
    return pb.PrepareJoin(node_id=t.node_id, tokens=t.tokens, num_tokens=t.num_tokens)


def _from_prepare_join(m: pb.PrepareJoin) -> Transformation:
    return PrepareJoin(
        node_id=required(m.node_id, "prepare_join.node_id"),
        tokens=tuple(m.tokens),
        num_tokens=m.num_tokens or DEFAULT_NUM_TOKENS,
    )


def _to_prepare_leave(t: PrepareLeave) -> pb.PrepareLeave:
    return pb.PrepareLeave(node_id=t.node_id, remove=t.remove)


def _from_prepare_leave(m: pb.PrepareLeave) -> Transformation:
    return PrepareLeave(node_id=required(m.node_id, "prepare_leave.node_id"), remove=m.remove)


def _to_prepare_replace(t: PrepareReplace) -> pb.PrepareReplace:
    return pb.PrepareReplace(node_id=t.node_id, replaced=t.replaced)


def _from_prepare_replace(m: pb.PrepareReplace) -> Transformation:
    return PrepareReplace(
        node_id=required(m.node_id, "prepare_replace.node_id"),
        replaced=required(m.replaced, "prepare_replace.replaced"),
    )


def _to_prepare_move(t: PrepareMove) -> pb.PrepareMove:
    return pb.PrepareMove(node_id=t.node_id, tokens=t.tokens)


def _from_prepare_move(m: pb.PrepareMove) -> Transformation:
    if not m.tokens:
        raise MalformedInput("prepare_move.tokens is required")
    return PrepareMove(node_id=required(m.node_id, "prepare_move.node_id"), tokens=tuple(m.tokens))


def _to_advance(t: AdvanceSequence) -> pb.AdvanceSequence:
    return pb.AdvanceSequence(node_id=t.node_id, step=_STEP_NUMBERS[t.step])


def _from_advance(m: pb.AdvanceSequence) -> Transformation:
    return AdvanceSequence(
        node_id=required(m.node_id, "advance_sequence.node_id"),
        step=enum_from(Step, _STEPS, m.step, "advance_sequence.step"),
    )


def _to_cancel(t: CancelSequence) -> pb.CancelSequence:
    last = _STEP_NUMBERS[t.last_step] if t.last_step is not None else pb.SEQUENCE_STEP_UNSPECIFIED
    return pb.CancelSequence(node_id=t.node_id, last_step=last)


def _from_cancel(m: pb.CancelSequence) -> Transformation:
    last_step = None
    if m.last_step != pb.SEQUENCE_STEP_UNSPECIFIED:
        last_step = enum_from(Step, _STEPS, m.last_step, "cancel_sequence.last_step")
    return CancelSequence(
        node_id=required(m.node_id, "cancel_sequence.node_id"), last_step=last_step
    )


TOPOLOGY_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Transformation]]] = {
    PrepareJoin.kind: (_to_prepare_join, _from_prepare_join),
    PrepareLeave.kind: (_to_prepare_leave, _from_prepare_leave),
    PrepareReplace.kind: (_to_prepare_replace, _from_prepare_replace),
    PrepareMove.kind: (_to_prepare_move, _from_prepare_move),
    AdvanceSequence.kind: (_to_advance, _from_advance),
    CancelSequence.kind: (_to_cancel, _from_cancel),
}
