"""Ballots: totally ordered Paxos round numbers, unique per proposer.

A ballot is ``(round, node_id)`` compared as a tuple, so two proposers never share a ballot and
a higher round always wins. ``ZERO_BALLOT`` is below every real ballot.

Rounds are stored as signed 64-bit integers; one election adds one, so ``MAX_ROUND`` (2^62) is
never reached, and a ballot above it is refused when it is built (the CMS answers a message
naming one INVALID_ARGUMENT). A forged message naming a round at the very end of the range can
still leave no higher ballot to elect with (the node then counts ``rounds_exhausted`` and stays a
follower; the operator override recovers): like every well-formed forged Paxos message, only
authenticated peers keep it out. A cap relative to the rounds a member has seen would not: a
member cut off for long campaigns alone and comes back far ahead, and a new member has seen none.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_ROUND = 1 << 62
MAX_NODE_ID_LENGTH = 128  # what the acceptor's tables hold


@dataclass(frozen=True, order=True, slots=True)
class Ballot:
    round: int
    node_id: str

    def __post_init__(self) -> None:
        if not 0 <= self.round <= MAX_ROUND:
            raise ValueError(f"ballot round must be in 0..2^62, got {self.round}")
        if len(self.node_id) > MAX_NODE_ID_LENGTH:
            raise ValueError(
                f"ballot node id is {len(self.node_id)} characters; at most {MAX_NODE_ID_LENGTH}"
            )

    def next_for(self, node_id: str) -> Ballot:
        """The smallest ballot of ``node_id`` above this one."""
        return Ballot(self.round + 1, node_id)

    def __str__(self) -> str:
        return f"{self.round}.{self.node_id}"


ZERO_BALLOT = Ballot(0, "")
