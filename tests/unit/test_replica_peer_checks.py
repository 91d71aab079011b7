"""What a replica accepts from another node (``check_stored``, ``check_repaired_cells``): exactly
what a coordinator could have made. Every write ``prepare_write`` makes passes; a mutation whose
bytes were changed so that they no longer decode to what a coordinator makes is refused.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.mtrack import MutationId
from epochal.replica.model import PARTITION_DELETION, ROW_DELETION, ROW_MARKER, Mutation, RowWrite
from epochal.replica.mutations import (
    BadRequest,
    check_repaired_cells,
    check_stored,
    prepare_write,
)
from epochal.tcm.keys import decode_canonical

from .write_drafts import LIMITS, METADATA, REGULAR, SAMPLES, cell, row, write

ISSUED = METADATA.next_node_number + 5  # node numbers below this were issued
KEYSPACE = METADATA.keyspaces["ks"]
TABLE = KEYSPACE.tables["t"]


def prepared(*rows, **changes) -> Mutation:  # type: ignore[no-untyped-def]
    draft = write(*rows, **changes)
    identity = MutationId(node=1, log=1, sequence=1, hlc=10)
    return prepare_write(METADATA, draft, **LIMITS).with_id(identity)


def check(mutation: Mutation) -> None:
    check_stored(KEYSPACE, TABLE, mutation, issued_nodes=ISSUED, **LIMITS)


def refusal(mutation: Mutation) -> str:
    with pytest.raises(BadRequest) as raised:
        check(mutation)
    return str(raised.value)


def test_what_a_coordinator_prepares_passes() -> None:
    check(prepared(row(*(cell(name, SAMPLES[t]) for name, t in REGULAR.items()))))
    check(prepared(row(cell("v_text", None))))  # a cell deletion
    check(prepared(row(delete=True)))
    check(prepared(delete_partition=True, rows=()))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"id": MutationId(node=ISSUED, log=1, sequence=1, hlc=10)}, "never issued"),
        ({"tracked": True}, "tracked"),
        ({"token": 12345}, "not its key's"),
        ({"partition_key": b"\x01k"}, "partition key"),
        ({"partition_key": b""}, "partition key"),
        ({"rows": ()}, "rows or deletes"),
        ({"partition_deleted": True}, "rows or deletes"),
        ({"rows": (RowWrite(b"\x01", (("v_text", None),)),)}, "clustering key"),
        ({"rows": (RowWrite(b"\x01" * 40, (("v_text", None),)),)}, "clustering key"),
    ],
)
def test_a_mutation_no_coordinator_made_is_refused(change: dict, words: str) -> None:
    mutation = dataclasses.replace(prepared(row(cell("v_text", "x"))), **change)
    assert words in refusal(mutation)


def test_cells_must_be_values_of_their_columns() -> None:
    good = prepared(row(cell("v_int", 5)))
    clustering = good.rows[0].clustering

    def with_cells(*cells: tuple[str, bytes | None]) -> Mutation:
        return dataclasses.replace(good, rows=(RowWrite(clustering, cells),))

    assert "not an encoded value" in refusal(with_cells(("v_int", b"\xff\xff")))
    assert "canonical" in refusal(with_cells(("v_int", cell("v_int", 5).encoded + b"\x50\x01")))
    assert "key column" in refusal(with_cells(("p", cell("v_text", "x").encoded)))
    assert "not a column name" in refusal(with_cells(("v int\n", None)))
    assert "twice" in refusal(with_cells(("v_int", None), ("v_int", None)))
    assert "bytes" in refusal(with_cells(("v_blob", cell("v_blob", b"x" * 2000).encoded)))
    check(with_cells(("dropped_since", cell("v_text", "x").encoded)))  # a dropped column
    # A value of another type: the column may have been dropped and added again since.
    check(with_cells(("v_int", cell("v_text", "x").encoded)))


def test_a_row_written_twice_is_refused() -> None:
    good = prepared(row(cell("v_int", 5)))
    assert "twice" in refusal(dataclasses.replace(good, rows=good.rows * 2))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_changed_byte_in_a_key_is_refused_unless_it_is_still_canonical(data) -> None:  # type: ignore[no-untyped-def]
    mutation = prepared(row(cell("v_text", "x"), clustering=(-7, b"a\x00b")))
    which = data.draw(st.sampled_from(["partition_key", "clustering"]))
    original = mutation.partition_key if which == "partition_key" else mutation.rows[0].clustering
    index = data.draw(st.integers(0, len(original) - 1))
    changed = bytearray(original)
    changed[index] = data.draw(st.integers(0, 255).filter(lambda b: b != original[index]))
    if which == "partition_key":
        mutation = dataclasses.replace(mutation, partition_key=bytes(changed))
    else:
        mutation = dataclasses.replace(
            mutation, rows=(dataclasses.replace(mutation.rows[0], clustering=bytes(changed)),)
        )
    try:
        check(mutation)
    except BadRequest:
        return
    # Accepted: then the bytes are the canonical key of other values, with their own token.
    assert which == "clustering"
    decode_canonical((("c", TABLE.column("c").type), ("d", TABLE.column("d").type)), bytes(changed))


def test_repaired_cells_are_cells_a_mutation_made() -> None:
    mutation = prepared(row(cell("v_text", "x")), row(delete=True, clustering=(6, b"y")))
    cells = mutation.cells()

    def ok(*cells_) -> None:  # type: ignore[no-untyped-def]
        check_repaired_cells(
            TABLE,
            mutation.token,
            mutation.partition_key,
            cells_,
            issued_nodes=ISSUED,
            max_value_bytes=1000,
        )

    def refused(*cells_) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(BadRequest) as raised:
            ok(*cells_)
        return str(raised.value)

    ok(*cells)
    ok(*prepared(delete_partition=True, rows=()).cells())
    marker = next(c for c in cells if c.column == ROW_MARKER)
    deletion = next(c for c in cells if c.column == ROW_DELETION)
    value = next(c for c in cells if c.column == "v_text")
    assert "writer" in refused(dataclasses.replace(value, writer=b"\x00" * 3))
    assert "never issued" in refused(dataclasses.replace(value, writer=b"\xff" * 16))
    assert "out of range" in refused(dataclasses.replace(value, hlc=2**63))
    assert "malformed" in refused(dataclasses.replace(marker, tombstone=True))
    assert "malformed" in refused(dataclasses.replace(deletion, value=b"x"))
    assert "tombstone" in refused(dataclasses.replace(value, tombstone=True))
    assert "no clustering" in refused(
        dataclasses.replace(value, column=PARTITION_DELETION, value=None, tombstone=True)
    )
    assert "clustering key" in refused(dataclasses.replace(value, clustering=b"\x02"))
    with pytest.raises(BadRequest, match="token"):
        check_repaired_cells(
            TABLE,
            mutation.token + 1,
            mutation.partition_key,
            cells,
            issued_nodes=ISSUED,
            max_value_bytes=1000,
        )
