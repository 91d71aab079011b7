"""Token-aware, datacenter-aware routing: which replicas the SDK asks to coordinate a request.

Theory of operation
-------------------
A write goes to a member of its token's write group, a read to a member of its read group, as
the client's metadata places them (the placement of the keyspace's replication, the range that
holds the token); with token awareness off, to any joined replica (any node coordinates). The
addresses are sorted and each request starts one further along (a turn shared by all
requests), so the load spreads over them and a retry moves to the next one. With no placement
for the keyspace yet (the client's metadata is behind, or the keyspace has no tokens), any
known replica will do: the coordinator catches up and routes itself. A request pinned to a
coordinator goes there and only there.

With a local datacenter (``Route.local_dc``), only nodes of that datacenter coordinate: the
token's replicas there, or, when it holds none, any joined node there; ``allow_remote_dc``
appends the others after them (tried when no local one answered). A route
with no coordinator left is refused with ``Unavailable`` naming the datacenter.

Replicas the transport suspects (``suspected``: requests have waited on it without any answer
for a while — a stopped or partitioned node) go last, so that a call reaches them only when
nothing else is left; the turn still rotates among the others.

Pure: the metadata and the suspects are given. Addresses are resolved once per group and
directory (the directory is immutable: a changed one is a new object).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from epochal.errors import Unavailable
from epochal.tcm import ClusterMetadata, NodeState


@dataclass(frozen=True, slots=True)
class Route:
    """How a call is routed (from its execution profile)."""

    token_aware: bool = True
    local_dc: str | None = None
    allow_remote_dc: bool = False


class Router:
    def __init__(self) -> None:
        self._turn = itertools.count()
        # (replica group, datacenter) -> (the directory it was resolved in, addresses sorted).
        self._addresses_of: dict[tuple[frozenset[str], str | None], tuple[object, list[str]]] = {}

    def candidates(
        self,
        metadata: ClusterMetadata,
        keyspace: str,
        token: int,
        *,
        write: bool,
        fallback: Sequence[str],
        pinned: str | None = None,
        route: Route = Route(),
        suspected: Collection[str] = (),
    ) -> list[str]:
        """The coordinators to try in turn: ``pinned`` alone, else the route's replicas
        (``fallback`` — the joined replicas, else the seeds — when the metadata places none or
        the route is not token-aware), rotated, suspects last."""
        if pinned:
            return [pinned]
        local = self._routed(metadata, keyspace, token, write, fallback, route, route.local_dc)
        remote: list[str] = []
        if route.local_dc and route.allow_remote_dc:
            everyone = self._routed(metadata, keyspace, token, write, fallback, route, None)
            remote = [address for address in everyone if address not in local]
        if not local and not remote:
            raise Unavailable(
                f"no replica in datacenter {route.local_dc} can coordinate a request for token "
                f"{token} of {keyspace} (the profile's local_dc; set allow_remote_dc to use "
                "another datacenter)",
                rule="no_local_replica",
            )
        turn = next(self._turn)
        return _ordered(local, turn, suspected) + _ordered(remote, turn, suspected)

    def replicas(
        self,
        metadata: ClusterMetadata,
        keyspace: str,
        token: int,
        *,
        write: bool,
        datacenter: str | None = None,
    ) -> list[str]:
        """The addresses of the token's write (or read) group, sorted, in ``datacenter`` only
        when one is named ([]: no placement)."""
        group = metadata.replica_group(keyspace, token, write=write)
        if not group:
            return []
        cached = self._addresses_of.get((group, datacenter))
        if cached is None or cached[0] is not metadata.nodes:
            if cached is not None:
                self._addresses_of.clear()  # a new directory: forget the old one's groups
            nodes = metadata.nodes
            addresses = sorted(
                nodes[n].address
                for n in group
                if n in nodes and (datacenter is None or nodes[n].datacenter == datacenter)
            )
            cached = self._addresses_of[group, datacenter] = (nodes, addresses)
        return cached[1]

    def _routed(
        self,
        metadata: ClusterMetadata,
        keyspace: str,
        token: int,
        write: bool,
        fallback: Sequence[str],
        route: Route,
        datacenter: str | None,
    ) -> list[str]:
        if route.token_aware and metadata.replica_group(keyspace, token, write=write):
            replicas = self.replicas(metadata, keyspace, token, write=write, datacenter=datacenter)
            if replicas:
                return replicas
            # No replica of the token in the datacenter: any of its nodes can coordinate.
        if datacenter is None:
            return list(fallback)  # the joined replicas (the seeds before any joined)
        return joined_replicas(metadata, datacenter)


def joined_replicas(metadata: ClusterMetadata, datacenter: str | None = None) -> list[str]:
    """The addresses of the joined replicas (of ``datacenter``), sorted."""
    return sorted(
        node.address
        for node in metadata.nodes.values()
        if node.state is NodeState.JOINED and datacenter in (None, node.datacenter)
    )


def _ordered(addresses: list[str], turn: int, suspected: Collection[str]) -> list[str]:
    if not addresses:
        return []
    start = turn % len(addresses)
    rotated = addresses[start:] + addresses[:start]
    if not suspected:
        return rotated
    return [a for a in rotated if a not in suspected] + [a for a in rotated if a in suspected]
