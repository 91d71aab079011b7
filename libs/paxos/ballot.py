"""Ballots: totally ordered Paxos round numbers, unique per proposer.

A ballot is ``(round, node_id)`` compared as a tuple, so two proposers never share a ballot and
a higher round always wins. ``ZERO_BALLOT`` is below every real ballot.

Rounds are stored as signed 64-bit integers; one election adds one, so ``MAX_ROUND`` (2^62) is
never reached by a member, and a ballot above it is refused when it is built. A ballot that
arrives in a message may name at most ``MAX_PEER_ROUND`` (2^61): a member that observed it can
still run 2^61 elections above it, so a forged ballot cannot leave the group unable to elect.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_ROUND = 1 << 62
MAX_PEER_ROUND = 1 << 61
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
