"""The stream cursor: a domain value that fits its phase, and its own encoding on disk (and the
protobuf one replicas stored before it, still read)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.mtrack import MutationId
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.ids import MAX_SEQUENCE, MAX_U32
from epochal.replica.stream_encoding import decode_cursor, encode_cursor
from epochal.replica.stream_values import (
    DONE,
    CellPosition,
    LogPosition,
    Phase,
    StreamCursor,
    StreamProgress,
)
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN
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
