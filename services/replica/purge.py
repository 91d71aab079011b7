"""Tombstone purging: a tombstone (and the cells it shadows) leaves a replica's storage only once
it is older than its table's ``gc_grace_seconds`` and — in a tracked keyspace — below the low
bound of a *full* reconciliation at its token (seed 002, "Tombstone purging").

Why the bound: below it every replica held every mutation (the reconciler found them all, then
advanced), so every replica holds the delete; above it a replica may lack it — one cut off while
the others reconciled among themselves (a cohort, which never moves the bound) — and purging it
where it is held would let that replica's older data come back when it returns. A cell's time is
its first attempt's (a write retried under a fresh id keeps it), at most a write timeout and a
clock skew before its id's, so the cutoff is the bound less twice the write timeout and the
skew: every id purged is below the bound.

Untracked keyspaces purge after the grace alone, as Cassandra does. Nothing is purged while a
topology operation is in progress (a stream could send the cells a tombstone shadowed, without
it). Each pass purges at most
``PASS_TOMBSTONES`` per table (a bounded stall of the event loop), in one transaction each.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from epochal.mtrack import make_hlc, physical_ms_of
from epochal.mtrack.marks import bounded_segments
from epochal.replica.ids import wall_ms
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.reconcile_store import MarkKind
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.follower import MetadataFollower
from epochal.tcm.schema import ReplicationType, gc_grace_seconds
from epochal.tcm.tokens import MIN_TOKEN, TokenRange

log = logging.getLogger(__name__)

PASS_TOMBSTONES = 5_000
WHOLE_RING = TokenRange(MIN_TOKEN, MIN_TOKEN)


@dataclass(eq=False, repr=False)
class Purger:
    settings: ReplicaSettings
    follower: MetadataFollower
    storage: ReplicaStorage
    metrics: ReplicaMetrics

    async def run_forever(self) -> None:
        interval_s = self.settings.purge_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.purge_once(wall_ms())
            except Exception:
                log.exception("purging tombstones failed; trying again in %.1f s", interval_s)

    def purge_once(self, now_ms: int) -> int:
        """One pass over every table: the tombstones purged."""
        purged = 0
        margin_ms = 2 * self.settings.write_timeout_ms + self.settings.max_skew_ms
        metadata = self.follower.metadata
        if metadata.sequences:
            # A stream sends a partition's cells in several messages: a tombstone purged
            # between two of them could leave the receiver the cells it shadowed.
            return 0
        for keyspace in metadata.keyspaces.values():
            bounds = self.storage.reconcile.marks(keyspace.name, MarkKind.LOW_BOUND)
            tracked = keyspace.replication_type is ReplicationType.TRACKED
            for table in keyspace.tables.values():
                try:
                    grace_ms = gc_grace_seconds(table.options) * 1000
                except ValueError as error:
                    log.warning("table %s.%s: %s; not purged", keyspace.name, table.name, error)
                    continue
                grace_cutoff = make_hlc(max(now_ms - grace_ms, 0))
                segments = [
                    (
                        left,
                        right,
                        min(grace_cutoff, _below(bound, margin_ms)) if tracked else grace_cutoff,
                    )
                    for left, right, bound in bounded_segments(WHOLE_RING, bounds)
                ]
                count, shadowed = self.storage.data.purge_tombstones(
                    table.id, segments, PASS_TOMBSTONES
                )
                if count:
                    self.metrics.tombstones_purged.inc(count)
                    log.debug(
                        "purged %d tombstones of %s.%s (and %d cells they shadowed)",
                        count,
                        keyspace.name,
                        table.name,
                        shadowed,
                    )
                purged += count
        return purged


def _below(bound: int, margin_ms: int) -> int:
    """The cell time below which a cell's id is surely below ``bound`` (0: no bound yet)."""
    if not bound:
        return 0
    return make_hlc(max(physical_ms_of(bound) - margin_ms, 0))
