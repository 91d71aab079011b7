"""Whole mutations fetched from another replica by id (its ``FetchMutations``), page by page: what
a joining node takes by difference from the range's other replicas, and what a replica sends
for the entries it holds by id only (their data came streamed; their bodies live elsewhere)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from epochal.mtrack import MutationId
from epochal.replica.codec import mutation_from_body
from epochal.replica.handles import PeerFailed, ReplicaHandle
from epochal.replica.local_replica import Outcome
from epochal.replica.model import Mutation

Fetched = dict[tuple[int, int, int], tuple[Mutation, bytes]]


async def fetch_bodies(
    handle: ReplicaHandle,
    epoch: int,
    ids: Sequence[MutationId],
    *,
    timeout_s: float,
    keyspace: str = "",
    token: int = 0,
    held: set[tuple[int, int, int]] | None = None,
) -> Fetched:
    """Those of ``ids`` the replica behind ``handle`` holds whole, by id key (a page answers up
    to a size budget; the rest is asked again). With the partition's ``keyspace`` and
    ``token``, the keys of ids below the low bound there (every replica held them: no body is
    needed) are added to ``held``. Raises PeerFailed when it cannot be reached."""
    fetched: Fetched = {}
    wanted = list(ids)
    while wanted:
        reply = await handle.fetch(
            epoch, wanted, timeout_s=timeout_s, keyspace=keyspace, token=token
        )
        if reply.outcome is not Outcome.OK:
            raise PeerFailed(handle.node_id, f"{reply.outcome.value}: {reply.message}")
        if held is not None:
            held.update(i.key for i in reply.held)
        for body in reply.bodies:
            mutation = mutation_from_body(body)
            fetched[mutation.id.key] = (mutation, body)
        wanted = wanted[max(reply.examined, 1) :]
    return fetched


async def borrow(
    handles: Iterable[ReplicaHandle], epoch: int, ids: Sequence[MutationId], *, timeout_s: float
) -> list[bytes]:
    """The bodies of ``ids`` from the first of ``handles`` holding each (an unreachable one is
    passed over): for entries held here by id only."""
    bodies: list[bytes] = []
    missing = list(ids)
    for handle in handles:
        if not missing:
            break
        try:
            fetched = await fetch_bodies(handle, epoch, missing, timeout_s=timeout_s)
        except PeerFailed:
            continue
        bodies += (fetched[i.key][1] for i in missing if i.key in fetched)
        missing = [i for i in missing if i.key not in fetched]
    return bodies
