"""Claims of ``prepare_write`` / ``prepare_read`` (epochal.replica.mutations) against real
metadata: what a request becomes, and every way it is refused with the message the client sees."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.client import AsyncClient
from epochal.errors import InvalidRequest
from epochal.mtrack import MutationId
from epochal.replica.model import Mutation, RowWrite
from epochal.replica.mutations import (
    BadRequest,
    CellDraft,
    ReadDraft,
    SliceDraft,
    WriteDraft,
    prepare_read,
    prepare_write,
)
from epochal.tcm import ColumnType
from epochal.tcm.keys import (
    EVERYTHING,
    clustering_columns,
    encode_key,
    partition_columns,
    partition_token,
    slice_bounds,
)
from epochal.wire.values import KIND_OF_TYPE, from_proto

from .write_drafts import LIMITS, METADATA, REGULAR, SAMPLES, cell, row, write

TABLE = METADATA.keyspaces["ks"].tables["t"]
EPOCH = METADATA.epoch


def refused(draft: WriteDraft, **limits: int) -> str:
    with pytest.raises(BadRequest) as raised:
        prepare_write(METADATA, draft, **(LIMITS | limits))
    return str(raised.value)


# --------------------------------------------------------------------------- what a write becomes


def test_a_write_of_every_type_encodes_keys_finds_the_token_and_keeps_values_encoded():
    cells = tuple(cell(name, SAMPLES[t]) for name, t in REGULAR.items())
    prepared = prepare_write(METADATA, write(row(*cells), row(clustering=(6, b""))), **LIMITS)
    assert prepared.partition_key == encode_key(partition_columns(TABLE), ("k", 1))
    assert prepared.token == partition_token(partition_columns(TABLE), ("k", 1))
    assert prepared.table == TABLE and prepared.keyspace is METADATA.keyspaces["ks"]
    assert prepared.rows == (
        RowWrite(
            encode_key(clustering_columns(TABLE), (5, b"x")),
            tuple((c.column, c.encoded) for c in cells),
        ),
        RowWrite(encode_key(clustering_columns(TABLE), (6, b"")), ()),
    )
    assert not prepared.partition_deleted


def test_deletions_become_none_cells_row_deletions_and_partition_deletions():
    prepared = prepare_write(
        METADATA, write(row(cell("v_int", None)), row(clustering=(6, b""), delete=True)), **LIMITS
    )
    ckey = clustering_columns(TABLE)
    assert prepared.rows == (
        RowWrite(encode_key(ckey, (5, b"x")), (("v_int", None),)),
        RowWrite(encode_key(ckey, (6, b"")), (), deleted=True),
    )
    whole = prepare_write(METADATA, write(delete_partition=True), **LIMITS)
    assert whole.partition_deleted and whole.rows == ()


@pytest.mark.parametrize(("keyspace", "tracked"), [("ks", False), ("tracked", True)])
def test_with_id_makes_the_mutation_replicas_store_tracked_as_its_keyspace(keyspace, tracked):
    prepared = prepare_write(METADATA, write(row(cell("v_text", "x")), keyspace=keyspace), **LIMITS)
    mid = MutationId(node=1, log=1, sequence=5, hlc=123)
    assert prepared.with_id(mid) == Mutation(
        id=mid,
        keyspace=keyspace,
        table_id=METADATA.keyspaces[keyspace].tables["t"].id,
        token=prepared.token,
        partition_key=prepared.partition_key,
        rows=prepared.rows,
        partition_deleted=False,
        tracked=tracked,
    )


@given(
    st.text(max_size=20),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(st.sampled_from(sorted(REGULAR)), st.binary(max_size=30), max_size=8),
)
def test_the_size_is_the_keys_plus_column_names_plus_encoded_values(p, q, encoded_values):
    # Arbitrary bytes stand in for encoded values: the size check only counts them.
    cells = {
        name: CellDraft(name, KIND_OF_TYPE[REGULAR[name]], data, 0)
        for name, data in encoded_values.items()
    }
    draft = write(row(*cells.values()), partition_key=(p, q))
    key = encode_key(partition_columns(TABLE), (p, q))
    ckey = encode_key(clustering_columns(TABLE), (5, b"x"))
    naive = len(key) + len(ckey) + sum(len(c.column) + len(c.encoded) for c in cells.values())
    assert prepare_write(METADATA, draft, **LIMITS).size_bytes == naive
    assert prepare_write(METADATA, draft, max_value_bytes=100, max_mutation_bytes=naive)
    if naive > 0:
        message = refused(draft, max_mutation_bytes=naive - 1)
        assert message == f"the write is {naive} bytes; the limit is {naive - 1}"


# --------------------------------------------------------------------------- refusals


def test_an_unknown_keyspace_or_table_is_refused_naming_the_epoch():
    assert refused(write(row(), keyspace="nope")) == (
        f"keyspace 'nope' does not exist (at epoch {EPOCH})"
    )
    assert refused(write(row(), table="nope")) == f"table ks.nope does not exist (at epoch {EPOCH})"


@pytest.mark.parametrize(
    ("partition_key", "problem"),
    [
        ((1, 1), "column 'p' is text; int 1 does not fit"),
        (("k", 2**31), f"column 'q' is int; int {2**31} does not fit"),
        (("k",), r"the key needs 2 value(s) ['p', 'q'], got 1"),
    ],
)
def test_a_bad_partition_key_is_refused_naming_the_column(partition_key, problem):
    message = refused(write(row(), partition_key=partition_key))
    assert message == f"partition key of ks.t: {problem}"


def test_an_empty_key_of_one_column_is_refused_but_an_empty_component_of_two_is_not():
    # Cassandra refuses the first ("Key may not be empty") and accepts the second; the
    # coordinator turns BadRequest into InvalidRequest, which the servicer sends as
    # INVALID_ARGUMENT.
    message = refused(write(table="by_name", partition_key=("",), delete_partition=True))
    assert message == (
        "partition key of ks.by_name: column 'name' may not be empty: it is the only "
        "partition-key column, and Cassandra refuses an empty partition key (text)"
    )
    with pytest.raises(BadRequest, match="column 'name' may not be empty"):
        prepare_read(METADATA, read(table="by_name", partition_key=("",)))
    with pytest.raises(InvalidRequest, match="column 'name' may not be empty"):  # the SDK's
        AsyncClient(["127.0.0.1:1"])._partition(
            METADATA.keyspaces["ks"].tables["by_name"], {"name": ""}
        )
    prepared = prepare_write(METADATA, write(row(), partition_key=("", 0)), **LIMITS)
    assert prepared.token == partition_token(partition_columns(TABLE), ("", 0))


def test_the_sdk_routes_by_the_token_the_replica_computes():
    # The SDK accepts values the wire converts (an int for a double, a datetime for a
    # timestamp); the replica computes the token from the values it decodes, and the SDK must
    # route by that same token.
    table = METADATA.keyspaces["ks"].tables["typed"]
    given = SAMPLES | {
        ColumnType.DOUBLE: 3,
        ColumnType.TIMESTAMP: datetime.datetime(2024, 5, 1, 12, 0, 0, 123_000, datetime.UTC),
    }
    values = {f"k_{t.value}": given[t] for t in ColumnType}
    protos, token = AsyncClient(["127.0.0.1:1"])._partition(table, values)
    decoded = tuple(from_proto(proto) for proto in protos)  # as the replica's codec does
    draft = write(table="typed", partition_key=decoded, delete_partition=True)
    assert prepare_write(METADATA, draft, **LIMITS).token == token
    assert decoded[list(ColumnType).index(ColumnType.TIMESTAMP)] == 1_714_564_800_123


def test_a_bad_clustering_key_is_refused_naming_the_column():
    assert refused(write(row(clustering=(5, "x")))) == (
        "clustering key of ks.t: column 'd' is blob; str 'x' does not fit"
    )
    assert refused(write(row(clustering=(5,)))) == (
        "clustering key of ks.t: the key needs 2 value(s) ['c', 'd'], got 1"
    )


def test_an_unknown_column_is_refused_whether_written_or_deleted():
    expected = "table ks.t has no column 'nope'"
    assert refused(write(row(cell("nope", "x", ColumnType.TEXT)))) == expected
    assert refused(write(row(cell("nope", None)))) == expected


@pytest.mark.parametrize("column", ["p", "q", "c", "d"])
def test_a_key_column_written_or_deleted_as_a_cell_is_refused(column):
    column_type = TABLE.column(column).type
    expected = f"{column!r} is a key column of ks.t: set it in the key"
    assert refused(write(row(cell(column, SAMPLES[column_type], column_type)))) == expected
    assert refused(write(row(cell(column, None)))) == expected


@pytest.mark.parametrize(
    ("column", "value", "value_type", "kind"),
    [
        ("v_text", 1, ColumnType.INT, "int"),
        ("v_int", "1", ColumnType.TEXT, "text"),
        ("v_bigint", 1_700_000_000_000, ColumnType.TIMESTAMP, "timestamp"),
        ("v_timestamp", 1, ColumnType.BIGINT, "int"),
        ("v_double", 1, ColumnType.INT, "int"),
        ("v_blob", "x", ColumnType.TEXT, "text"),
        ("v_uuid", b"\x00" * 16, ColumnType.BLOB, "blob"),
        ("v_boolean", 1, ColumnType.INT, "int"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused(column, value, value_type, kind):
    message = refused(write(row(cell(column, value, value_type))))
    assert message == f"column {column!r} of ks.t is {REGULAR[column].value}; got a {kind} value"


@pytest.mark.parametrize("number", [2**31, -(2**31) - 1, 2**63 - 1])
def test_an_int_outside_32_bits_is_refused_but_fits_a_bigint(number):
    assert refused(write(row(cell("v_int", number)))) == (
        f"column 'v_int' is int (32-bit); {number} is out of range"
    )
    assert prepare_write(METADATA, write(row(cell("v_bigint", number))), **LIMITS)


def test_a_value_over_max_value_bytes_is_refused_and_one_at_the_limit_is_not():
    at_limit = cell("v_blob", b"x" * 10)
    size = len(at_limit.encoded)
    assert prepare_write(
        METADATA, write(row(at_limit)), max_value_bytes=size, max_mutation_bytes=10**6
    )
    message = refused(write(row(at_limit)), max_value_bytes=size - 1)
    assert message == (
        f"the value of column 'v_blob' is {size} bytes; the limit is {size - 1} (--max-value-bytes)"
    )


def test_a_row_deletion_with_cells_is_refused():
    assert (
        refused(write(row(cell("v_text", "x"), delete=True))) == "a row deletion carries no cells"
    )


def test_a_partition_deletion_with_rows_is_refused():
    assert refused(write(row(), delete_partition=True)) == (
        "a partition deletion carries no rows; send the rows in another write"
    )


def test_a_write_with_nothing_in_it_is_refused():
    assert refused(write()) == "a write needs at least one row (or delete_partition)"


def test_a_column_written_twice_in_one_row_is_refused_even_as_write_and_delete():
    twice = "column 'v_text' is written twice in one row"
    assert refused(write(row(cell("v_text", "a"), cell("v_text", "b")))) == twice
    assert refused(write(row(cell("v_text", "a"), cell("v_text", None)))) == twice


# --------------------------------------------------------------------------- reads


def read(**changes) -> ReadDraft:
    return ReadDraft(**({"keyspace": "ks", "table": "t", "partition_key": ("k", 1)} | changes))


def test_a_read_finds_the_partition_and_reads_everything_without_a_slice():
    prepared = prepare_read(METADATA, read(columns=("v_text", "v_int")))
    columns = partition_columns(TABLE)
    assert (prepared.partition_key, prepared.token) == (
        encode_key(columns, ("k", 1)),
        partition_token(columns, ("k", 1)),
    )
    assert prepared.bounds == EVERYTHING
    assert prepared.columns == ("v_text", "v_int")
    assert not prepared.tracked
    assert prepare_read(METADATA, read(keyspace="tracked")).tracked


@pytest.mark.parametrize(
    "slice_draft",
    [
        SliceDraft((5,), False, (5, b"x"), True),
        SliceDraft((), True, None, False),
        SliceDraft(None, False, (7,), False),
        SliceDraft((5, b""), True, (), False),
    ],
)
def test_a_slice_becomes_the_byte_bounds_of_its_encoded_prefixes(slice_draft):
    columns = clustering_columns(TABLE)

    def encoded(prefix):
        return None if prefix is None else encode_key(columns, prefix, prefix=True)

    expected = slice_bounds(
        encoded(slice_draft.start),
        slice_draft.start_exclusive,
        encoded(slice_draft.end),
        slice_draft.end_exclusive,
    )
    assert prepare_read(METADATA, read(slice=slice_draft)).bounds == expected


def test_a_read_is_refused_for_unknown_places_columns_and_bad_slices():
    def refused_read(draft: ReadDraft) -> str:
        with pytest.raises(BadRequest) as raised:
            prepare_read(METADATA, draft)
        return str(raised.value)

    assert (
        refused_read(read(keyspace="nope")) == f"keyspace 'nope' does not exist (at epoch {EPOCH})"
    )
    assert refused_read(read(table="nope")) == f"table ks.nope does not exist (at epoch {EPOCH})"
    assert refused_read(read(partition_key=("k", "1"))) == (
        "partition key of ks.t: column 'q' is int; str '1' does not fit"
    )
    assert refused_read(read(columns=("v_text", "nope"))) == "table ks.t has no column 'nope'"
    too_long = SliceDraft((5, b"x", 1), False, None, False)
    assert refused_read(read(slice=too_long)) == (
        "clustering slice of ks.t: the key needs at most 2 value(s) ['c', 'd'], got 3"
    )
    wrong_type = SliceDraft(None, False, ("5",), False)
    assert refused_read(read(slice=wrong_type)) == (
        "clustering slice of ks.t: column 'c' is bigint; str '5' does not fit"
    )
