"""Claims of the replica's codec (epochal.replica.codec): stored mutations survive the wire
unchanged, client requests become drafts field by field, malformed messages name the field."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.mtrack import MutationId
from epochal.replica.codec import (
    consistency_from_proto,
    id_from_proto,
    mutation_from_body,
    mutation_from_proto,
    mutation_to_proto,
    read_draft,
    write_draft,
)
from epochal.replica.model import Mutation, RowWrite
from epochal.replica.mutations import CellDraft, ReadDraft, RowDraft, SliceDraft, WriteDraft
from epochal.tcm.consistency import Consistency
from epochal.wire.fields import MalformedInput
from epochal.wire.v1 import replica_pb2 as pb

mutation_ids = st.builds(
    MutationId,
    node=st.integers(1, 2**32 - 1),
    log=st.integers(1, 2**32 - 1),
    sequence=st.integers(1, 2**63 - 1),  # stored as signed 64-bit integers
    hlc=st.integers(0, 2**63 - 1),
)
row_writes = st.builds(
    RowWrite,
    st.binary(max_size=8),
    st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=4).map(
        tuple
    ),
    st.booleans(),
)
mutations = st.builds(
    Mutation,
    id=mutation_ids,
    keyspace=st.text(min_size=1, max_size=8),
    table_id=st.text(min_size=1, max_size=8),
    token=st.integers(-(2**63), 2**63 - 1),
    partition_key=st.binary(max_size=12),
    rows=st.lists(row_writes, max_size=4).map(tuple),
    partition_deleted=st.booleans(),
    tracked=st.booleans(),
)


@given(mutations)
def test_a_stored_mutation_round_trips_through_protobuf_and_its_bytes(mutation):
    message = mutation_to_proto(mutation)
    assert mutation_from_proto(message) == mutation
    assert mutation_from_body(message.SerializeToString()) == mutation


def test_an_empty_live_value_stays_live_and_a_deleted_cell_stays_deleted():
    mutation = Mutation(
        id=MutationId(node=1, log=1, sequence=5, hlc=9),
        keyspace="ks",
        table_id="t1",
        token=-1,
        partition_key=b"p",
        rows=(RowWrite(b"c", (("empty", b""), ("gone", None))),),
    )
    (stored_row,) = mutation_to_proto(mutation).rows
    assert [(c.column, c.value, c.tombstone) for c in stored_row.cells] == [
        ("empty", b"", False),
        ("gone", b"", True),
    ]
    assert mutation_from_proto(mutation_to_proto(mutation)) == mutation


def _stored(**changes) -> pb.StoredMutation:
    message = pb.StoredMutation(
        id=pb.MutationId(node=1, log=1, sequence=1, hlc=1), keyspace="ks", table_id="t1"
    )
    for name, value in changes.items():
        if value is None:
            message.ClearField(name)
        else:
            setattr(message, name, value)
    return message


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (_stored(id=None), "mutation.id is required"),
        (_stored(keyspace=""), "mutation.keyspace and mutation.table_id are required"),
        (_stored(table_id=""), "mutation.keyspace and mutation.table_id are required"),
    ],
)
def test_a_stored_mutation_without_id_keyspace_or_table_is_malformed(message, error):
    with pytest.raises(MalformedInput, match=error):
        mutation_from_proto(message)


@pytest.mark.parametrize("field", ["node", "log", "sequence"])
def test_a_mutation_id_with_a_zero_field_is_malformed_naming_it(field):
    message = pb.MutationId(node=1, log=1, sequence=1, hlc=1)
    setattr(message, field, 0)
    with pytest.raises(MalformedInput, match=f"^mutation.id: mutation id {field} must be in"):
        id_from_proto(message, "mutation.id")


def test_consistency_levels_from_the_wire_default_to_quorum():
    assert consistency_from_proto(pb.CONSISTENCY_LEVEL_UNSPECIFIED) is Consistency.QUORUM
    assert consistency_from_proto(pb.LOCAL_QUORUM) is Consistency.LOCAL_QUORUM
    with pytest.raises(MalformedInput, match="consistency: unknown level 99"):
        consistency_from_proto(99)


# --------------------------------------------------------------------------- client requests


def test_a_write_becomes_a_draft_with_key_values_decoded_and_cell_values_encoded():
    some_uuid = uuid.UUID(int=42)
    text, big = pb.Value(text="hi"), pb.Value(int=2**40)
    message = pb.Mutation(
        keyspace="ks",
        table="t",
        partition_key=[pb.Value(text="k"), pb.Value(uuid=some_uuid.bytes)],
        rows=[
            pb.RowWrite(
                clustering=[pb.Value(int=-3), pb.Value(blob=b"\x00")],
                cells=[
                    pb.CellWrite(column="a", value=text),
                    pb.CellWrite(column="b", value=big),
                    pb.CellWrite(column="c"),
                ],
            ),
            pb.RowWrite(clustering=[pb.Value(boolean=False)], delete=True),
        ],
    )
    assert write_draft(message) == WriteDraft(
        keyspace="ks",
        table="t",
        partition_key=("k", some_uuid),
        rows=(
            RowDraft(
                (-3, b"\x00"),
                (
                    CellDraft("a", "text", text.SerializeToString(), None),
                    CellDraft("b", "int", big.SerializeToString(), 2**40),
                    CellDraft("c", None, None, None),
                ),
            ),
            RowDraft((False,), (), delete=True),
        ),
    )
    deletion = pb.Mutation(keyspace="ks", table="t", delete_partition=True)
    assert write_draft(deletion).delete_partition


def test_a_read_becomes_a_draft_and_a_slice_bound_is_present_only_when_flagged():
    message = pb.ReadRequest(
        keyspace="ks",
        table="t",
        partition_key=[pb.Value(double=-0.0)],
        slice=pb.ClusteringSlice(
            start=[pb.Value(int=1)],
            start_exclusive=True,
            has_start=True,
            end=[pb.Value(int=9)],  # ignored: has_end is false
            has_end=False,
        ),
        columns=["a", "b"],
    )
    assert read_draft(message) == ReadDraft(
        keyspace="ks",
        table="t",
        partition_key=(-0.0,),
        slice=SliceDraft((1,), True, None, False),
        columns=("a", "b"),
    )
    empty_prefix = pb.ClusteringSlice(has_start=True, has_end=True, end_exclusive=True)
    assert read_draft(pb.ReadRequest(slice=empty_prefix)).slice == SliceDraft((), False, (), True)
    assert read_draft(pb.ReadRequest(keyspace="ks")).slice is None


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            pb.Mutation(partition_key=[pb.Value(text="k"), pb.Value()]),
            r"mutation.partition_key\[1\]",
        ),
        (
            pb.Mutation(rows=[pb.RowWrite(), pb.RowWrite(clustering=[pb.Value()])]),
            r"mutation.rows\[1\].clustering\[0\]",
        ),
    ],
)
def test_a_null_key_value_in_a_write_is_malformed_naming_the_field(message, field):
    with pytest.raises(MalformedInput, match=f"^{field} is null; key values cannot be null"):
        write_draft(message)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (pb.ReadRequest(partition_key=[pb.Value()]), r"partition_key\[0\]"),
        (
            pb.ReadRequest(slice=pb.ClusteringSlice(start=[pb.Value()], has_start=True)),
            r"slice.start\[0\]",
        ),
        (
            pb.ReadRequest(
                slice=pb.ClusteringSlice(end=[pb.Value(int=1), pb.Value()], has_end=True)
            ),
            r"slice.end\[1\]",
        ),
    ],
)
def test_a_null_key_value_in_a_read_is_malformed_naming_the_field(message, field):
    with pytest.raises(MalformedInput, match=f"^{field} is null; key values cannot be null"):
        read_draft(message)


def test_a_uuid_key_value_of_the_wrong_length_is_malformed_naming_the_field():
    with pytest.raises(MalformedInput, match=r"mutation.partition_key\[0\]"):
        write_draft(pb.Mutation(partition_key=[pb.Value(uuid=b"abc")]))


def test_a_uuid_cell_value_of_the_wrong_length_is_malformed_naming_the_cell():
    mutation = pb.Mutation(
        partition_key=[pb.Value(text="k")],
        rows=[pb.RowWrite(cells=[pb.CellWrite(column="u", value=pb.Value(uuid=b"abc"))])],
    )
    with pytest.raises(MalformedInput, match=r"mutation.rows\[0\].cells\[u\]: a uuid is 16"):
        write_draft(mutation)
