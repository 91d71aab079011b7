"""A member's roles."""

from __future__ import annotations

import enum


class Role(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"
