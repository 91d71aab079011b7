"""Token-aware routing: which replicas the SDK asks to coordinate a request for a partition.

Theory of operation
-------------------
A write goes to a member of its token's write group, a read to a member of its read group, as
the client's metadata places them (the placement of the keyspace's replication, the range that
holds the token). The group's addresses are sorted and each request starts one further along
(a turn shared by all requests), so the load spreads over the group and a retry moves to the
next one. With no placement for the keyspace yet (the client's metadata is behind, or the
keyspace has no tokens), any known replica will do: the coordinator catches up and routes
itself. A request pinned to a coordinator goes there and only there.

Pure: the metadata is given. Addresses are resolved once per group and directory (the directory
is immutable: a changed one is a new object).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from epochal.tcm import ClusterMetadata


class Router:
    def __init__(self) -> None:
        self._turn = itertools.count()
        # Replica group -> (the directory it was resolved in, addresses sorted).
        self._addresses_of: dict[frozenset[str], tuple[object, list[str]]] = {}

    def candidates(
        self,
        metadata: ClusterMetadata,
        keyspace: str,
        token: int,
        *,
        write: bool,
        fallback: Sequence[str],
        pinned: str | None = None,
    ) -> list[str]:
        """The coordinators to try in turn: ``pinned`` alone, else the token's replicas
        (``fallback`` when the metadata places none), rotated."""
        if pinned:
            return [pinned]
        replicas = self.replicas(metadata, keyspace, token, write=write) or list(fallback)
        assert replicas, "no replica to route to: the client has no seed"
        start = next(self._turn) % len(replicas)
        return replicas[start:] + replicas[:start]

    def replicas(
        self, metadata: ClusterMetadata, keyspace: str, token: int, *, write: bool
    ) -> list[str]:
        """The addresses of the token's write (or read) group, sorted ([]: no placement)."""
        group = metadata.replica_group(keyspace, token, write=write)
        if not group:
            return []
        cached = self._addresses_of.get(group)
        if cached is None or cached[0] is not metadata.nodes:
            addresses = sorted(metadata.nodes[n].address for n in group if n in metadata.nodes)
            cached = self._addresses_of[group] = (metadata.nodes, addresses)
        return cached[1]
