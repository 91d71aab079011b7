"""Read repair, after a read's replies are in: mutation-level (tracked) or cell-level (untracked).

Theory of operation
-------------------
Tracked keyspaces (seed 002 "Read path"): the data replica D sent its data and the summary of
the partition's mutation ids, read together; each other replica S sent its summary. Where a
summary differs from D's, round 2 asks D and S for sketches of the differing logs and decodes
which ids only one of them holds (``epochal.mtrack``; an undecodable sketch is asked for again
with twice the cells). Then the coordinator fetches each missing *whole* mutation from a replica
that holds it, applies the ones D lacks to the response, and stores each on every contacted
replica that lacks it before it answers: a mutation is never seen torn, and what one read
returned a later quorum read returns too.

Untracked keyspaces (classic digest reads, for comparison): the others send a digest of their
cells in the slice; on a mismatch the coordinator reads the data of every contacted replica,
merges it cell by cell (last write wins), and writes each replica the cells it lacks. Only the
slice read is repaired, so a mutation can be torn: the seed's reason for tracking mutations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from epochal.mtrack import (
    MAX_CELLS,
    MAX_SKETCH_ROUNDS,
    MutationId,
    Undecodable,
    cells_for,
    difference,
    differing_logs,
)
from epochal.replica.codec import mutation_from_body
from epochal.replica.errors import Unavailable
from epochal.replica.handles import PeerFailed, ReplicaHandle
from epochal.replica.local_replica import Outcome, PartitionRead, PeerReply
from epochal.replica.model import Cell, Mutation, digest, merge, stale_cells
from epochal.replica.storage import CellRepair

REPAIRS_IN_FLIGHT = 256

if TYPE_CHECKING:
    from epochal.replica.coordinator import Coordinator, ReadStats


class ReadRepair:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    # ------------------------------------------------------------------ tracked

    async def reconcile(
        self,
        epoch: int,
        read: PartitionRead,
        stats: ReadStats,
        replies: Mapping[str, PeerReply],
        deadline: float,
    ) -> list[Cell]:
        """The data replica's cells plus those of every mutation it lacked; every contacted
        replica holds every mutation any of them held when this returns."""
        data_node, *others = replies
        base = replies[data_node].summary
        assert base is not None, "a tracked data reply carries its summary"
        cells = list(replies[data_node].cells)
        differing = {}
        for node in others:
            summary = replies[node].summary
            assert summary is not None
            logs = differing_logs(base, summary)
            if logs:
                differing[node] = logs
        if not differing:
            return cells
        self.coordinator.metrics.summary_mismatches.inc()
        only_data: dict[str, frozenset[MutationId]] = {}
        only_other: dict[str, frozenset[MutationId]] = {}
        for node, logs in differing.items():
            found = await self._difference(epoch, read, data_node, node, logs, deadline)
            only_data[node], only_other[node] = found
        missing_on_data = frozenset().union(*only_other.values())
        lacking = {data_node: missing_on_data}
        for node in others:
            lacking[node] = only_data.get(node, frozenset()) | (
                missing_on_data - only_other.get(node, frozenset())
            )
        holders = {data_node: frozenset().union(*only_data.values()), **only_other}
        mutations = await self._fetch(epoch, holders, deadline)
        for mutation_id in missing_on_data:
            cells.extend(mutations[mutation_id.key][0].cells())
        repaired = await self._store(epoch, lacking, mutations, deadline)
        stats.repaired.extend(sorted(repaired))
        self.coordinator.metrics.read_repaired_mutations.inc(len(repaired))
        return cells

    async def _difference(
        self,
        epoch: int,
        read: PartitionRead,
        data_node: str,
        node: str,
        logs: Mapping[tuple[int, int], int],
        deadline: float,
    ) -> tuple[frozenset[MutationId], frozenset[MutationId]]:
        """(ids only the data replica holds, ids only ``node`` holds) in the differing logs.
        Each sketch comes with a summary of the same logs taken at the same moment, and is
        checked against that one: a write that reached a replica since round 1 is simply part
        of the difference."""
        cells = cells_for(sum(logs.values()))
        for _ in range(MAX_SKETCH_ROUNDS):
            data_reply, node_reply = await asyncio.gather(
                self._sketch(epoch, read, data_node, list(logs), cells, deadline),
                self._sketch(epoch, read, node, list(logs), cells, deadline),
            )
            assert data_reply.summary is not None and node_reply.summary is not None
            assert data_reply.sketch is not None and node_reply.sketch is not None
            try:
                found = difference(
                    data_reply.summary, data_reply.sketch, node_reply.summary, node_reply.sketch
                )
            except Undecodable:
                cells = min(cells * 2, MAX_CELLS)
                continue
            return found.only_a, found.only_b
        raise Unavailable(
            f"could not tell which mutations {data_node} and {node} differ by "
            f"({MAX_SKETCH_ROUNDS} sketches); retry the read"
        )

    async def _sketch(
        self,
        epoch: int,
        read: PartitionRead,
        node: str,
        logs: list[tuple[int, int]],
        cells: int,
        deadline: float,
    ) -> PeerReply:
        return await self._call(
            node,
            lambda handle, timeout_s: handle.sketch(epoch, read, logs, cells, timeout_s=timeout_s),
            deadline,
        )

    async def _fetch(
        self,
        epoch: int,
        holders: Mapping[str, frozenset[MutationId]],
        deadline: float,
    ) -> dict[tuple[int, int, int], tuple[Mutation, bytes]]:
        """Every id in ``holders``, fetched whole from a replica that holds it (an answer stops
        at a size budget; the rest is asked for again)."""
        fetched: dict[tuple[int, int, int], tuple[Mutation, bytes]] = {}

        async def from_holder(node: str, ids: list[MutationId]) -> None:
            while ids:
                reply = await self._call(
                    node,
                    lambda handle, timeout_s, chunk=ids: handle.fetch(
                        epoch, chunk, timeout_s=timeout_s
                    ),
                    deadline,
                )
                for body in reply.bodies:
                    mutation = mutation_from_body(body)
                    fetched[mutation.id.key] = (mutation, body)
                ids = ids[max(reply.examined, 1) :]

        wanted = {node: sorted(ids) for node, ids in holders.items() if ids}
        await asyncio.gather(*(from_holder(node, ids) for node, ids in wanted.items()))
        missing = [i for ids in wanted.values() for i in ids if i.key not in fetched]
        if missing:
            raise Unavailable(
                f"read repair could not fetch {len(missing)} mutation(s) (e.g. {missing[0]}) "
                "from the replicas that reported them; retry the read"
            )
        return fetched

    async def _store(
        self,
        epoch: int,
        lacking: Mapping[str, frozenset[MutationId]],
        mutations: Mapping[tuple[int, int, int], tuple[Mutation, bytes]],
        deadline: float,
    ) -> set[MutationId]:
        """Store every mutation on every replica that lacks it, at most REPAIRS_IN_FLIGHT at a
        time (a replica back from a long outage may lack thousands); wait for all of them."""
        work = [(node, mutation_id) for node, ids in lacking.items() for mutation_id in ids]
        for start in range(0, len(work), REPAIRS_IN_FLIGHT):
            calls = []
            for node, mutation_id in work[start : start + REPAIRS_IN_FLIGHT]:
                mutation, body = mutations[mutation_id.key]
                calls.append(
                    self._call(
                        node,
                        lambda handle, timeout_s, m=mutation, b=body: handle.repair(
                            epoch, m, b, timeout_s=timeout_s
                        ),
                        deadline,
                    )
                )
            await asyncio.gather(*calls)
        return {mutation_id for _, mutation_id in work}

    # ------------------------------------------------------------------ untracked

    async def digests(
        self,
        epoch: int,
        read: PartitionRead,
        stats: ReadStats,
        replies: Mapping[str, PeerReply],
        deadline: float,
    ) -> list[Cell]:
        data_node, *others = replies
        cells = list(replies[data_node].cells)
        expected = digest(cells)
        mismatched = [n for n in others if replies[n].digest != expected]
        if not mismatched:
            return cells
        stats.digest_mismatch = True
        self.coordinator.metrics.digest_mismatches.inc()
        full = await asyncio.gather(
            *(
                self._call(
                    node,
                    lambda handle, timeout_s: handle.read(
                        epoch, read, data=True, summary=False, digest=False, timeout_s=timeout_s
                    ),
                    deadline,
                )
                for node in mismatched
            )
        )
        # A replica whose digest matched holds what the data replica holds, so it lacks what
        # that one lacks: repairing only the mismatched ones could leave a cell this read
        # returns on fewer replicas than a later quorum needs.
        held = {node: cells for node in replies if node not in mismatched}
        held.update((n, list(r.cells)) for n, r in zip(mismatched, full, strict=True))
        merged = merge(*held.values())
        repairs = []
        for node, node_cells in held.items():
            stale = stale_cells(merged, node_cells)
            if stale:
                stats.repaired_cells += len(stale)
                repair = CellRepair(read.table_id, read.token, read.partition_key, tuple(stale))
                repairs.append(
                    self._call(
                        node,
                        lambda handle, timeout_s, r=repair: handle.repair_cells(
                            epoch, read.keyspace, r, timeout_s=timeout_s
                        ),
                        deadline,
                    )
                )
        await asyncio.gather(*repairs)
        self.coordinator.metrics.read_repaired_cells.inc(stats.repaired_cells)
        return list(merged.values())

    # ------------------------------------------------------------------ calls

    async def _call(
        self,
        node: str,
        call: Callable[[ReplicaHandle, float], Awaitable[PeerReply]],
        deadline: float,
    ) -> PeerReply:
        """One call to a contacted replica; anything but OK fails the read (it cannot be
        answered without that replica's part)."""
        coordinator = self.coordinator
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise Unavailable(f"read repair ran out of time before asking {node}")
        try:
            reply = await call(coordinator.handle(coordinator.follower.metadata, node), remaining)
        except PeerFailed as error:
            raise Unavailable(f"read repair failed: {error}") from None
        if reply.outcome is not Outcome.OK:
            raise Unavailable(
                f"read repair failed: {node} answered {reply.outcome.value}: {reply.message}"
            )
        return reply
