"""Claims of the replica's data model (epochal.replica.model).

Cells: last write wins by ``(hlc, writer, tombstone)``. Rows: a cell counts only if newer than the
partition deletion and its row's deletion; a row exists while its marker or a regular cell does.
The naive model (``naive_resolve``) reads those rules straight off the list of mutations, with no
cells and no merging; the fast code must agree with it, and replicas that applied the same
mutations in any order must resolve the same rows and digests.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from hypothesis import example, given
from hypothesis import strategies as st

from epochal.mtrack import MutationId
from epochal.replica.model import (
    PARTITION_DELETION,
    ROW_DELETION,
    ROW_MARKER,
    Cell,
    Mutation,
    ResolvedRow,
    digest,
    merge,
    resolve,
    stale_cells,
    writer_of,
)
from epochal.tcm.keys import EVERYTHING, KeyBounds

from .mutation_histories import bounds_strategy, cells_of, delete_row, histories, mutation, upsert

NO_STAMP = (-1, b"")


# --------------------------------------------------------------------------- the naive model


@dataclass
class _NaiveRow:
    deleted: tuple[int, bytes] = NO_STAMP
    markers: list[tuple[int, bytes]] = field(default_factory=list)
    writes: dict[str, list[tuple[tuple[int, bytes], bool, bytes | None]]] = field(
        default_factory=dict
    )


def naive_resolve(
    mutations: list[Mutation], bounds: KeyBounds = EVERYTHING, columns: tuple[str, ...] = ()
) -> list[ResolvedRow]:
    """The rules read literally: a row's deletion and its liveness are separate facts."""

    def stamp(m: Mutation) -> tuple[int, bytes]:
        return (m.id.hlc, writer_of(m.id))

    partition_floor = max((stamp(m) for m in mutations if m.partition_deleted), default=NO_STAMP)
    rows: dict[bytes, _NaiveRow] = {}
    for m in mutations:
        for row in m.rows:
            state = rows.setdefault(row.clustering, _NaiveRow())
            if row.deleted:
                state.deleted = max(state.deleted, stamp(m))
                continue
            state.markers.append(stamp(m))
            for column, value in row.cells:
                state.writes.setdefault(column, []).append((stamp(m), value is None, value))
    result = []
    for clustering in sorted(rows):
        if not bounds.contains(clustering):
            continue
        state = rows[clustering]
        floor = max(partition_floor, state.deleted)
        visible = {}
        for column, writes in state.writes.items():
            when, tombstone, value = max(writes, key=lambda w: (w[0], w[1]))
            if not tombstone and when > floor:
                visible[column] = (value, when[0])
        if not visible and not any(marker > floor for marker in state.markers):
            continue
        shown = tuple(
            (column, value, hlc)
            for column, (value, hlc) in sorted(visible.items())
            if not columns or column in columns
        )
        result.append(ResolvedRow(clustering, shown))
    return result


# --------------------------------------------------------------------------- strategies

projections = st.sampled_from([(), ("a",), ("b", "c"), ("missing",)])


def applied_in_order(mutations: list[Mutation]) -> dict[tuple[bytes, str], Cell]:
    """A replica applying the mutations one by one, as storage would."""
    state: dict[tuple[bytes, str], Cell] = {}
    for m in mutations:
        state = merge(state.values(), m.cells())
    return state


# --------------------------------------------------------------------------- last write wins


def test_the_highest_hlc_wins_then_the_highest_writer_then_the_tombstone():
    def cell(hlc: int, writer: bytes, tombstone: bool) -> Cell:
        return Cell(b"", "a", None if tombstone else b"v", hlc, writer, tombstone)

    older, newer = cell(1, b"\xff" * 16, False), cell(2, b"\x00" * 16, False)
    low_writer, high_writer = cell(5, b"\x01" * 16, False), cell(5, b"\x02" * 16, False)
    live, tombstone = cell(7, b"\x01" * 16, False), cell(7, b"\x01" * 16, True)
    for loser, winner in ((older, newer), (low_writer, high_writer), (live, tombstone)):
        assert merge([loser, winner]) == merge([winner], [loser]) == {(b"", "a"): winner}


def test_a_mutations_cells_are_its_deletion_markers_and_cells_stamped_with_its_id():
    mid = MutationId(node=2, log=3, sequence=4, hlc=99)
    assert writer_of(mid) == mid.pack()[:16]
    written = Mutation(
        id=mid,
        keyspace="ks",
        table_id="t1",
        token=0,
        partition_key=b"p",
        rows=(upsert(b"\x01a", a=b"x", b=None), delete_row(b"\x01b")),
    )
    w = writer_of(mid)
    assert written.cells() == [
        Cell(b"\x01a", ROW_MARKER, None, 99, w, False),
        Cell(b"\x01a", "a", b"x", 99, w, False),
        Cell(b"\x01a", "b", None, 99, w, True),
        Cell(b"\x01b", ROW_DELETION, None, 99, w, True),
    ]
    deletion = dataclasses.replace(written, rows=(), partition_deleted=True)
    assert deletion.cells() == [Cell(b"", PARTITION_DELETION, None, 99, w, True)]


# --------------------------------------------------------------------------- resolve, by rule


def test_an_upsert_without_cells_makes_the_row_exist_through_its_marker():
    assert resolve(mutation(1, 10, (upsert(b"\x01a"),)).cells()) == [ResolvedRow(b"\x01a", ())]


def test_a_newer_cell_deletion_hides_the_cell_but_the_marker_keeps_the_row():
    cells = cells_of(
        mutation(1, 10, (upsert(b"\x01a", a=b"x", b=b"y"),)),
        mutation(2, 20, (upsert(b"\x01a", a=None),)),
    )
    assert resolve(cells) == [ResolvedRow(b"\x01a", (("b", b"y", 10),))]


def test_a_row_deletion_hides_older_cells_even_when_they_arrive_after_it():
    deletion = mutation(2, 20, (delete_row(b"\x01a"),))
    late = mutation(1, 10, (upsert(b"\x01a", a=b"x"),))
    assert resolve(cells_of(deletion, late)) == []
    newer = mutation(3, 30, (upsert(b"\x01a", b=b"y"),))
    assert resolve(cells_of(deletion, newer)) == [ResolvedRow(b"\x01a", (("b", b"y", 30),))]


def test_cells_older_than_a_row_deletion_stay_hidden_after_the_row_is_written_again():
    cells = cells_of(
        mutation(1, 10, (upsert(b"\x01a", a=b"x"),)),
        mutation(2, 20, (delete_row(b"\x01a"),)),
        mutation(3, 30, (upsert(b"\x01a", b=b"y"),)),
    )
    assert resolve(cells) == [ResolvedRow(b"\x01a", (("b", b"y", 30),))]


def test_a_partition_deletion_hides_everything_older_but_not_newer_writes():
    cells = cells_of(
        mutation(1, 10, (upsert(b"\x01a", a=b"x"), upsert(b"\x01b", a=b"x"))),
        mutation(2, 20, partition_deleted=True),
        mutation(3, 30, (upsert(b"\x01b", b=b"y"),)),
    )
    assert resolve(cells) == [ResolvedRow(b"\x01b", (("b", b"y", 30),))]


def test_a_partition_deletion_applies_even_when_the_bounds_exclude_its_empty_clustering_key():
    cells = cells_of(
        mutation(1, 10, (upsert(b"\x01a", a=b"x"), upsert(b"\x01b", a=b"x"))),
        mutation(2, 20, partition_deleted=True),
    )
    assert resolve(cells, KeyBounds(b"\x01b")) == []


def test_bounds_select_rows_and_rows_come_in_clustering_order():
    rows = tuple(upsert(c, a=c) for c in (b"\x01c", b"\x01a", b"\x01b"))
    cells = mutation(1, 10, rows).cells()
    assert [r.clustering for r in resolve(cells)] == [b"\x01a", b"\x01b", b"\x01c"]
    assert [r.clustering for r in resolve(cells, KeyBounds(b"\x01b", b"\x01c"))] == [b"\x01b"]


def test_a_projection_keeps_only_its_columns_but_still_lists_every_live_row():
    cells = mutation(1, 10, (upsert(b"\x01a", a=b"x", b=b"y"), upsert(b"\x01b", b=b"y"))).cells()
    assert resolve(cells, columns=["a"]) == [
        ResolvedRow(b"\x01a", (("a", b"x", 10),)),
        ResolvedRow(b"\x01b", ()),
    ]


# --------------------------------------------------------------------------- properties


@given(histories(row_deletions=False), bounds_strategy, projections)
def test_resolve_matches_the_naive_model_without_row_deletions(history, bounds, columns):
    assert resolve(cells_of(*history), bounds, columns) == naive_resolve(history, bounds, columns)


@given(histories(), bounds_strategy, projections)
@example(
    [
        mutation(1, 10, (upsert(b"\x01a", a=b"x"),)),
        mutation(2, 20, (delete_row(b"\x01a"),)),
        mutation(3, 30, (upsert(b"\x01a", b=b"y"),)),
    ],
    EVERYTHING,
    (),
)
def test_resolve_matches_the_naive_model(history, bounds, columns):
    assert resolve(cells_of(*history), bounds, columns) == naive_resolve(history, bounds, columns)


@given(histories(), st.randoms(use_true_random=False), bounds_strategy, projections)
def test_replicas_applying_the_same_mutations_in_any_order_agree(history, rng, bounds, columns):
    shuffled = list(history)
    rng.shuffle(shuffled)
    first, second = applied_in_order(history), applied_in_order(shuffled)
    assert first == second == merge(cells_of(*history))
    assert resolve(first.values(), bounds, columns) == resolve(second.values(), bounds, columns)
    assert digest(first.values()) == digest(second.values()) == digest(cells_of(*history))


@given(histories(), st.randoms(use_true_random=False))
def test_the_digest_is_of_the_winners_only_and_ignores_order(history, rng):
    cells = cells_of(*history)
    shuffled = list(cells)
    rng.shuffle(shuffled)
    assert digest(cells) == digest(shuffled) == digest(merge(cells).values())


def test_the_digest_changes_when_any_part_of_a_winning_cell_changes():
    base = Cell(b"\x01a", "a", b"x", 10, b"\x01" * 16, False)
    variants = [
        Cell(b"\x01b", "a", b"x", 10, b"\x01" * 16, False),
        Cell(b"\x01a", "b", b"x", 10, b"\x01" * 16, False),
        Cell(b"\x01a", "a", b"y", 10, b"\x01" * 16, False),
        Cell(b"\x01a", "a", b"x", 11, b"\x01" * 16, False),
        Cell(b"\x01a", "a", b"x", 10, b"\x02" * 16, False),
        Cell(b"\x01a", "a", None, 10, b"\x01" * 16, True),
    ]
    digests = {digest([base]), *(digest([v]) for v in variants)}
    assert len(digests) == 1 + len(variants)
    assert digest([]) == digest([])  # and the empty partition has a digest too


@given(histories(), st.randoms(use_true_random=False))
def test_stale_cells_are_exactly_what_a_replica_lacks_or_holds_older(history, rng):
    # ``held`` is what a replica stores: one cell per slot (stale_cells keeps the last cell it
    # sees of a slot, so unmerged cells would only make it send more than needed).
    mine = merge(cells_of(*(m for m in history if rng.random() < 0.5)))
    held = list(mine.values())
    merged = merge(cells_of(*history))
    stale = stale_cells(merged, held)
    expected = [
        cell
        for slot, cell in sorted(merged.items())
        if slot not in mine or mine[slot].order < cell.order
    ]
    assert stale == expected
    # Sending them repairs the replica, and a repaired replica lacks nothing.
    assert merge(held, stale) == merged
    assert stale_cells(merged, merged.values()) == []


def test_replica_state_built_by_random_delivery_is_the_same_for_a_fixed_seed():
    # The same mutations delivered in 20 random orders (seed printed on failure) agree.
    seed = 20240501
    rng = random.Random(seed)
    history = [
        mutation(1, 10, (upsert(b"\x01a", a=b"x", b=b"y"),)),
        mutation(2, 10, (upsert(b"\x01a", a=b"z"),), node=2),
        mutation(3, 20, (upsert(b"\x01a", b=None),)),
        mutation(4, 5, partition_deleted=True),
        mutation(5, 30, (delete_row(b"\x01b"),)),
    ]
    expected = resolve(applied_in_order(history).values())
    assert expected == [ResolvedRow(b"\x01a", (("a", b"z", 10),))]
    for _ in range(20):
        rng.shuffle(history)
        assert resolve(applied_in_order(history).values()) == expected, f"seed {seed}"
