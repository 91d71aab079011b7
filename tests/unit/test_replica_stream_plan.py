"""The streaming plan (which pieces a node streams, from which sources, in which order, from
where each resumes), its topology guard, and the receiver's one retry loop.

The ring: A=100, B=200, C=300, D=0 with RF 2, E joins at 50 and is at START. The movement map
gives E (300, 0] (wrapping) from A and (0, 50] from B at RF 2, and (0, 50] from A at RF 1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from epochal.errors import EpochalError, GuardClosed, StreamRefused, Unavailable
from epochal.replica.stream_plan import (
    Piece,
    ReceivePlan,
    Source,
    at_start,
    operation_key,
    plan_receive,
    reconcile_key,
    reconcile_sources,
    resume_cursor,
)
from epochal.replica.stream_receiver import first_that_serves
from epochal.replica.stream_values import (
    DONE,
    CellPosition,
    Phase,
    StreamCursor,
    StreamProgress,
)
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    CreateKeyspace,
    CreateTable,
    PrepareJoin,
    ReplicationParams,
    ReplicationType,
    Step,
)
from epochal.tcm.movements import movements
from epochal.tcm.schema import Column, ColumnType
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN

from .seed_ring import RF2, Cluster, ring


def joining_e() -> tuple[Cluster, str]:
    cluster = ring({"A": 100, "B": 200, "C": 300, "D": 0})
    cluster.apply(
        CreateKeyspace(name="tk", replication=RF2, replication_type=ReplicationType.TRACKED)
    )
    cluster.apply(CreateKeyspace(name="one", replication=ReplicationParams.simple(1)))
    for keyspace, table in (("ks", "b"), ("ks", "a"), ("tk", "t"), ("one", "o")):
        cluster.apply(
            CreateTable(
                keyspace=keyspace,
                name=table,
                columns=(Column("id", ColumnType.TEXT),),
                partition_key=("id",),
            )
        )
    e = cluster.register("E")
    cluster.apply(PrepareJoin(node_id=e, tokens=(50,)))
    cluster.apply(AdvanceSequence(node_id=e, step=Step.START))
    return cluster, e


def plan_for(cluster: Cluster, receiver: str, stored=None, *, nearest=False) -> ReceivePlan:
    sequence = next(iter(cluster.md.sequences.values()))
    moved = movements(cluster.md, sequence)
    return plan_receive(cluster.md, sequence, moved, receiver, stored or {}, nearest=nearest)


def shown(cluster: Cluster, plan: ReceivePlan) -> list[tuple]:
    """Each step as (keyspace, table name, range, tracked, source names)."""
    names = {
        table.id: table.name
        for keyspace in cluster.md.keyspaces.values()
        for table in keyspace.tables.values()
    }
    return [
        (
            step.piece.keyspace,
            names[step.piece.table_id],
            (step.piece.left, step.piece.right),
            step.piece.tracked,
            tuple(cluster.names[s.node_id] for s in step.sources),
        )
        for step in plan.steps
    ]


def table_order(cluster: Cluster, keyspace: str) -> list[str]:
    """A keyspace's table names in table-id order (ids are assigned by the metadata)."""
    tables = cluster.md.keyspaces[keyspace].tables.values()
    return [t.name for t in sorted(tables, key=lambda t: t.id)]


def test_a_join_streams_every_table_of_the_movements_params_piece_by_piece_in_order() -> None:
    cluster, e = joining_e()
    plan = plan_for(cluster, e)
    first, second = table_order(cluster, "ks")
    wrapping = [(300, MAX_TOKEN), (MIN_TOKEN, 0)]  # (300, 0] is streamed as two pieces
    assert shown(cluster, plan) == [
        # Movements in the map's order (by params, then token), then keyspace, table, piece.
        ("one", "o", (0, 50), False, ("A",)),
        *[("ks", first, piece, False, ("A",)) for piece in wrapping],
        *[("ks", second, piece, False, ("A",)) for piece in wrapping],
        *[("tk", "t", piece, True, ("A",)) for piece in wrapping],
        ("ks", first, (0, 50), False, ("B",)),
        ("ks", second, (0, 50), False, ("B",)),
        ("tk", "t", (0, 50), True, ("B",)),
    ]
    assert plan.operation == operation_key(cluster.md.sequences[e])
    assert plan.operation == f"{e}@{cluster.md.sequences[e].prepared_epoch}"
    assert plan.ranges == 3
    assert plan.pieces_done == 0 and plan.width_done == 0
    assert plan.width_total == sum(s.piece.width for s in plan.steps)


def test_nearest_sourcing_tries_the_movements_fallback_after_its_own_sources() -> None:
    cluster, e = joining_e()
    strict = {row[:3]: row[4] for row in shown(cluster, plan_for(cluster, e))}
    nearest = {row[:3]: row[4] for row in shown(cluster, plan_for(cluster, e, nearest=True))}
    assert strict[("tk", "t", (0, 50))] == ("B",)
    assert nearest[("tk", "t", (0, 50))] == ("B", "A")  # B gives (0, 50] up; A keeps it
    assert nearest[("tk", "t", (MIN_TOKEN, 0))] == ("A", "D")
    assert nearest[("one", "o", (0, 50))] == ("A",)  # RF 1: nobody else holds it


def test_only_the_movements_to_the_receiver_are_planned() -> None:
    cluster, _ = joining_e()
    a = next(n for n, name in cluster.names.items() if name == "A")
    plan = plan_for(cluster, a)
    assert plan.steps == () and plan.ranges == 0


def test_stored_progress_skips_done_pieces_resumes_the_others_and_is_counted() -> None:
    cluster, e = joining_e()
    steps = plan_for(cluster, e).steps
    done, stopped = steps[0].piece, steps[1].piece
    cursor = StreamCursor(Phase.CELLS, CellPosition(2**62, b"k", b"", "id"))
    stored = {
        done.key: StreamProgress(DONE, cells=3, mutations=0, bytes=300),
        stopped.key: StreamProgress(cursor, cells=1, mutations=2, bytes=100),
        ("another table", 0, 50): StreamProgress(DONE, cells=7, mutations=0, bytes=700),
    }
    plan = plan_for(cluster, e, stored)
    assert [step.done for step in plan.steps[:3]] == [True, False, False]
    assert plan.pieces_done == 1
    assert plan.width_done == done.width
    assert plan.stored_counts == (400, 4, 2)  # bytes, cells, mutations of this plan's pieces
    assert resume_cursor(plan.steps[1].progress, log_only=False) == cursor
    assert resume_cursor(plan.steps[2].progress, log_only=False) == StreamCursor(Phase.CELLS)


def test_a_stream_of_log_entries_only_starts_at_the_log() -> None:
    assert resume_cursor(None, log_only=True) == StreamCursor(Phase.MUTATIONS)
    assert resume_cursor(None, log_only=False) == StreamCursor(Phase.CELLS)


def test_a_node_the_directory_no_longer_names_is_no_source() -> None:
    cluster, e = joining_e()
    sequence = cluster.md.sequences[e]
    moved = tuple(
        dataclasses.replace(m, sources=("node-99", *m.sources))
        for m in movements(cluster.md, sequence)
    )
    plan = plan_receive(cluster.md, sequence, moved, e, {}, nearest=False)
    assert all("node-99" not in {s.node_id for s in step.sources} for step in plan.steps)
    assert all(step.sources for step in plan.steps)


def test_a_tracked_piece_is_reconciled_with_each_other_read_replica_once() -> None:
    cluster, e = joining_e()
    plan = plan_for(cluster, e)
    piece = next(s.piece for s in plan.steps if s.piece.tracked and s.piece.left == 0)
    b = piece.movement.sources[0]
    assert cluster.names[b] == "B"

    def named(streamed_from: str) -> list[str]:
        return [
            cluster.names[s.node_id] for s in reconcile_sources(cluster.md, piece, streamed_from)
        ]

    assert named(b) == ["A"]  # streamed from B: its other read replica
    assert named("") == ["B", "A"]  # streamed in an earlier run: every read replica
    assert reconcile_key(plan.operation, b) == f"{plan.operation}<{b}"


def test_the_guard_is_open_only_while_the_sequence_is_at_start_and_not_cancelling() -> None:
    cluster, e = joining_e()
    prepared = cluster.md.sequences[e].prepared_epoch
    assert at_start(cluster.md, e, prepared) is None
    assert "no sequence prepared at epoch" in (at_start(cluster.md, e, prepared + 1) or "")
    cluster.apply(AdvanceSequence(node_id=e, step=Step.MID))
    assert "is not at its START step" in (at_start(cluster.md, e, prepared) or "")
    cluster.apply(CancelSequence(node_id=e))  # back at START, but cancelling
    assert cluster.md.sequences[e].done is Step.START
    assert "is not at its START step" in (at_start(cluster.md, e, prepared) or "")


PURE_MODULES = ("stream_plan", "stream_values", "stream_encoding")
NOT_PURE = ("asyncio", "grpc", "sqlalchemy", "opentelemetry", "time", "random", "google")


def test_the_plan_and_the_values_it_works_on_import_no_io_clock_or_randomness() -> None:
    """However indirectly: a fresh interpreter imports them and lists what else came with them
    (``time`` is loaded at start, so each module's own imports are read too)."""
    names = [f"epochal.replica.{module}" for module in PURE_MODULES]
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"import {', '.join(names)}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(run.stdout)
    assert set(names) <= set(loaded)
    assert [m for m in loaded if m.split(".")[0] in NOT_PURE] == []
    for name in names:
        source = Path(importlib.import_module(name).__file__ or "").read_text()
        imported = re.findall(r"^(?:from|import) ([\w.]+)", source, re.MULTILINE)
        assert [m for m in imported if m.split(".")[0] in NOT_PURE] == [], name


# --------------------------------------------------------------------------- the retry loop

SOURCES = (Source("node-1", "a:1"), Source("node-2", "a:2"))
PIECE = "ks t (0, 50]"


def run(sources, outcomes: dict[str, list], *, rounds=3, failed=None):
    """Drive first_that_serves with sources that fail or serve as ``outcomes`` script."""
    tried: list[str] = []
    seen: list[str] = []

    async def stream(source: Source) -> None:
        tried.append(source.node_id)
        outcome = outcomes[source.node_id].pop(0)
        if outcome is not None:
            raise outcome

    def on_failure(source: Source, error: EpochalError) -> None:
        seen.append(source.node_id)
        if failed is not None:
            failed(source, error)

    async def main():
        return await first_that_serves(
            sources, stream, on_failure, what=PIECE, rounds=rounds, backoff_s=0
        )

    return asyncio.run(main()), tried, seen


def peer_failure() -> EpochalError:
    return Unavailable("the source went away", status="UNAVAILABLE")


def test_each_source_is_tried_in_order_until_one_serves() -> None:
    served, tried, seen = run(SOURCES, {"node-1": [peer_failure()] * 2, "node-2": [None]})
    assert served == SOURCES[1]
    assert tried == ["node-1", "node-2"] and seen == ["node-1"]


def test_rounds_go_on_until_a_source_serves_and_no_further() -> None:
    outcomes = {"node-1": [peer_failure(), peer_failure()], "node-2": [peer_failure(), None]}
    served, tried, _ = run(SOURCES, outcomes)
    assert served == SOURCES[1] and tried == ["node-1", "node-2"] * 2


def test_after_the_last_round_the_piece_is_refused_naming_the_last_failure() -> None:
    outcomes = {"node-1": [peer_failure()] * 2, "node-2": [peer_failure()] * 2}
    with pytest.raises(StreamRefused) as refused:
        run(SOURCES, outcomes, rounds=2)
    assert "from node-1, node-2 in 2 rounds" in refused.value.message
    assert "last: node-2: UNAVAILABLE the source went away" in refused.value.message
    with pytest.raises(StreamRefused, match="no source is left"):
        run((), {})


def test_an_error_raised_here_is_not_retried_and_failed_may_stop_the_loop() -> None:
    local = GuardClosed("the sequence left START")  # no status: raised by this node
    with pytest.raises(GuardClosed):
        run(SOURCES, {"node-1": [local], "node-2": [None]})

    def guard_closed(source: Source, error: EpochalError) -> None:
        raise GuardClosed("closed here too")

    with pytest.raises(GuardClosed, match="closed here too"):
        run(SOURCES, {"node-1": [peer_failure()], "node-2": [None]}, failed=guard_closed)


def test_a_piece_names_its_keyspace_table_and_range() -> None:
    cluster, e = joining_e()
    piece: Piece = plan_for(cluster, e).steps[0].piece
    assert str(piece) == f"one {piece.table_id} (0, 50]"
