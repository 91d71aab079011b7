"""The Paxos core's expected conditions are the family's (``epochal.errors``, STYLE habit 5):
``NotLeader`` when a value is proposed to a member that does not lead, ``Overloaded`` when too
many values are already pending. The shell maps them to statuses."""

from __future__ import annotations

from epochal.errors import NotLeader, Overloaded

__all__ = ["NotLeader", "Overloaded"]
