"""The cohort step of a tracked read's repair (``read_repair``; ``epochal.mtrack.cohorts``).

Ids a cohort reconciled are gone from its members' logs, so their summaries no longer list them;
they name the cohorts they hold instead. A contacted replica lacking a cohort another names holds
neither those ids nor, maybe, their data: before any data answers, each such replica receives
from a holder the *whole* partition's cells (a mutation is never torn), and the round is read
again. The answer then holds the cohort's data, and so does every contacted replica — as for a
repaired mutation, a later quorum read returns it. The check runs again after every sketch round:
a replica may fold ids into a cohort between two rounds.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from epochal.errors import Unavailable
from epochal.mtrack import MAX_SKETCH_ROUNDS, cohorts
from epochal.replica.data_store import CellRepair
from epochal.replica.local_replica import PartitionRead, PeerReply
from epochal.replica.model import merge
from epochal.tcm.keys import EVERYTHING

if TYPE_CHECKING:
    from epochal.replica.read_path import ReadStats
    from epochal.replica.read_repair import LogKey, ReadRepair


async def repair_cohorts(
    reads: ReadRepair,
    epoch: int,
    read: PartitionRead,
    state: dict[str, PeerReply],
    stats: ReadStats,
    deadline: float,
    repaired: list[cohorts.CohortMark],
    logs: list[LogKey] | None = None,
    cells: int = 0,
) -> dict[str, PeerReply]:
    """``state`` once no contacted replica lacks a cohort another one holds: each lacking
    one first receives the whole partition's cells from holders, then every replica is
    asked again (as the round was: ``logs``, ``cells``; a cohort can grow meanwhile: again,
    a few times). A cohort repaired by this read (``repaired``, which this extends) counts
    as held by every contacted replica for this partition: their summaries go on naming it
    only where it was folded or delivered whole."""
    for _ in range(MAX_SKETCH_ROUNDS):
        # a cohort a replica's bound passed is finished (every replica held it then)
        floor = max((r.summary.low_bound for r in state.values() if r.summary), default=0)
        wanted = cohorts.needed(
            {node: [m for m in reply.cohorts if m.high > floor] for node, reply in state.items()}
        )
        short = {n: cohorts.lacking([*r.cohorts, *repaired], wanted) for n, r in state.items()}
        short = {node: ids for node, ids in short.items() if ids}
        if not short:
            return state
        donors = set()
        for cohort_id in {i for ids in short.values() for i in ids}:
            mark = {cohort_id: wanted[cohort_id]}
            donors.add(next(n for n, r in state.items() if not cohorts.lacking(r.cohorts, mark)))
        whole = replace(read, bounds=EVERYTHING)
        answers = await asyncio.gather(
            *(
                reads._call(
                    node,
                    lambda handle, timeout_s, whole=whole: handle.read(
                        epoch,
                        whole,
                        data=True,
                        summary=False,
                        digest=False,
                        timeout_s=timeout_s,
                    ),
                    deadline,
                )
                for node in sorted(donors)
            )
        )
        merged = merge(*(answer.cells for answer in answers))
        fill = CellRepair(
            read.table_id, read.token, read.partition_key, tuple(merged[k] for k in sorted(merged))
        )
        await asyncio.gather(
            *(
                reads._call(
                    node,
                    lambda handle, timeout_s, fill=fill: handle.repair_cells(
                        epoch, read.keyspace, fill, timeout_s=timeout_s
                    ),
                    deadline,
                )
                for node in sorted(short)
            )
        )
        repaired += [cohorts.CohortMark(i, h) for i, h in wanted.items()]
        stats.repaired_cells += len(fill.cells) * len(short)
        reads.coordinator.metrics.read_cohort_repairs.inc()
        state = await reads._sketch_round(epoch, read, state, logs or [], cells, deadline)
    raise Unavailable(
        f"the replicas {sorted(state)} kept naming cohorts some of them lack "
        f"({MAX_SKETCH_ROUNDS} repairs); retry the read"
    )
