"""The Paxos core's expected conditions are the family's (``epochal.errors``, STYLE habit 5):
``NotLeader`` when a value is proposed to a member that does not lead, ``Overloaded`` when too
many values are already pending. The shell maps them to statuses. A shell that breaks its side
of the Ready protocol gets ``ReadyProtocolError``, which is not one of them."""

from __future__ import annotations

from epochal.errors import NotLeader, Overloaded

__all__ = ["NotLeader", "Overloaded", "ReadyProtocolError"]


class ReadyProtocolError(AssertionError):
    """The shell broke its side of the Ready protocol (see ``node``, "The shell's side"): a bug
    in the shell, never an expected condition. Like a broken invariant it is an AssertionError,
    outside the expected errors (``epochal.errors``), so nothing that handles those swallows
    it."""
