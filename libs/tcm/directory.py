"""The directory of registered nodes: id -> address, datacenter, rack, state, version."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass


class NodeState(enum.Enum):
    REGISTERED = "registered"
    JOINING = "joining"
    JOINED = "joined"
    LEAVING = "leaving"
    LEFT = "left"
    MOVING = "moving"
    REPLACING = "replacing"
    REMOVING = "removing"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    node_id: str
    address: str
    datacenter: str
    rack: str
    state: NodeState
    version: str
    registered_epoch: int


@functools.lru_cache(maxsize=256)
def parse_version(version: str) -> tuple[int, ...]:
    """'1.2.10' -> (1, 2, 10); raises ValueError for anything else."""
    parts = version.split(".")
    if not parts or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"version {version!r} is not dotted numbers like 1.0.0")
    return tuple(int(p) for p in parts)
