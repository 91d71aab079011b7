"""The stream cursor: a domain value that fits its phase, its own encoding on disk (and the
protobuf one replicas stored before it, still read), and its conversion at the wire's edge."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.admin import OperationStatus
from epochal.mtrack import MutationId
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.ids import MAX_SEQUENCE, MAX_U32
from epochal.replica.codec import (
    chunk_from_proto,
    chunk_to_proto,
    cursor_from_proto,
    cursor_to_proto,
    operation_status_to_proto,
    pull_report_from_proto,
    pull_report_to_proto,
    pull_request_from_proto,
    pull_request_to_proto,
    range_request_from_proto,
    range_request_to_proto,
)
from epochal.replica.model import Cell
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_encoding import decode_cursor, encode_cursor
from epochal.replica.stream_values import (
    DONE,
    CellPosition,
    LogPosition,
    Phase,
    PullReport,
    PullRequest,
    RangeChunk,
    RangeRequest,
    StreamCursor,
    StreamedCell,
    StreamProgress,
)
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN
from epochal.wire.fields import MalformedInput
from epochal.wire.v1 import replica_pb2 as pb

tokens = st.integers(MIN_TOKEN, MAX_TOKEN)
mutation_ids = st.builds(
    MutationId,
    node=st.integers(1, MAX_U32),
    log=st.integers(1, MAX_U32),
    sequence=st.integers(1, MAX_SEQUENCE),
    hlc=st.integers(0, MAX_HLC),
)
cell_positions = st.builds(CellPosition, tokens, st.binary(), st.binary(), st.text())
log_positions = st.builds(LogPosition, tokens, st.binary(), mutation_ids)
cursors = st.one_of(
    st.builds(StreamCursor, st.just(Phase.CELLS), st.none() | cell_positions),
    st.builds(StreamCursor, st.just(Phase.MUTATIONS), st.none() | log_positions),
    st.just(DONE),
)


# --------------------------------------------------------------------------- the value


def test_a_cursor_refuses_a_position_of_another_phase() -> None:
    cell = CellPosition(1, b"k", b"", "c")
    entry = LogPosition(1, b"k", MutationId(node=1, log=1, sequence=1, hlc=5))
    with pytest.raises(ValueError, match="mutations cursor"):
        StreamCursor(Phase.MUTATIONS, cell)
    with pytest.raises(ValueError, match="cells cursor"):
        StreamCursor(Phase.CELLS, entry)
    with pytest.raises(ValueError, match="done cursor"):
        StreamCursor(Phase.DONE, entry)


def test_progress_adds_each_message_and_is_done_at_the_done_cursor() -> None:
    start = StreamProgress(StreamCursor())
    cursor = StreamCursor(Phase.CELLS, CellPosition(1, b"k", b"", "c"))
    midway = start.advanced(cursor, cells=3, mutations=0, size_bytes=120)
    assert midway == StreamProgress(cursor, cells=3, mutations=0, bytes=120) and not midway.done
    end = midway.advanced(DONE, cells=0, mutations=2, size_bytes=80)
    assert end == StreamProgress(DONE, cells=3, mutations=2, bytes=200) and end.done


# --------------------------------------------------------------------------- on disk


@given(cursors)
def test_a_stored_cursor_reads_back_as_it_was(cursor: StreamCursor) -> None:
    raw = encode_cursor(cursor)
    assert raw.startswith(b"{")  # what tells it from the protobuf stored before
    assert decode_cursor(raw) == cursor


def test_the_stored_encoding_is_this_modules_own_json() -> None:
    mid = MutationId(node=2, log=1, sequence=17, hlc=123)
    cursor = StreamCursor(Phase.MUTATIONS, LogPosition(-9, b"\x0aa", mid))
    assert encode_cursor(cursor) == (
        b'{"after":{"hlc":123,"log":1,"node":2,"partition_key":"0a61","sequence":17,'
        b'"token":-9},"phase":"mutations","v":1}'
    )
    assert encode_cursor(DONE) == b'{"phase":"done","v":1}'
    with pytest.raises(ValueError, match="format 2"):
        decode_cursor(b'{"phase":"done","v":2}')


# The bytes replicas wrote before this encoding: protobuf epochal.v1.StreamCursor, as the source
# built it (phase, started, and the last cell's or log entry's key).
OLD_CELL = pb.StreamCursor(started=True, token=-7, partition_key=b"\x0aa", column="v")
OLD_ENTRY = pb.StreamCursor(
    phase=pb.StreamCursor.MUTATIONS,
    started=True,
    token=2**62,
    partition_key=b"p",
    hlc=99,
    mutation_id=pb.MutationId(node=3, log=4, sequence=5, hlc=99),
)


def test_a_cursor_stored_as_protobuf_by_an_older_replica_is_still_read() -> None:
    assert OLD_CELL.SerializeToString() == b"\x10\x01\x18\x0d\x22\x02\x0aa\x32\x01v"
    assert decode_cursor(OLD_CELL.SerializeToString()) == StreamCursor(
        Phase.CELLS, CellPosition(-7, b"\x0aa", b"", "v")
    )
    assert decode_cursor(OLD_ENTRY.SerializeToString()) == StreamCursor(
        Phase.MUTATIONS,
        LogPosition(2**62, b"p", MutationId(node=3, log=4, sequence=5, hlc=99)),
    )
    assert decode_cursor(b"") == StreamCursor()  # nothing set: the cells, from the start
    done = pb.StreamCursor(phase=pb.StreamCursor.DONE)
    assert decode_cursor(done.SerializeToString()) == DONE
    with pytest.raises(ValueError, match="runs past the end"):
        decode_cursor(OLD_CELL.SerializeToString()[:-1])


@given(cursors)
def test_every_cursor_an_older_replica_stored_reads_as_the_same_cursor(
    cursor: StreamCursor,
) -> None:
    assert decode_cursor(cursor_to_proto(cursor).SerializeToString()) == cursor


def test_a_stream_progress_row_an_older_replica_wrote_resumes_after_its_cursor(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/replica.db"
    ReplicaStorage(url).close()
    with sqlite3.connect(tmp_path / "replica.db") as db:
        db.execute(
            "INSERT INTO stream_progress (operation, table_id, range_left, range_right, cursor, "
            "done, cells, mutations, bytes) VALUES ('node-5@7', 't1', -1, 1, ?, 0, 4, 0, 400)",
            (OLD_CELL.SerializeToString(),),
        )
    storage = ReplicaStorage(url)
    try:
        progress = storage.streams.stream_progress("node-5@7")
        expected = StreamCursor(Phase.CELLS, CellPosition(-7, b"\x0aa", b"", "v"))
        assert progress == {("t1", -1, 1): StreamProgress(expected, cells=4, bytes=400)}
        # The next message stored rewrites the row in the current encoding.
        storage.streams.ingest([], [], "node-5@7", ("t1", -1, 1), StreamProgress(DONE, 4, 0, 450))
        assert storage.streams.stream_progress("node-5@7")[("t1", -1, 1)].done
    finally:
        storage.close()
    with sqlite3.connect(tmp_path / "replica.db") as db:
        (raw,) = db.execute("SELECT cursor FROM stream_progress").fetchone()
    assert raw == encode_cursor(DONE)


# --------------------------------------------------------------------------- on the wire


@given(cursors)
def test_a_cursor_crosses_the_wire_unchanged(cursor: StreamCursor) -> None:
    message = pb.StreamCursor.FromString(cursor_to_proto(cursor).SerializeToString())
    assert cursor_from_proto(message) == cursor


def test_a_cursor_a_peer_cannot_have_meant_is_malformed_input() -> None:
    with pytest.raises(MalformedInput, match=r"after\.phase"):
        cursor_from_proto(pb.StreamCursor(phase=7))
    no_id = pb.StreamCursor(phase=pb.StreamCursor.MUTATIONS, started=True, token=1)
    with pytest.raises(MalformedInput, match=r"after\.mutation_id"):
        cursor_from_proto(no_id)


def test_a_range_request_and_a_chunk_cross_the_wire_unchanged() -> None:
    request = RangeRequest(
        epoch=12,
        receiver="node-4",
        sequence_node="node-3",
        prepared_epoch=9,
        keyspace="ks",
        table_id="t1",
        left=MIN_TOKEN,
        right=0,
        after=StreamCursor(Phase.CELLS, CellPosition(-5, b"k", b"\x01c", "v")),
        max_message_bytes=4096,
    )
    assert range_request_from_proto(range_request_to_proto(request)) == request
    old_style = range_request_to_proto(request)
    old_style.sequence_node = ""  # before sequence_node, the receiver's own sequence
    assert range_request_from_proto(old_style).sequence_node == "node-4"

    cells = (
        StreamedCell(-5, b"k", Cell(b"\x01c", "v", b"\x08\x01", 10, b"w" * 16, False)),
        StreamedCell(-5, b"k", Cell(b"\x01d", "v", None, 11, b"w" * 16, True)),
    )
    chunk = RangeChunk(epoch=12, cells=cells, cursor=StreamCursor(Phase.MUTATIONS))
    message = chunk_to_proto(chunk)
    received = chunk_from_proto(pb.StreamChunk.FromString(message.SerializeToString()))
    assert (received.epoch, received.cells, received.cursor) == (12, cells, chunk.cursor)
    assert received.mutations == () and received.size_bytes == message.ByteSize()


def test_pull_requests_reports_and_statuses_keep_every_field_on_the_wire() -> None:
    request = PullRequest(epoch=8, sequence_node="node-3", prepared_epoch=5)
    assert pull_request_from_proto(pull_request_to_proto(request)) == request
    report = PullReport(
        node_id="node-2",
        streamed_bytes=1 << 40,
        streamed_cells=7,
        streamed_mutations=6,
        ranges_done=5,
        ranges_total=9,
        reconciled_mutations=4,
    )
    assert pull_report_from_proto(pull_report_to_proto(report)) == report
    status = OperationStatus(
        node_id="node-4",
        epoch=30,
        kind="join",
        step="start",
        state="streaming",
        message="",
        prepared_epoch=21,
        streamed_bytes=2_500_000,
        streamed_cells=100,
        streamed_mutations=50,
        ranges_done=3,
        ranges_total=8,
        eta_s=12.5,
        barrier_level="EACH_QUORUM",
        reconciled_mutations=2,
    )
    message = operation_status_to_proto(status)
    assert {f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields} == (
        dataclasses.asdict(status)
    )
