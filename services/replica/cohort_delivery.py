"""A cohort's data sent to a replica that did not take part in it (``epochal.mtrack.cohorts``):
the partitions this member's folds recorded as the cohort's (``ReconcileStore.tag_cohort``), each
read whole off this replica's storage — a mutation writes one partition, so none is torn; newer
cells there only add — and sent to the target as a cell repair over this node's peer stream to
it, a bounded number in flight. Idempotent (last write wins): a delivery cut short is sent
again whole, and the target records the cohort as held only once it all arrived
(``HoldCohort``, asked by the reconciler after this answered)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from epochal.replica.data_store import CellRepair, DataStore
from epochal.replica.handles import PeerFailed, RemoteHandle
from epochal.replica.local_replica import Outcome, PeerReply
from epochal.replica.model import cell_bytes
from epochal.replica.stream_store import StreamStore
from epochal.tcm.keys import EVERYTHING

SCAN_PARTITIONS = 500
REPAIRS_IN_FLIGHT = 64


@dataclass(frozen=True, slots=True)
class CohortSent:
    cells: int
    bytes: int
    partitions: int
    problem: str = ""  # the first failure ("" when every partition arrived)


async def send_cohort(
    data: DataStore,
    streams: StreamStore,
    handle: RemoteHandle,
    *,
    epoch: int,
    keyspace: str,
    cohort_id: int,
    timeout_s: float,
) -> CohortSent:
    cells = size = partitions = 0
    problem = ""
    in_flight: set[asyncio.Future[PeerReply]] = set()

    def settled(reply: asyncio.Future[PeerReply]) -> None:
        nonlocal problem
        failure = reply.exception()
        answer = reply.result() if failure is None else None
        if answer is not None and answer.outcome is Outcome.OK:
            return
        if not problem:
            problem = (
                f"{answer.outcome.value}: {answer.message}" if answer is not None else str(failure)
            )

    for repair in _partitions(data, streams, cohort_id):
        if problem:
            break
        while len(in_flight) >= REPAIRS_IN_FLIGHT:
            done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            for reply in done:
                settled(reply)
        try:
            future = handle.repair_cells(epoch, keyspace, repair, timeout_s=timeout_s)
        except PeerFailed as error:
            problem = str(error)
            break
        in_flight.add(future)
        partitions += 1
        cells += len(repair.cells)
        size += sum(cell_bytes(c) for c in repair.cells) + len(repair.partition_key)
    if in_flight:
        done, _ = await asyncio.wait(in_flight)
        for reply in done:
            settled(reply)
    return CohortSent(cells, size, partitions, problem)


def _partitions(data: DataStore, streams: StreamStore, cohort_id: int) -> Iterator[CellRepair]:
    """Each partition recorded as ``cohort_id``'s, whole, as a repair."""
    after = None
    while True:
        keys = streams.scan_cohort(cohort_id, after, SCAN_PARTITIONS)
        for table_id, token, pkey in keys:
            cells = data.read_cells(table_id, token, pkey, EVERYTHING)
            if cells:
                yield CellRepair(table_id, token, pkey, tuple(cells))
        if len(keys) < SCAN_PARTITIONS:
            return
        after = keys[-1]
