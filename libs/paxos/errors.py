"""Expected conditions of the Paxos core (STYLE habit 5); the shell maps them to statuses."""

from __future__ import annotations


class PaxosError(Exception):
    """Base of the expected conditions."""


class NotLeader(PaxosError):
    def __init__(self, leader_id: str | None) -> None:
        self.leader_id = leader_id
        super().__init__(f"not the leader; leader is {leader_id or 'unknown'}")


class Overloaded(PaxosError):
    def __init__(self, pending: int, limit: int) -> None:
        self.pending = pending
        self.limit = limit
        super().__init__(f"{pending} values already pending (limit {limit}); retry later")


class ReadyProtocolError(AssertionError):
    """The shell broke its side of the Ready protocol (see ``node``, "The shell's side"): a bug
    in the shell, never an expected condition. Like a broken invariant it is an AssertionError,
    outside the PaxosError family, so nothing that handles expected conditions swallows it."""
