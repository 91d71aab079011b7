"""Ballots: totally ordered Paxos round numbers, unique per proposer.

A ballot is ``(round, node_id)`` compared as a tuple, so two proposers never share a ballot and
a higher round always wins. ``ZERO_BALLOT`` is below every real ballot.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Ballot:
    round: int
    node_id: str

    def __post_init__(self) -> None:
        if self.round < 0:
            raise ValueError(f"ballot round must be >= 0, got {self.round}")

    def next_for(self, node_id: str) -> Ballot:
        """The smallest ballot of ``node_id`` above this one."""
        return Ballot(self.round + 1, node_id)

    def __str__(self) -> str:
        return f"{self.round}.{self.node_id}"


ZERO_BALLOT = Ballot(0, "")
