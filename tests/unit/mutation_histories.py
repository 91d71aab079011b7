"""Mutations of one partition (keyspace ``ks``, table ``t1``) and hypothesis strategies for
histories of them, shaped as ``prepare_write`` shapes mutations: shared by the tests of the
replica's data model and of its storage."""

from __future__ import annotations

from hypothesis import strategies as st

from epochal.mtrack import MutationId
from epochal.replica.model import Cell, Mutation, RowWrite
from epochal.tcm.keys import EVERYTHING, KeyBounds

CLUSTERINGS = (b"", b"\x01a", b"\x01b", b"\x01b\x00", b"\x01c")
COLUMNS = ("a", "b", "c")


def mutation(
    sequence: int,
    hlc: int,
    rows: tuple[RowWrite, ...] = (),
    *,
    node: int = 1,
    partition_deleted: bool = False,
) -> Mutation:
    return Mutation(
        id=MutationId(node=node, log=1, sequence=sequence, hlc=hlc),
        keyspace="ks",
        table_id="t1",
        token=0,
        partition_key=b"\x01p\x00",
        rows=rows,
        partition_deleted=partition_deleted,
    )


def upsert(clustering: bytes, **cells: bytes | None) -> RowWrite:
    return RowWrite(clustering, tuple(cells.items()))


def delete_row(clustering: bytes) -> RowWrite:
    return RowWrite(clustering, (), deleted=True)


def cells_of(*mutations: Mutation) -> list[Cell]:
    return [cell for m in mutations for cell in m.cells()]


HLCS = st.sampled_from([10, 20, 30, 40])  # few values: ties are broken by the writer


@st.composite
def row_writes(draw, row_deletions: bool) -> RowWrite:
    clustering = draw(st.sampled_from(CLUSTERINGS))
    if row_deletions and draw(st.integers(0, 4)) == 0:
        return delete_row(clustering)
    columns = draw(st.lists(st.sampled_from(COLUMNS), unique=True, max_size=3))
    values = st.none() | st.sampled_from([b"x", b"y", b"z"])
    return RowWrite(clustering, tuple((c, draw(values)) for c in columns))


@st.composite
def histories(draw, row_deletions: bool = True, max_size: int = 8) -> list[Mutation]:
    """Mutations with distinct ids, shaped as prepare_write shapes them (a partition deletion
    carries no rows, a row deletion no cells, a clustering key once per mutation)."""
    count = draw(st.integers(1, max_size))
    result = []
    for sequence in range(1, count + 1):
        node, hlc = draw(st.integers(1, 3)), draw(HLCS)
        if draw(st.integers(0, 7)) == 0:
            result.append(mutation(sequence, hlc, node=node, partition_deleted=True))
            continue
        rows = draw(
            st.lists(
                row_writes(row_deletions), min_size=1, max_size=3, unique_by=lambda r: r.clustering
            )
        )
        result.append(mutation(sequence, hlc, tuple(rows), node=node))
    return result


bounds_strategy = st.sampled_from(
    [
        EVERYTHING,
        KeyBounds(b"\x01b"),
        KeyBounds(b"\x01a", b"\x01b\xff"),
        KeyBounds(b"\x01b", b"\x01b\x00"),
        KeyBounds(b"", b""),
    ]
)
