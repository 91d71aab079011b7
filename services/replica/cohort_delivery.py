"""A cohort's data sent to a replica that did not take part in it (``epochal.mtrack.cohorts``):
the cells this member's folds tagged as the cohort's (``ReconcileStore.tag_cohort``; a cell a
later write overwrote is no longer its data), read off this replica's storage in key order and
sent to the target as cell repairs over this node's peer stream to it, one partition a repair, a
bounded number in flight. Idempotent (last write wins): a delivery cut short is sent
again whole, and the target records the cohort as held only once it all arrived
(``HoldCohort``, asked by the reconciler after this answered)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from epochal.replica.data_store import CellRepair
from epochal.replica.handles import PeerFailed, RemoteHandle
from epochal.replica.local_replica import Outcome, PeerReply
from epochal.replica.model import Cell
from epochal.replica.stream_store import StreamStore

SCAN_CELLS = 2_000
REPAIRS_IN_FLIGHT = 64


@dataclass(frozen=True, slots=True)
class CohortSent:
    cells: int
    bytes: int
    partitions: int
    problem: str = ""  # the first failure ("" when every partition arrived)


async def send_cohort(
    streams: StreamStore,
    handle: RemoteHandle,
    *,
    epoch: int,
    keyspace: str,
    table_ids: Sequence[str],
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

    for table_id in table_ids:
        for repair in _partitions(streams, table_id, cohort_id):
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
            size += sum(_cell_bytes(c) for c in repair.cells) + len(repair.partition_key)
    if in_flight:
        done, _ = await asyncio.wait(in_flight)
        for reply in done:
            settled(reply)
    return CohortSent(cells, size, partitions, problem)


def _partitions(streams: StreamStore, table_id: str, cohort_id: int) -> Iterator[CellRepair]:
    """The table's cells tagged as ``cohort_id``'s, one repair per partition."""
    after = None
    key: tuple[int, bytes] | None = None
    cells: list[Cell] = []
    while True:
        rows = streams.scan_cohort(cohort_id, table_id, after, SCAN_CELLS)
        for row in rows:
            token, pkey = int(row[0]), bytes(row[1])
            if key is not None and key != (token, pkey) and cells:
                yield CellRepair(table_id, key[0], key[1], tuple(cells))
                cells = []
            key = (token, pkey)
            cells.append(_cell(row))
        if len(rows) < SCAN_CELLS:
            break
        last = rows[-1]
        after = (int(last[0]), bytes(last[1]), bytes(last[2]), last[3])
    if key is not None and cells:
        yield CellRepair(table_id, key[0], key[1], tuple(cells))


def _cell(row: tuple[Any, ...]) -> Cell:
    _, _, ckey, col, value, hlc, writer, tombstone = row
    return Cell(
        bytes(ckey),
        col,
        None if value is None else bytes(value),
        int(hlc),
        bytes(writer),
        bool(tombstone),
    )


def _cell_bytes(cell: Cell) -> int:
    # what a repair carries of it: clustering, column, value, hlc and writer
    return len(cell.clustering) + len(cell.column) + len(cell.value or b"") + 8 + len(cell.writer)
