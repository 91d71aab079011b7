"""A full round's cohort step: before the low bound of a range advances, every replica must hold
every cohort any of them holds (``epochal.mtrack.cohorts``) — a replica that returned from a
long partition receives the data of the cohorts it did not take part in, from a holder, as cells
(``DeliverCohort``), and then records them (``HoldCohort``). The advance carries the cohorts
they then all hold, and a replica holding others refuses it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from epochal.mtrack.cohorts import Cohort, CohortMark, cohort_id, finished, lacking, needed
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.range_calls import RangeState

if TYPE_CHECKING:
    from epochal.reconciler.rounds import Round

COHORT_DELIVERIES_AT_ONCE = 2


async def deliver_cohorts(
    round_: Round, states: Mapping[str, RangeState], bounds: RangeMarks
) -> tuple[CohortMark, ...]:
    """Deliver every cohort a replica lacks to it; the cohorts every replica then holds (a
    cohort ``bounds`` passed is finished: every replica held it when that bound advanced)."""
    wanted = needed(
        {node: [c.mark for c in s.cohorts if not finished(c, bounds)] for node, s in states.items()}
    )
    if not wanted:
        return ()
    records = _sources(states, wanted)
    work = [
        (node, cohort_id)
        for node, state in sorted(states.items())
        for cohort_id in sorted(lacking([c.mark for c in state.cohorts], wanted))
    ]
    unsourced = sorted({f"{i:x}" for _, i in work if i not in records})
    if unsourced:
        from epochal.reconciler.rounds import RoundEnded  # (rounds imports this module)

        # No member that folded it answered: no advance (the replicas holding it would pass it,
        # and a finished cohort is never sent again).
        raise RoundEnded(
            "unconverged", f"cohorts {unsourced} lack a member to send them; not advancing"
        )
    gate = asyncio.Semaphore(COHORT_DELIVERIES_AT_ONCE)

    async def one(target: str, source_and_cohort: tuple[str, Cohort]) -> None:
        source, cohort = source_and_cohort
        async with gate:
            round_._check()
            cells, size = await round_.client.deliver_cohort(
                round_.replicas[source], round_.ref, cohort, target
            )
            round_.result.cohort_cells += cells
            round_.result.cohort_bytes += size
            round_._check()
            # Nothing was folded there: what it holds apart is only what it now holds.
            await round_.client.hold(
                round_.replicas[target],
                round_.ref,
                replace(cohort, folded=0, mutations=0, bytes=0),
            )

    await asyncio.gather(*(one(target, records[cohort_id]) for target, cohort_id in work))
    return tuple(CohortMark(i, high) for i, high in sorted(wanted.items()))


def formed_cohort(round_: Round, states: Mapping[str, RangeState], lowest: int) -> Cohort | None:
    """The cohort the side this round works forms, once the rounds have found that side apart
    from the others long enough (None: not yet)."""
    members = tuple(sorted(states))
    if members not in round_.fold_sides:
        return None
    return Cohort(
        id=cohort_id(round_.ref.keyspace, round_.ref.range, members, lowest),
        keyspace=round_.ref.keyspace,
        range=round_.ref.range,
        members=members,
        low=lowest,
        high=lowest,
        formed_unix_ms=time.time_ns() // 1_000_000,
    )


def held_high(state: RangeState, cohort: Cohort | None) -> int:
    """How far ``state``'s replica holds ``cohort`` (0: not at all)."""
    if cohort is None:
        return 0
    return max((c.high for c in state.cohorts if c.id == cohort.id), default=0)


def _sources(
    states: Mapping[str, RangeState], wanted: Mapping[int, int]
) -> dict[int, tuple[str, Cohort]]:
    """Per cohort wanted, a member holding it as high as wanted (only members tagged its data),
    and its record there; ties by name. A cohort no such member answered for is not sent."""
    found: dict[int, tuple[str, Cohort]] = {}
    for node in sorted(states):
        for cohort in states[node].cohorts:
            high = wanted.get(cohort.id, cohort.high + 1)
            if node in cohort.members and cohort.folded >= high and cohort.id not in found:
                found[cohort.id] = (node, cohort)
    return found
