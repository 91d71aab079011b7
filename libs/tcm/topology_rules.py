"""The rules a topology operation's PREPARE checks, its plan, and what a step does to the
placements. Pure.

``plan_operation`` computes the target token map, the split placements, the deltas to the
natural replicas of the target and the ranges they touch; the checks refuse an operation whose
node is not free to operate, whose tokens are taken or out of range, that would leave too few
nodes, whose ranges intersect another sequence's lock (checked against every way the sequences
in flight can end), or whose steps would let two views of a range that can be alive at once have
quorums that need not meet (``check_quorum_intersection``, naming what to do instead).
``apply_step`` plays one step of a sequence on the placements, or undoes it; ``split_others``
and ``merge_at`` split the other sequences' deltas at a new sequence's tokens and merge them
back when it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from epochal.errors import Rejected
from epochal.tcm.allocation import MAX_NUM_TOKENS
from epochal.tcm.directory import NodeInfo, NodeState
from epochal.tcm.intersection import Miss, View, first_miss
from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.placement import Placement, RangeDelta
from epochal.tcm.replication import TokenMap, natural_changes
from epochal.tcm.schema import ReplicationParams, Strategy, frozen_map
from epochal.tcm.sequences import (
    NODE_STATES,
    InProgressSequence,
    RangeLocked,
    SequenceKind,
    Step,
    check_unlocked,
)
from epochal.tcm.tokens import TokenRange, check_token


def node_info(metadata: ClusterMetadata, node_id: str) -> NodeInfo:
    node = metadata.nodes.get(node_id)
    if node is None:
        raise Rejected("node_not_found", f"no node {node_id!r} is registered")
    return node


def with_node_state(
    nodes: Mapping[str, NodeInfo], node_id: str, state: NodeState
) -> Mapping[str, NodeInfo]:
    return frozen_map({**nodes, node_id: replace(nodes[node_id], state=state)})


def sequence_of(metadata: ClusterMetadata, node_id: str) -> InProgressSequence:
    sequence = metadata.sequences.get(node_id)
    if sequence is None:
        raise Rejected("no_sequence", f"{node_id} has no topology operation in progress")
    return sequence


def _locked_ranges(
    placements: Mapping[ReplicationParams, Placement],
    deltas: Mapping[ReplicationParams, tuple[RangeDelta, ...]],
) -> tuple[TokenRange, ...]:
    """The ranges the deltas touch, contiguous ones coalesced, in token order."""
    touched: set[tuple[int, int]] = set()
    for params, changes in deltas.items():
        placement = placements[params]
        for delta in changes:
            i = placement.index_of(delta.point)
            touched.add((placement.points[i - 1], delta.point))
    ranges: list[TokenRange] = []
    for left, right in sorted(touched, key=lambda r: r[1]):
        if ranges and ranges[-1].right == left and ranges[-1].left != right:
            ranges[-1] = TokenRange(ranges[-1].left, right)
        else:
            ranges.append(TokenRange(left, right))
    return tuple(ranges)


def plan_operation(
    metadata: ClusterMetadata, draft: InProgressSequence
) -> tuple[InProgressSequence, Mapping[ReplicationParams, Placement]]:
    """Split placements at the draft's new tokens, diff them against the natural replicas of the
    target token map, lock what changes. Raises ``RangeLocked`` on a clash."""
    target = draft.after_mid(metadata.tokens)
    locations = metadata.locations()
    placements: dict[ReplicationParams, Placement] = {}
    deltas: dict[ReplicationParams, tuple[RangeDelta, ...]] = {}
    for params, placement in metadata.placements.items():
        split = placement.split(draft.split_tokens)
        placements[params] = split
        # Read groups are the natural replicas of the token map (in a sequence too: MID moves
        # both together), so the deltas are where the target's natural replicas differ.
        changes = natural_changes(params, metadata.tokens, target, locations, split.points)
        deltas[params] = tuple(
            _delta(split, index, old, new) for index, (old, new) in sorted(changes.items())
        )
    locked = _locked_ranges(placements, deltas)
    check_unlocked(metadata.sequences, locked)
    _check_independent(metadata, draft, placements, locations)
    return replace(draft, locked=locked, deltas=frozen_map(deltas)), frozen_map(placements)


def _delta(
    placement: Placement, index: int, old: tuple[str, ...], new: tuple[str, ...]
) -> RangeDelta:
    before, after = frozenset(old), frozenset(new)
    assert placement.reads[index] == before, (placement.points[index], placement.reads[index], old)
    return RangeDelta(placement.points[index], after - before, before - after)


def _check_independent(
    metadata: ClusterMetadata,
    draft: InProgressSequence,
    placements: Mapping[ReplicationParams, Placement],
    locations: Mapping[str, tuple[str, str]],
) -> None:
    """The plan must not depend on how the sequences in flight end. For every way some of them
    could end (their MID applied, or undone), the draft must change exactly the same replicas
    of exactly the same ranges; where it would not, the two operations touch each other's
    ranges (a join next to a leaving node inherits the leaver's ranges) and the draft waits."""
    if not metadata.sequences:
        return  # nothing in flight: one way to end, and plan_operation computed it
    expected = _deltas_under(placements, metadata.tokens, draft, locations)
    for others in _in_flight_outcomes(metadata):
        base = metadata.tokens
        for other in others:
            base = _toggled(other, base)
        for params, changes in _deltas_under(placements, base, draft, locations).items():
            if changes != expected[params]:
                differing = sorted(set(changes.items()) ^ set(expected[params].items()))
                placement = placements[params]
                ranges = tuple(
                    TokenRange(placement.points[placement.index_of(p) - 1], p) for p, _ in differing
                )
                raise RangeLocked(others[0], ranges)


def _deltas_under(
    placements: Mapping[ReplicationParams, Placement],
    base: TokenMap,
    draft: InProgressSequence,
    locations: Mapping[str, tuple[str, str]],
) -> dict[ReplicationParams, dict[int, tuple[frozenset[str], frozenset[str]]]]:
    """point -> (added, removed) where the draft changes the natural replicas of ``base``."""
    target = draft.after_mid(base)
    result = {}
    for params, placement in placements.items():
        changes = natural_changes(params, base, target, locations, placement.points)
        result[params] = {
            placement.points[i]: (frozenset(b) - frozenset(a), frozenset(a) - frozenset(b))
            for i, (a, b) in changes.items()
        }
    return result


MAX_OUTCOME_SEQUENCES = 3  # all 2^k endings of up to this many sequences; beyond, one at a time


def _in_flight_outcomes(metadata: ClusterMetadata) -> list[tuple[InProgressSequence, ...]]:
    in_flight = sorted(metadata.sequences.values(), key=lambda s: s.prepared_epoch)
    if len(in_flight) > MAX_OUTCOME_SEQUENCES:
        return [(s,) for s in in_flight]
    combinations = [
        tuple(s for bit, s in enumerate(in_flight) if mask >> bit & 1)
        for mask in range(1, 1 << len(in_flight))
    ]
    return sorted(combinations, key=len)  # single sequences first: they name the culprit


def _toggled(sequence: InProgressSequence, token_map: TokenMap) -> TokenMap:
    """The token map with the sequence's MID flipped: applied if not yet taken, else undone."""
    if sequence.done is Step.MID:
        return sequence.before_mid(token_map)
    return sequence.after_mid(token_map)


def prepared_metadata(
    metadata: ClusterMetadata, epoch: int, draft: InProgressSequence
) -> ClusterMetadata:
    sequence, placements = plan_operation(metadata, replace(draft, prepared_epoch=epoch))
    nodes = with_node_state(metadata.nodes, draft.node_id, NODE_STATES[draft.kind].during)
    others = split_others(metadata.sequences, placements, draft.split_tokens)
    return replace(
        metadata,
        nodes=nodes,
        placements=placements,
        sequences=frozen_map({**others, draft.node_id: sequence}),
    )


def check_free_to_operate(metadata: ClusterMetadata, kind: SequenceKind, node_id: str) -> NodeInfo:
    node = node_info(metadata, node_id)
    existing = metadata.sequences.get(node_id)
    if existing is not None:
        raise Rejected(
            "sequence_in_progress", f"{node_id} is already in a sequence: {existing.describe()}"
        )
    required = NODE_STATES[kind].required
    if node.state not in required:
        raise Rejected(
            "wrong_node_state",
            f"{kind.value} needs {node_id} to be {' or '.join(s.value for s in required)}, "
            f"but it is {node.state.value}",
        )
    return node


def planned_tokens(metadata: ClusterMetadata) -> dict[int, str]:
    """Token -> node of the tokens a sequence in flight may own at its end (tokens_after) or
    after a cancel (tokens_before, which a moving node gave up at MID)."""
    return {
        t: s.node_id for s in metadata.sequences.values() for t in s.tokens_before + s.tokens_after
    }


def check_tokens(metadata: ClusterMetadata, tokens: Iterable[int]) -> None:
    tokens = tuple(tokens)
    if len(set(tokens)) != len(tokens):
        raise Rejected("bad_tokens", f"tokens must be distinct: {sorted(tokens)}")
    if not 1 <= len(tokens) <= MAX_NUM_TOKENS:
        raise Rejected("bad_tokens", f"a node owns 1..{MAX_NUM_TOKENS} tokens, not {len(tokens)}")
    # Tokens a sequence in flight may own are taken as well.
    planned = planned_tokens(metadata)
    for token in tokens:
        try:
            check_token(token)
        except ValueError as error:
            raise Rejected("bad_tokens", str(error)) from None
        owner = metadata.tokens.owner_of_token(token) or planned.get(token)
        if owner is not None:
            raise Rejected("token_taken", f"token {token} is already owned by {owner}")


def check_enough_left(metadata: ClusterMetadata, node: NodeInfo, verb: str) -> None:
    """Refuse to take a node out when a keyspace's replication factor could no longer be met."""
    locations = metadata.locations()
    owners = set(metadata.tokens.owners) - {node.node_id}
    for params in metadata.placements:
        for datacenter, factor in params.factors:
            if params.strategy is Strategy.NETWORK_TOPOLOGY and datacenter != node.datacenter:
                continue
            remaining = sum(
                1
                for n in owners
                if params.strategy is Strategy.SIMPLE or locations[n][0] == datacenter
            )
            if remaining < factor:
                where = f" in {datacenter}" if datacenter else ""
                raise Rejected(
                    "too_few_nodes",
                    f"{verb} {node.node_id} would leave {remaining} nodes{where}, fewer than "
                    f"the replication factor {factor} of {params}",
                )


_SHOWN_RANGES = 3  # a rejection names this many ranges, then counts the rest


def _step_views(
    sequence: InProgressSequence, placements: Mapping[ReplicationParams, Placement]
) -> dict[ReplicationParams, list[tuple[TokenRange, list[View]]]]:
    """For every range the sequence changes: its (read, write) groups after PREPARE and after
    each later step, as the step table (``apply_step``) makes them."""
    touched: dict[ReplicationParams, Placement] = {}
    ranges: dict[ReplicationParams, list[TokenRange]] = {}
    for params, deltas in sequence.deltas.items():
        placement = placements[params]
        indices = [placement.index_of(d.point) for d in deltas]
        ranges[params] = [TokenRange(placement.points[i - 1], placement.points[i]) for i in indices]
        touched[params] = Placement(
            tuple(placement.points[i] for i in indices),
            tuple(placement.reads[i] for i in indices),
            tuple(placement.writes[i] for i in indices),
        )
    states: list[Mapping[ReplicationParams, Placement]] = [touched]
    for step in (Step.START, Step.MID, Step.FINISH):
        states.append(apply_step(states[-1], sequence, step, undo=False))
    return {
        params: [
            (token_range, [(s[params].reads[k], s[params].writes[k]) for s in states])
            for k, token_range in enumerate(ranges[params])
        ]
        for params in touched
    }


def check_quorum_intersection(
    metadata: ClusterMetadata,
    sequence: InProgressSequence,
    placements: Mapping[ReplicationParams, Placement],
) -> None:
    """Refuse a plan whose steps would let a read quorum miss a write quorum alive at once."""
    locations = metadata.locations()
    missed: list[tuple[ReplicationParams, TokenRange, Miss]] = []
    for params, views in sorted(_step_views(sequence, placements).items(), key=lambda p: str(p[0])):
        for token_range, range_views in views:
            miss = first_miss(range_views, locations)
            if miss is not None:
                missed.append((params, token_range, miss))
    if missed:
        raise _quorum_intersection_rejected(metadata, sequence, missed)


def _quorum_intersection_rejected(
    metadata: ClusterMetadata,
    sequence: InProgressSequence,
    missed: list[tuple[ReplicationParams, TokenRange, Miss]],
) -> Rejected:
    params, first_range, miss = missed[0]
    shown = ", ".join(str(r) for _, r, _ in missed[:_SHOWN_RANGES])
    more = f" and {len(missed) - _SHOWN_RANGES} more" if len(missed) > _SHOWN_RANGES else ""
    target = sequence.node_id
    if sequence.replaced:
        target = f"{sequence.replaced} by {sequence.node_id}"
    return Rejected(
        "quorum_intersection",
        f"the {sequence.kind.value} of {target} would change so many replicas of a range in one "
        f"step that quorums alive at once need not meet: {len(missed)} ranges ({shown}{more}); "
        f"for {params} {first_range}, {miss.describe()}; {_instead(metadata, sequence)}",
    )


def _instead(metadata: ClusterMetadata, sequence: InProgressSequence) -> str:
    """What the operator can do instead. Only a replace into another rack is known to get here
    (it is a leave and a join in one step); any other plan gets the general advice."""
    if sequence.kind is SequenceKind.REPLACE:
        node = metadata.nodes[sequence.node_id]
        dead = metadata.nodes[sequence.replaced]
        return (
            f"replace {dead.node_id} with a node registered in its rack {dead.rack} of "
            f"{dead.datacenter} ({node.node_id} is in {node.rack}), or bootstrap "
            f"{node.node_id} with its own tokens and then remove {dead.node_id} (removenode)"
        )
    return "split the change into operations that each change one replica of a range per datacenter"


def apply_step(
    placements: Mapping[ReplicationParams, Placement],
    sequence: InProgressSequence,
    step: Step,
    *,
    undo: bool,
) -> Mapping[ReplicationParams, Placement]:
    arguments = {
        Step.START: {"reads": False, "writes": "add"},
        Step.MID: {"reads": True, "writes": ""},
        Step.FINISH: {"reads": False, "writes": "remove"},
    }[step]
    result = dict(placements)
    for params, deltas in sequence.deltas.items():
        if params in result:  # its last keyspace may have been dropped since
            placement = result[params]
            result[params] = (
                placement.unapply(deltas, **arguments)
                if undo
                else placement.apply(deltas, **arguments)
            )
    return frozen_map(result)


def deltas_by_point(
    sequence: InProgressSequence, params: ReplicationParams
) -> dict[int, RangeDelta]:
    return {d.point: d for d in sequence.deltas.get(params, ())}


def with_deltas(
    sequence: InProgressSequence, params: ReplicationParams, by_point: Mapping[int, RangeDelta]
) -> InProgressSequence:
    deltas = {**sequence.deltas, params: tuple(by_point[p] for p in sorted(by_point))}
    return replace(sequence, deltas=frozen_map(deltas))


def split_others(
    sequences: Mapping[str, InProgressSequence],
    placements: Mapping[ReplicationParams, Placement],
    tokens: frozenset[int],
) -> dict[str, InProgressSequence]:
    """A range cut at a new split point keeps the deltas other sequences planned for it: the
    new left part gets a copy of the delta of the range it was cut from."""
    result = dict(sequences)
    for params, placement in placements.items():
        for node_id, sequence in result.items():
            by_point = deltas_by_point(sequence, params)
            copies = {}
            for token in tokens:
                index = placement.index_of(token)
                if placement.points[index] != token or token in by_point:
                    continue
                parent = token  # the first point after it that is not new: the range cut
                while parent in tokens:
                    index = (index + 1) % len(placement.points)
                    parent = placement.points[index]
                if parent in by_point:
                    copies[token] = replace(by_point[parent], point=token)
            if copies:
                result[node_id] = with_deltas(sequence, params, {**by_point, **copies})
    return result


def merge_at(
    metadata: ClusterMetadata, tokens: frozenset[int]
) -> tuple[Mapping[ReplicationParams, Placement], Mapping[str, InProgressSequence]]:
    """Merge ranges at ``tokens`` that no owned token nor sequence in flight still needs, where
    the ranges on both sides have equal groups and equal planned deltas (which merge too)."""
    needed = set(metadata.tokens.ring_tokens)
    for other in metadata.sequences.values():
        needed |= other.split_tokens | other.merge_tokens
    candidates = tokens - needed
    placements = dict(metadata.placements)
    sequences = dict(metadata.sequences)
    for params, placement in metadata.placements.items():
        planned = {n: deltas_by_point(s, params) for n, s in sequences.items()}
        mergeable = []
        for token in candidates:
            index = placement.index_of(token)
            if placement.points and placement.points[index] == token:
                after = placement.points[(index + 1) % len(placement.points)]
                if all(
                    (by_point.get(token) is None) == (by_point.get(after) is None)
                    and (
                        token not in by_point
                        or replace(by_point[token], point=after) == by_point[after]
                    )
                    for by_point in planned.values()
                ):
                    mergeable.append(token)
        placements[params] = placement.merge(mergeable)
        merged = set(placement.points) - set(placements[params].points)
        for node_id, by_point in planned.items():
            if merged & by_point.keys():
                kept = {p: d for p, d in by_point.items() if p not in merged}
                sequences[node_id] = with_deltas(sequences[node_id], params, kept)
    return frozen_map(placements), frozen_map(sequences)
