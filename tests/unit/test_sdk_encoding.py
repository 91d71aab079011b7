"""The SDK's encoding (epochal.encoding): rows, deletions and reads become the wire's messages and
come back as the same Python values; a value that does not fit its column is refused before
anything is sent, naming the column; each attempt carries what the client has seen and a
write's id to reuse; a failure reply becomes the error family's member with its fields."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal import encoding
from epochal.encoding import ColumnTypes, Slice
from epochal.errors import EpochalError, InvalidRequest, Overloaded, Rejected
from epochal.mtrack import MutationId
from epochal.status import Operation
from epochal.tcm import (
    ColumnType,
)
from epochal.tcm.consistency import Consistency
from epochal.tcm.keys import partition_columns, partition_token
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.values import from_proto

from .typed_tables import METADATA, REGULAR

TABLE = METADATA.keyspaces["ks"].tables["t"]
TYPES = ColumnTypes().of(TABLE)
KEY = {"p": "ann", "q": 7}

VALUES: dict[ColumnType, st.SearchStrategy[Any]] = {
    ColumnType.TEXT: st.text(max_size=20),
    ColumnType.INT: st.integers(-(2**31), 2**31 - 1),
    ColumnType.BIGINT: st.integers(-(2**63), 2**63 - 1),
    ColumnType.BOOLEAN: st.booleans(),
    ColumnType.DOUBLE: st.floats(allow_nan=False),
    ColumnType.BLOB: st.binary(max_size=20),
    ColumnType.UUID: st.uuids(),
    ColumnType.TIMESTAMP: st.integers(-(2**63), 2**63 - 1),
}
ROWS = st.lists(
    st.fixed_dictionaries(
        {"c": VALUES[ColumnType.BIGINT], "d": VALUES[ColumnType.BLOB]},
        optional={name: st.none() | VALUES[t] for name, t in REGULAR.items()},
    ),
    min_size=1,
    max_size=4,
)


def decoded_rows(mutation: pb.Mutation) -> list[dict[str, Any]]:
    """The rows a mutation carries, as the replica reads them (a naive decoder)."""
    key = [from_proto(v) for v in mutation.partition_key]
    return [
        dict(zip(TABLE.partition_key, key, strict=True))
        | dict(zip(TABLE.clustering_key, (from_proto(v) for v in row.clustering), strict=True))
        | {cell.column: from_proto(cell.value) for cell in row.cells}
        for row in mutation.rows
    ]


def write(*rows: dict[str, Any]) -> encoding.Encoded:
    return encoding.write_rows(TABLE, TYPES, rows, Consistency.QUORUM)


# ---------------------------------------------------------------------- writes


@given(ROWS)
def test_rows_come_back_from_the_wire_as_they_were_written(rows: list[dict[str, Any]]) -> None:
    written = [KEY | row for row in rows]
    encoded = write(*written)
    assert encoded.operation is Operation.WRITE and encoded.keyspace == "ks"
    assert decoded_rows(encoded.body.mutation) == written
    assert encoded.body.mutation.table == "t"
    assert encoded.body.consistency == pb.QUORUM


def test_the_token_is_the_one_the_replica_computes_from_the_decoded_key() -> None:
    encoded = write(KEY | {"c": 1, "d": b""})
    decoded = [from_proto(v) for v in encoded.body.mutation.partition_key]
    assert encoded.token == partition_token(partition_columns(TABLE), decoded)


def test_values_the_wire_converts_are_sent_converted() -> None:
    when = datetime.datetime(2024, 5, 1, 12, 0, 0, 123_000, datetime.UTC)
    encoded = write(KEY | {"c": 1, "d": b"", "v_double": 3, "v_timestamp": when})
    (row,) = decoded_rows(encoded.body.mutation)
    assert row["v_double"] == 3.0 and isinstance(row["v_double"], float)
    assert row["v_timestamp"] == 1_714_564_800_123


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "write_rows needs at least one row"),
        ([{"q": 7, "c": 1, "d": b""}], r"the partition key needs \['p'\]"),
        ([KEY | {"d": b""}], r"the clustering key needs \['c'\]"),
        ([KEY | {"c": 1, "d": b"", "v_int": "x"}], "column 'v_int' is int; got str"),
        ([KEY | {"c": 1, "d": b"", "nope": 1}], "unknown column 'nope'"),
        ([KEY | {"c": 1, "d": b""}, {"p": "bob", "q": 7, "c": 1, "d": b""}], "same partition"),
        ([KEY | {"c": 1, "d": b"", "v_timestamp": datetime.datetime(2024, 5, 1)}], "aware"),
    ],
)
def test_a_row_that_does_not_fit_is_refused_naming_why(
    rows: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        write(*rows)


def test_the_three_deletes() -> None:
    def delete(key: dict[str, Any], columns: tuple[str, ...] = ()) -> pb.Mutation:
        encoded = encoding.delete(TABLE, TYPES, key, columns, Consistency.ONE)
        assert encoded.body.consistency == pb.ONE
        return encoded.body.mutation

    partition = delete(KEY)
    assert partition.delete_partition and not partition.rows
    row = delete(KEY | {"c": 1, "d": b"x"})
    assert [r.delete for r in row.rows] == [True] and decoded_rows(row) == [
        KEY | {"c": 1, "d": b"x"}
    ]
    cells = delete(KEY | {"c": 1, "d": b"x"}, ("v_text", "v_int"))
    assert decoded_rows(cells) == [KEY | {"c": 1, "d": b"x", "v_text": None, "v_int": None}]
    with pytest.raises(InvalidRequest, match="deleting columns needs the row's whole clustering"):
        delete(KEY, ("v_text",))


# ---------------------------------------------------------------------- reads


WHOLE = Slice()


def read(bounds: Slice = WHOLE, columns: tuple[str, ...] = ()) -> pb.ReadRequest:
    encoded = encoding.read(TABLE, TYPES, KEY, bounds, columns, Consistency.ALL)
    assert encoded.operation is Operation.READ
    return encoded.body


def test_a_read_names_its_partition_columns_and_slice() -> None:
    whole = read(columns=("v_text",))
    assert [from_proto(v) for v in whole.partition_key] == ["ann", 7]
    assert list(whole.columns) == ["v_text"] and whole.consistency == pb.ALL
    assert not whole.HasField("slice")
    sliced = read(Slice(start={"c": 5}, end={"c": 9, "d": b"z"}, end_exclusive=True)).slice
    assert [from_proto(v) for v in sliced.start] == [5] and sliced.has_start
    assert [from_proto(v) for v in sliced.end] == [9, b"z"] and sliced.has_end
    assert (sliced.start_exclusive, sliced.end_exclusive) == (False, True)
    open_start = read(Slice(end={"c": 9})).slice
    assert not open_start.has_start and open_start.has_end


def test_a_slice_bound_must_be_a_prefix_of_the_clustering_key() -> None:
    with pytest.raises(InvalidRequest, match="prefix of the clustering key"):
        read(Slice(start={"d": b"x"}))


def test_a_read_reply_becomes_rows_with_their_key_and_the_stats() -> None:
    repaired = MutationId(node=1, log=2, sequence=3, hlc=4)
    reply = pb.SessionReply(
        read=pb.ReadResponse(
            epoch=12,
            hlc=99,
            rows=[
                pb.Row(
                    clustering=[pb.Value(int=5), pb.Value(blob=b"x")],
                    cells=[pb.CellValue(column="v_uuid", value=pb.Value(uuid=bytes(16)), hlc=98)],
                )
            ],
            stats=pb.ReadStats(
                replicas=["a", "b"],
                data_replica="a",
                repaired_mutations=1,
                repaired=[pb.MutationId(node=1, log=2, sequence=3, hlc=4)],
                summary_rounds=2,
                differing=[pb.DifferingLogs(replica="b", logs=[pb.LogKey(node=1, log=2)])],
            ),
        )
    )
    result, hlc = encoding.read_result(TABLE, KEY, reply, "a")
    assert result.rows == [KEY | {"c": 5, "d": b"x", "v_uuid": uuid.UUID(int=0)}]
    assert result.written == [{"v_uuid": 98}] and hlc == 99
    assert (result.epoch, result.coordinator) == (12, "a")
    assert result.stats.repaired == (repaired,) and result.stats.data_replica == "a"
    assert result.stats.differing == {"b": ((1, 2),)} and result.stats.summary_rounds == 2


# ---------------------------------------------------------------------- attempts and replies


def test_each_attempt_carries_what_the_client_has_seen_and_a_writes_id() -> None:
    encoded = write(KEY | {"c": 1, "d": b""})
    before = encoded.body.SerializeToString()
    reused = MutationId(node=3, log=4, sequence=5, hlc=6)
    first = encoding.session_request(encoded, epoch=8, session_hlc=9)
    retry = encoding.session_request(
        encoded, epoch=10, session_hlc=11, mutation_id=reused.pack().hex()
    )
    assert (first.write.epoch, first.write.session_hlc) == (8, 9)
    assert not first.write.HasField("mutation_id")
    assert (retry.write.epoch, retry.write.session_hlc) == (10, 11)
    assert encoding.mutation_id_from_proto(retry.write.mutation_id) == reused
    assert retry.write.mutation == encoded.body.mutation
    assert encoded.body.SerializeToString() == before  # the encoded body serves every attempt
    a_read = encoding.session_request(
        encoding.read(TABLE, TYPES, KEY, Slice(), (), Consistency.ONE),
        epoch=8,
        session_hlc=9,
        mutation_id=reused.pack().hex(),
    )
    assert a_read.WhichOneof("body") == "read" and (a_read.read.epoch, a_read.read.session_hlc) == (
        8,
        9,
    )


def test_a_malformed_id_from_the_server_is_an_error_not_a_crash() -> None:
    with pytest.raises(EpochalError, match="malformed mutation id"):
        encoding.mutation_id_to_proto("zz")


def test_a_failure_reply_becomes_the_error_its_status_stands_for() -> None:
    named = MutationId(node=1, log=1, sequence=9, hlc=10)
    with pytest.raises(Overloaded) as overloaded:
        encoding.reply_or_raise(
            pb.SessionReply(
                failure=pb.SessionFailure(
                    code="RESOURCE_EXHAUSTED",
                    message="busy",
                    epoch=4,
                    mutation_id=encoding.mutation_id_to_proto(named.pack().hex()),
                )
            )
        )
    error = overloaded.value
    assert (error.message, error.epoch, error.status) == ("busy", 4, "RESOURCE_EXHAUSTED")
    assert MutationId.unpack(bytes.fromhex(error.mutation_id)) == named
    with pytest.raises(Rejected) as rejected:
        encoding.reply_or_raise(
            pb.SessionReply(
                failure=pb.SessionFailure(code="FAILED_PRECONDITION", message="no", rule="r")
            )
        )
    assert rejected.value.rule == "r"
    with pytest.raises(EpochalError) as unknown:
        encoding.reply_or_raise(pb.SessionReply(failure=pb.SessionFailure(code="NONSENSE")))
    assert unknown.value.status == grpc.StatusCode.UNKNOWN.name
    answered = pb.SessionReply(write=pb.WriteResponse(epoch=3))
    assert encoding.reply_or_raise(answered) is answered
