"""What a sequence moves: ranges, who receives them, where from. Pure.

Theory of operation
-------------------
A sequence's ``RangeDelta``s say, per replication params and range, which nodes join the
range's groups (``added``) and which leave them (``removed``). Every added node must receive
the range's data before MID makes it a read replica; that is the movement map. Between START
and MID the read groups are still the old ones, so the sources are read replicas of the
current (START) placement:

* **strict** (the default): the node giving the range up (``removed``), which holds exactly
  what the range's old quorums acknowledged;
* for REPLACE and REMOVE the node giving the range up is dead, so the sources are the other
  read replicas, nearest first (the receiver's datacenter, then the rest);
* when the strict source is down an operator may allow the nearest other replica
  (``fallback``) — a source that may lack a write only its strict peer acknowledged.

A range's bounds are read off the current placement (its split points are fixed while the
sequence holds its lock), ``(points[i-1], point]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.schema import ReplicationParams
from epochal.tcm.sequences import InProgressSequence, SequenceKind
from epochal.tcm.tokens import TokenRange


@dataclass(frozen=True, slots=True, kw_only=True)
class Movement:
    params: ReplicationParams
    range: TokenRange
    receiver: str
    sources: tuple[str, ...]  # preferred, in order
    fallback: tuple[str, ...] = ()  # allowed only when the operator relaxes strict sourcing


def movements(metadata: ClusterMetadata, sequence: InProgressSequence) -> tuple[Movement, ...]:
    """The ranges ``sequence`` moves at ``metadata`` (taken between its START and MID), in
    token order per params."""
    dead = {sequence.replaced} if sequence.kind is SequenceKind.REPLACE else set()
    if sequence.kind is SequenceKind.REMOVE:
        dead.add(sequence.node_id)
    result = []
    for params in sorted(sequence.deltas, key=str):
        placement = metadata.placements.get(params)
        if placement is None or not placement.points:
            continue  # its last keyspace was dropped
        for delta in sequence.deltas[params]:
            index = placement.index_of(delta.point)
            token_range = TokenRange(placement.points[index - 1], delta.point)
            readers = placement.reads[index]
            for receiver in sorted(delta.added):
                giving_up = delta.removed - dead - {receiver}
                others = _nearest(metadata, receiver, readers - delta.removed - dead - {receiver})
                if giving_up:
                    sources, fallback = _nearest(metadata, receiver, giving_up), others
                else:
                    sources, fallback = others, ()
                result.append(
                    Movement(
                        params=params,
                        range=token_range,
                        receiver=receiver,
                        sources=sources,
                        fallback=fallback,
                    )
                )
    return tuple(result)


def _nearest(metadata: ClusterMetadata, receiver: str, nodes: frozenset[str]) -> tuple[str, ...]:
    here = metadata.nodes.get(receiver)
    datacenter = here.datacenter if here is not None else ""

    def rank(node: str) -> tuple[int, str]:
        info = metadata.nodes.get(node)
        return (0 if info is not None and info.datacenter == datacenter else 1, node)

    return tuple(sorted(nodes, key=rank))
