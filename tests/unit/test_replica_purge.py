"""Tombstone purging at a replica (epochal.replica.purge, on a real SQLite file): a tracked
table's tombstone past its gc grace stays until the low bound of a full reconciliation passes
its time by the margin (a cohort's fold does not count), then goes with the cells it shadows; an
untracked table's goes after the grace alone; a tombstone within its grace stays; a bad
gc_grace_seconds purges nothing."""

from __future__ import annotations

import asyncio

import pytest

from epochal.mtrack import MutationId, make_hlc
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.reconciliation import span_digests
from epochal.replica.codec import mutation_to_body
from epochal.replica.local_replica import LocalReplica, Outcome
from epochal.replica.model import Mutation, RowWrite
from epochal.replica.purge import Purger
from epochal.replica.reconcile_ops import AdvanceLowBound
from epochal.replica.storage import ReplicaStorage
from epochal.tcm import (
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    ReplicationParams,
    ReplicationType,
)
from epochal.tcm.keys import EVERYTHING
from epochal.tcm.schema import DEFAULT_GC_GRACE_S, gc_grace_seconds

from .local_node import RING, replica
from .seed_ring import Cluster

T0 = 1_700_000_000_000  # ms
MARGIN_MS = 2 * 2_000 + 5_000  # twice the default write timeout, and the default skew


def cluster(grace: str) -> Cluster:
    made = Cluster({})
    for name, kind in (("tr", ReplicationType.TRACKED), ("un", ReplicationType.UNTRACKED)):
        made.apply(
            CreateKeyspace(
                name=name, replication=ReplicationParams.simple(1), replication_type=kind
            ),
            CreateTable(
                keyspace=name,
                name="t",
                columns=(Column("k", ColumnType.TEXT), Column("v", ColumnType.INT)),
                partition_key=("k",),
                options=(("gc_grace_seconds", grace),),
            ),
        )
    made.join("A", 100)
    return made


def written(made: Cluster, keyspace: str, sequence: int, at_ms: int, *, delete: bool) -> Mutation:
    table = made.md.keyspaces[keyspace].tables["t"]
    row = (
        RowWrite(b"", (), deleted=True) if delete else RowWrite(b"", (("v", b"\x00\x00\x00\x01"),))
    )
    return Mutation(
        id=MutationId(node=1, log=1, sequence=sequence, hlc=make_hlc(at_ms)),
        keyspace=keyspace,
        table_id=table.id,
        token=50,
        partition_key=b"k1",
        rows=(row,),
        tracked=keyspace == "tr",
    )


def cells(store: ReplicaStorage, m: Mutation) -> list[tuple[str, bool]]:
    found = store.data.read_cells(m.table_id, m.token, m.partition_key, EVERYTHING)
    return sorted((c.column, c.tombstone) for c in found)


def purger(local: LocalReplica) -> Purger:
    return Purger(local.settings, local.follower, local.storage, local.metrics)


def test_a_tracked_tombstone_waits_for_a_full_reconciliation_past_it(storage) -> None:
    made = cluster("0")
    writes = {
        ks: [written(made, ks, 1, T0, delete=False), written(made, ks, 2, T0 + 1, delete=True)]
        for ks in ("tr", "un")
    }

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        for m in [*writes["tr"], *writes["un"]]:
            reply = await local.apply_soon(
                epoch, m, mutation_to_body(m), repair=False, prepared=True
            )
            assert reply.outcome is Outcome.OK
        tracked, untracked = writes["tr"][1], writes["un"][1]
        assert ("-", True) in cells(storage, tracked)
        now_ms = T0 + 60_000
        # grace 0 has passed, but no low bound: only the untracked tombstone goes, with its row
        assert purger(local).purge_once(now_ms) == 1
        assert cells(storage, untracked) == []
        assert ("-", True) in cells(storage, tracked) and ("v", False) in cells(storage, tracked)
        # a bound that passes the delete by less than the margin: it stays
        entries = [(m.id, m.token) for m in writes["tr"]]

        async def advance(to_ms: int, old: RangeMarks) -> None:
            t = make_hlc(to_ms)
            op = AdvanceLowBound(
                keyspace="tr",
                range=RING,
                old_bounds=old,
                new_bound=t,
                digests=span_digests(entries, old, t),
                token=1,
            )
            assert (await local.perform(epoch, op)).outcome is Outcome.OK

        await advance(T0 + MARGIN_MS, RangeMarks())
        assert purger(local).purge_once(now_ms) == 0
        await advance(T0 + MARGIN_MS + 10, RangeMarks().raised(RING, make_hlc(T0 + MARGIN_MS)))
        assert purger(local).purge_once(now_ms) == 1
        assert cells(storage, tracked) == [], "the row deletion went with the row it shadowed"
        assert local.metrics.tombstones_purged._value.get() == 2

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("grace", "after_ms", "purged"),
    [("3600", 3_599_000, 0), ("3600", 3_601_000, 1), ("soon", 10**10, 0)],
)
def test_a_tombstone_within_its_grace_or_of_a_bad_grace_stays(
    storage,
    grace: str,
    after_ms: int,
    purged: int,
) -> None:
    made = cluster(grace)
    deleted = written(made, "un", 1, T0, delete=True)

    async def scenario() -> None:
        local = replica(storage, made)
        epoch = local.follower.epoch
        reply = await local.apply_soon(
            epoch, deleted, mutation_to_body(deleted), repair=False, prepared=True
        )
        assert reply.outcome is Outcome.OK
        assert purger(local).purge_once(T0 + after_ms) == purged

    asyncio.run(scenario())


def test_gc_grace_seconds_is_a_whole_number_of_seconds() -> None:
    assert gc_grace_seconds({}) == DEFAULT_GC_GRACE_S == 864_000
    assert gc_grace_seconds({"gc_grace_seconds": "0"}) == 0
    for bad in ("-1", "1.5", "soon", str(10**12)):
        with pytest.raises(ValueError, match="gc_grace_seconds"):
            gc_grace_seconds({"gc_grace_seconds": bad})
