"""Read repair, after a read's replies are in: mutation-level (tracked) or cell-level (untracked).

Theory of operation
-------------------
Tracked keyspaces (seed 002 "Read path"): the data replica D sent its data and the summary of
the partition's mutation ids, read together; each other replica S sent its summary. Where a
summary differs from D's, the coordinator asks every contacted replica again, at once, in a
*sketch round*: D for its data, each for its summary and a sketch of the differing logs, each
replica's three read from one state of it. A round settles the read when every summary that
differs from D's differs only in logs the round sketched: each sketch pair then decodes which
ids only one side holds (``epochal.mtrack``). Otherwise — a sketch did not decode (ask again
with twice the cells), or a write reached a replica in another log since the round before (add
that log) — another round follows, at most ``MAX_SKETCH_ROUNDS``. The coordinator then fetches
each missing *whole* mutation from a replica that holds it, answers with D's data of that same
round plus the mutations D lacked, and stores each mutation on every contacted replica that
lacks it before it answers.

A summary covers the ids at or above the replica's low bound (below it, the reconciler found
every id on every replica and the logs were collected). Replicas at different low bounds — one
advanced, another not yet — are asked again together at the highest bound, and compared there.
A holder whose bound passed an id between the round that found it missing and the fetch answers
it as *held*; the read then takes another round at the bounds as they are.

**Cohorts** (``read_cohorts``): a contacted replica lacking a cohort another names is repaired
with the whole partition from a holder before any data answers, again after every round.

So the answer is exactly the union of what the contacted replicas held in the settling round,
and every contacted replica holds all of it when the read returns: every write acknowledged
before the read started is in it (a quorum held it already), a mutation is never seen torn, and
what one quorum read returned every later one returns too. Answering with D's data of an
earlier round than the one the difference was computed on loses exactly the mutations that
reached D between the rounds (another read's repair, a late write): they are then in neither
the data nor the repair set.

Untracked keyspaces (classic digest reads, for comparison): the others send a digest of their
cells in the slice; on a mismatch the coordinator reads the data of every contacted replica,
merges it cell by cell (last write wins), and writes each replica the cells it lacks. Only the
slice read is repaired, so a mutation can be torn: the seed's reason for tracking mutations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from epochal.errors import InvalidRequest, Unavailable
from epochal.mtrack import (
    MAX_SKETCH_ROUNDS,
    MutationId,
    Undecodable,
    cells_for,
    cohorts,
    difference,
    differing_logs,
    more_cells,
)
from epochal.replica.borrowed import fetch_bodies
from epochal.replica.codec import mutation_from_body
from epochal.replica.data_store import CellRepair
from epochal.replica.handles import PeerFailed, ReplicaHandle
from epochal.replica.local_replica import Outcome, PartitionRead, PeerReply
from epochal.replica.model import Cell, Mutation, digest, merge, stale_cells
from epochal.replica.read_cohorts import repair_cohorts

REPAIRS_IN_FLIGHT = 256


class HeldBelowBound(Exception):
    """The ids a repair could not fetch were collected below a holder's low bound since the
    round that found them missing: every replica held them then, so a new round settles it."""


LogKey = tuple[int, int]

if TYPE_CHECKING:
    from epochal.replica.coordinator import Coordinator
    from epochal.replica.read_path import ReadStats


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
        """The data replica's cells plus those of every mutation it lacked, all of one round;
        every contacted replica holds every mutation of that round's answer when this
        returns."""
        data_node, *others = replies
        repaired: list[cohorts.CohortMark] = []  # cohorts this read repaired the partition from
        state = await repair_cohorts(self, epoch, read, dict(replies), stats, deadline, repaired)
        logs: set[LogKey] = set()
        cells = 0
        for round_number in range(1, MAX_SKETCH_ROUNDS + 2):
            stats.summary_rounds = round_number
            bound = self._common_bound(state)
            if bound is not None:
                # Replicas at different low bounds (one advanced, one not yet): compare at the
                # highest. Every id below it was on every replica of the range when it advanced.
                if round_number == 1:
                    stats.summaries_agreed = False
                if round_number > MAX_SKETCH_ROUNDS:
                    break
                read = replace(read, low_bound=bound)
                cells = max(cells, cells_for(1))
                state = await self._round(
                    epoch, read, state, sorted(logs), cells, deadline, stats, repaired
                )
                continue
            differing = self._differing(state, data_node, others)
            if round_number == 1:
                stats.summaries_agreed = not differing
                stats.differing = {n: tuple(sorted(found)) for n, found in differing.items()}
                if differing:
                    self.coordinator.metrics.summary_mismatches.inc()
            if not differing:
                return list(state[data_node].cells)
            wanted = set().union(*differing.values())
            if round_number > 1 and wanted <= logs:
                try:
                    found = {n: self._decoded(state, data_node, n) for n in differing}
                except Undecodable:
                    cells = more_cells(cells)
                else:
                    try:
                        return await self._repair(
                            epoch, read, state, data_node, found, stats, deadline
                        )
                    except HeldBelowBound:
                        # A holder's low bound passed ids since this round (every replica held
                        # them then): another round compares at the bounds as they are now.
                        if round_number > MAX_SKETCH_ROUNDS:
                            break
                        state = await self._round(
                            epoch, read, state, sorted(logs), cells, deadline, stats, repaired
                        )
                        continue
            if round_number > MAX_SKETCH_ROUNDS:
                break  # the last round's answer is in; another would be thrown away
            logs |= wanted
            estimate = max(sum(found.values()) for found in differing.values())
            cells = max(cells, cells_for(estimate))
            state = await self._round(
                epoch, read, state, sorted(logs), cells, deadline, stats, repaired
            )
        raise Unavailable(
            f"could not tell which mutations {sorted(replies)} differ by "
            f"({MAX_SKETCH_ROUNDS} sketch rounds); retry the read"
        )

    async def _round(
        self,
        epoch: int,
        read: PartitionRead,
        state: Mapping[str, PeerReply],
        logs: list[LogKey],
        cells: int,
        deadline: float,
        stats: ReadStats,
        repaired: list[cohorts.CohortMark],
    ) -> dict[str, PeerReply]:
        """A sketch round, then the cohort check on what it found: a replica may have folded
        ids into a cohort since the round before (they leave its summary)."""
        state = await self._sketch_round(epoch, read, state, logs, cells, deadline)
        return await repair_cohorts(
            self, epoch, read, state, stats, deadline, repaired, logs, cells
        )

    @staticmethod
    def _common_bound(state: Mapping[str, PeerReply]) -> int | None:
        """None when every summary names the same low bound; else the highest they name."""
        bounds = {reply.summary.low_bound for reply in state.values() if reply.summary}
        return max(bounds) if len(bounds) > 1 else None

    @staticmethod
    def _differing(
        state: Mapping[str, PeerReply], data_node: str, others: list[str]
    ) -> dict[str, dict[LogKey, int]]:
        """Per other replica, the logs whose summary differs from the data replica's."""
        base = state[data_node].summary
        assert base is not None, "a tracked data reply carries its summary"
        differing = {}
        for node in others:
            summary = state[node].summary
            assert summary is not None, "a tracked reply carries its summary"
            found = differing_logs(base, summary)
            if found:
                differing[node] = found
        return differing

    @staticmethod
    def _decoded(
        state: Mapping[str, PeerReply], data_node: str, node: str
    ) -> tuple[frozenset[MutationId], frozenset[MutationId]]:
        """(ids only the data replica holds, ids only ``node`` holds), from their sketches of
        this round; raises Undecodable."""
        data, other = state[data_node], state[node]
        assert data.summary is not None and data.sketch is not None
        assert other.summary is not None and other.sketch is not None
        found = difference(data.summary, data.sketch, other.summary, other.sketch)
        return found.only_a, found.only_b

    async def _sketch_round(
        self,
        epoch: int,
        read: PartitionRead,
        state: Mapping[str, PeerReply],
        logs: list[LogKey],
        cells: int,
        deadline: float,
    ) -> dict[str, PeerReply]:
        """Ask every contacted replica again, at once: the data replica for its data, and each
        for its summary and a sketch of ``logs``, each read from one state of that replica."""
        nodes = list(state)
        answers = await asyncio.gather(
            *(
                self._call(
                    node,
                    lambda handle, timeout_s, data=(node == nodes[0]): handle.read(
                        epoch,
                        read,
                        data=data,
                        summary=True,
                        digest=False,
                        timeout_s=timeout_s,
                        sketch_logs=logs,
                        sketch_cells=cells,
                    ),
                    deadline,
                )
                for node in nodes
            )
        )
        for node, answer in zip(nodes, answers, strict=True):
            if answer.summary is None or (cells and answer.sketch is None):
                raise Unavailable(
                    f"{node} answered a sketch round without its summary or sketch (an older "
                    "version?); retry the read"
                )
        return dict(zip(nodes, answers, strict=True))

    async def _repair(
        self,
        epoch: int,
        read: PartitionRead,
        state: Mapping[str, PeerReply],
        data_node: str,
        found: Mapping[str, tuple[frozenset[MutationId], frozenset[MutationId]]],
        stats: ReadStats,
        deadline: float,
    ) -> list[Cell]:
        """Answer with the data replica's cells of this round plus every mutation another
        replica held that it lacked, and store each on every contacted replica lacking it."""
        only_data = {node: pair[0] for node, pair in found.items()}
        only_other = {node: pair[1] for node, pair in found.items()}
        missing_on_data = frozenset().union(*only_other.values())
        lacking = {data_node: missing_on_data}
        for node in state:
            if node != data_node:
                lacking[node] = only_data.get(node, frozenset()) | (
                    missing_on_data - only_other.get(node, frozenset())
                )
        holders = {data_node: frozenset().union(*only_data.values()), **only_other}
        mutations = await self._fetch(epoch, read, holders, deadline)
        cells = list(state[data_node].cells)
        for mutation_id in missing_on_data:
            cells.extend(mutations[mutation_id.key][0].cells())
        repaired = await self._store(epoch, lacking, mutations, deadline)
        stats.repaired.extend(sorted(repaired))
        self.coordinator.metrics.read_repaired_mutations.inc(len(repaired))
        return cells

    async def _fetch(
        self,
        epoch: int,
        read: PartitionRead,
        holders: Mapping[str, frozenset[MutationId]],
        deadline: float,
    ) -> dict[tuple[int, int, int], tuple[Mutation, bytes]]:
        """Every id in ``holders``, fetched whole from a replica that holds it (an answer stops
        at a size budget; the rest is asked for again). Raises HeldBelowBound when every id not
        fetched was answered as held below the holder's low bound."""
        fetched: dict[tuple[int, int, int], tuple[Mutation, bytes]] = {}
        held: set[tuple[int, int, int]] = set()

        async def from_holder(node: str, ids: list[MutationId]) -> None:
            while ids:
                reply = await self._call(
                    node,
                    lambda handle, timeout_s, chunk=ids: handle.fetch(
                        epoch,
                        chunk,
                        timeout_s=timeout_s,
                        keyspace=read.keyspace,
                        token=read.token,
                    ),
                    deadline,
                )
                held.update(i.key for i in reply.held)
                for body in reply.bodies:
                    mutation = mutation_from_body(body)
                    fetched[mutation.id.key] = (mutation, body)
                ids = ids[max(reply.examined, 1) :]

        wanted = {node: sorted(ids) for node, ids in holders.items() if ids}
        await asyncio.gather(*(from_holder(node, ids) for node, ids in wanted.items()))
        missing = [i for ids in wanted.values() for i in ids if i.key not in fetched]
        if missing and all(i.key in held for i in missing):
            raise HeldBelowBound()
        if missing:  # held by id only where reported (a joined node's): whole elsewhere
            fetched.update(await self._elsewhere(epoch, read, set(holders), missing, deadline))
            missing = [i for i in missing if i.key not in fetched]
            if missing and all(i.key in held for i in missing):
                raise HeldBelowBound()
        if missing:
            raise Unavailable(
                f"read repair could not fetch {len(missing)} mutation(s) (e.g. {missing[0]}) "
                "from the replicas that reported them; retry the read"
            )
        return fetched

    async def _elsewhere(
        self,
        epoch: int,
        read: PartitionRead,
        asked: set[str],
        ids: list[MutationId],
        deadline: float,
    ) -> dict[tuple[int, int, int], tuple[Mutation, bytes]]:
        """``ids`` whole from the token's other replicas, the read did not contact."""
        coordinator = self.coordinator
        metadata = coordinator.follower.metadata
        others = sorted(
            (
                metadata.replica_group(read.keyspace, read.token, write=False)
                | metadata.replica_group(read.keyspace, read.token, write=True)
            )
            - asked
        )
        fetched: dict[tuple[int, int, int], tuple[Mutation, bytes]] = {}
        for node in others:
            remaining = deadline - asyncio.get_running_loop().time()
            wanted = [i for i in ids if i.key not in fetched]
            if not wanted or remaining <= 0:
                break
            try:
                handle = coordinator.handle(metadata, node)
                fetched.update(await fetch_bodies(handle, epoch, wanted, timeout_s=remaining))
            except PeerFailed:
                continue
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
        if reply.outcome is Outcome.TOO_LARGE:  # as in the first round: no retry helps
            raise InvalidRequest(reply.message, rule="too_large")
        if reply.outcome is not Outcome.OK:
            raise Unavailable(
                f"read repair failed: {node} answered {reply.outcome.value}: {reply.message}"
            )
        return reply
