"""The replica's messages <-> domain values (epochal.v1 Replica, ReplicaPeer, ReplicaAdmin).

Client requests decode into drafts (``epochal.replica.mutations``): key values become Python
values, cell values stay encoded. A malformed message raises ``MalformedInput`` naming the
field; whether a value fits the schema is decided later, at the coordinator's epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from epochal.admin import OperationStatus
from epochal.mtrack import MutationId
from epochal.mtrack.hlc import MAX_HLC
from epochal.replica.data_store import CellRepair
from epochal.replica.model import Cell, Mutation, ResolvedRow, RowWrite
from epochal.replica.mutations import CellDraft, ReadDraft, RowDraft, SliceDraft, WriteDraft
from epochal.replica.stream_values import (
    LOG_MODES,
    CellPosition,
    LogPosition,
    Phase,
    PullReport,
    PullRequest,
    RangeChunk,
    RangeRequest,
    ReceivedChunk,
    StreamCursor,
    StreamedCell,
    StreamedId,
)
from epochal.tcm import Table
from epochal.tcm.consistency import Consistency
from epochal.tcm.keys import KeyBounds, KeyValue, clustering_columns, decode_key
from epochal.wire.fields import MalformedInput, within
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.values import decode, from_proto, to_proto

CONSISTENCY = {
    pb.CONSISTENCY_LEVEL_UNSPECIFIED: Consistency.QUORUM,
    pb.ONE: Consistency.ONE,
    pb.QUORUM: Consistency.QUORUM,
    pb.LOCAL_QUORUM: Consistency.LOCAL_QUORUM,
    pb.ALL: Consistency.ALL,
}


def consistency_from_proto(number: int) -> Consistency:
    level = CONSISTENCY.get(number)
    if level is None:
        raise MalformedInput(f"consistency: unknown level {number}")
    return level


# --------------------------------------------------------------------------- ids


def id_to_proto(mutation_id: MutationId) -> pb.MutationId:
    return pb.MutationId(
        node=mutation_id.node,
        log=mutation_id.log,
        sequence=mutation_id.sequence,
        hlc=mutation_id.hlc,
    )


def id_from_proto(message: pb.MutationId, field: str = "mutation_id") -> MutationId:
    try:
        return MutationId(
            node=message.node, log=message.log, sequence=message.sequence, hlc=message.hlc
        )
    except ValueError as error:
        raise MalformedInput(f"{field}: {error}") from None


def _canonical(value: pb.Value) -> bytes:
    """A client's value as stored: without fields this version does not know (which every
    other replica would refuse as not a value, epochal.wire.values.encoded_kind)."""
    value.DiscardUnknownFields()
    return value.SerializeToString()


def session_hlc_from(value: int) -> int:
    """A request's session HLC: what a clock can read (the skew check comes later)."""
    if value > MAX_HLC:
        raise MalformedInput(f"session_hlc {value} is beyond any clock's reading (2^63 - 1)")
    return value


# --------------------------------------------------------------------------- client requests


def _check_value(value: pb.Value, field: str) -> str | None:
    """The value's kind (None: null), refusing what no column can hold (a uuid not 16 bytes)."""
    kind = value.WhichOneof("kind")
    if kind == "uuid" and len(value.uuid) != 16:
        raise MalformedInput(f"{field}: a uuid is 16 bytes, got {len(value.uuid)}")
    return kind


def _key_values(values: Iterable[pb.Value], field: str) -> tuple[KeyValue, ...]:
    result = []
    for index, value in enumerate(values):
        _check_value(value, f"{field}[{index}]")
        python = from_proto(value)
        if python is None:
            raise MalformedInput(f"{field}[{index}] is null; key values cannot be null")
        result.append(python)
    return tuple(result)


def write_draft(message: pb.Mutation) -> WriteDraft:
    rows = []
    for index, row in enumerate(message.rows):
        cells = []
        for cell in row.cells:
            kind = _check_value(cell.value, f"mutation.rows[{index}].cells[{cell.column}]")
            cells.append(
                CellDraft(
                    cell.column,
                    kind,
                    _canonical(cell.value) if kind is not None else None,
                    cell.value.int if kind == "int" else None,
                )
            )
        rows.append(
            RowDraft(
                _key_values(row.clustering, f"mutation.rows[{index}].clustering"),
                tuple(cells),
                row.delete,
            )
        )
    return WriteDraft(
        keyspace=message.keyspace,
        table=message.table,
        partition_key=_key_values(message.partition_key, "mutation.partition_key"),
        rows=tuple(rows),
        delete_partition=message.delete_partition,
    )


def read_draft(message: pb.ReadRequest) -> ReadDraft:
    slice_draft = None
    if message.HasField("slice"):
        s = message.slice
        slice_draft = SliceDraft(
            _key_values(s.start, "slice.start") if s.has_start else None,
            s.start_exclusive,
            _key_values(s.end, "slice.end") if s.has_end else None,
            s.end_exclusive,
        )
    return ReadDraft(
        keyspace=message.keyspace,
        table=message.table,
        partition_key=_key_values(message.partition_key, "partition_key"),
        slice=slice_draft,
        columns=tuple(message.columns),
    )


def rows_to_proto(table: Table, rows: Sequence[ResolvedRow]) -> list[pb.Row]:
    columns = clustering_columns(table)
    result = []
    for row in rows:
        clustering = [
            to_proto(name, column_type, value)
            for (name, column_type), value in zip(
                columns, decode_key(columns, row.clustering), strict=True
            )
        ]
        cells = [pb.CellValue(column=c, value=decode(v), hlc=h) for c, v, h in row.cells]
        result.append(pb.Row(clustering=clustering, cells=cells))
    return result


# --------------------------------------------------------------------------- stored mutations


def mutation_to_proto(mutation: Mutation) -> pb.StoredMutation:
    return pb.StoredMutation(
        id=id_to_proto(mutation.id),
        keyspace=mutation.keyspace,
        table_id=mutation.table_id,
        token=mutation.token,
        partition_key=mutation.partition_key,
        rows=[
            pb.StoredRow(
                clustering=row.clustering,
                cells=[
                    pb.StoredCell(column=c, value=v or b"", tombstone=v is None)
                    for c, v in row.cells
                ],
                deleted=row.deleted,
            )
            for row in mutation.rows
        ],
        partition_deleted=mutation.partition_deleted,
        tracked=mutation.tracked,
        timestamp=mutation.timestamp,
    )


def mutation_from_proto(message: pb.StoredMutation) -> Mutation:
    if not message.HasField("id"):
        raise MalformedInput("mutation.id is required")
    if not message.table_id or not message.keyspace:
        raise MalformedInput("mutation.keyspace and mutation.table_id are required")
    return Mutation(
        id=id_from_proto(message.id, "mutation.id"),
        keyspace=message.keyspace,
        table_id=message.table_id,
        token=message.token,
        partition_key=message.partition_key,
        rows=tuple(
            RowWrite(
                row.clustering,
                tuple((c.column, None if c.tombstone else c.value) for c in row.cells),
                row.deleted,
            )
            for row in message.rows
        ),
        partition_deleted=message.partition_deleted,
        tracked=message.tracked,
        timestamp=within(message.timestamp, "mutation.timestamp", MAX_HLC),
    )


def mutation_to_body(mutation: Mutation) -> bytes:
    """The bytes a mutation is stored and sent as (its log entry)."""
    return mutation_to_proto(mutation).SerializeToString()


def mutation_from_body(body: bytes) -> Mutation:
    return mutation_from_proto(pb.StoredMutation.FromString(body))


# --------------------------------------------------------------------------- cells


def cell_to_proto(cell: Cell) -> pb.RawCell:
    return pb.RawCell(
        clustering=cell.clustering,
        column=cell.column,
        value=cell.value or b"",
        hlc=cell.hlc,
        mutation_key=cell.writer,
        tombstone=cell.tombstone,
    )


def cells_from_proto(messages: Iterable[pb.RawCell], field: str = "cells") -> list[Cell]:
    return [
        Cell(
            m.clustering,
            m.column,
            None if m.tombstone or not m.value else m.value,
            within(m.hlc, f"{field}[{index}].hlc", MAX_HLC),
            m.mutation_key,
            m.tombstone,
        )
        for index, m in enumerate(messages)
    ]


def cell_repair_from_proto(message: pb.CellRepair) -> CellRepair:
    """An untracked read repair's cells (whether some write made them is checked later, at
    the table's schema: ``check_repaired_cells``)."""
    return CellRepair(
        message.table_id,
        message.token,
        message.partition_key,
        tuple(cells_from_proto(message.cells, "cell_repair.cells")),
    )


def bounds_to_proto(bounds: KeyBounds) -> pb.KeyBounds:
    return pb.KeyBounds(
        lower=bounds.lower, upper=bounds.upper or b"", has_upper=bounds.upper is not None
    )


def bounds_from_proto(message: pb.KeyBounds) -> KeyBounds:
    return KeyBounds(message.lower, message.upper if message.has_upper else None)


# --------------------------------------------------------------------------- range streams

# Range and pull requests, pull reports and operation statuses name their fields as their domain
# values do, so they are copied by name (a field the message lacks fails its construction).


def _names(value_class: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(value_class))


_RANGE_SCALARS = tuple(name for name in _names(RangeRequest) if name != "after")


def _fields_of(source: object, names: Iterable[str] | None = None) -> dict[str, Any]:
    """``source``'s fields ``names`` (a domain value's: all of them) by name."""
    return {name: getattr(source, name) for name in names or _names(type(source))}


_PHASES = {
    pb.StreamCursor.CELLS: Phase.CELLS,
    pb.StreamCursor.MUTATIONS: Phase.MUTATIONS,
    pb.StreamCursor.DONE: Phase.DONE,
}
_PHASE_NUMBERS = {phase: number for number, phase in _PHASES.items()}


def cursor_to_proto(cursor: StreamCursor) -> pb.StreamCursor:
    message = pb.StreamCursor(phase=_PHASE_NUMBERS[cursor.phase])
    after = cursor.after
    if after is not None:
        message.started = True
        message.token, message.partition_key = after.token, after.partition_key
    if isinstance(after, CellPosition):
        message.clustering, message.column = after.clustering, after.column
    elif isinstance(after, LogPosition):
        message.hlc = after.mutation_id.hlc
        message.mutation_id.CopyFrom(id_to_proto(after.mutation_id))
    return message


def cursor_from_proto(message: pb.StreamCursor, field: str = "after") -> StreamCursor:
    phase = _PHASES.get(message.phase)
    if phase is None:
        raise MalformedInput(f"{field}.phase: unknown phase {message.phase}")
    if not message.started or phase is Phase.DONE:
        return StreamCursor(phase)
    if phase is Phase.CELLS:
        return StreamCursor(
            phase,
            CellPosition(message.token, message.partition_key, message.clustering, message.column),
        )
    mid = message.mutation_id  # its hlc is the cursor's own
    within(message.hlc, f"{field}.hlc", MAX_HLC)
    try:
        mutation_id = MutationId(node=mid.node, log=mid.log, sequence=mid.sequence, hlc=message.hlc)
    except ValueError as error:
        raise MalformedInput(f"{field}.mutation_id: {error}") from None
    return StreamCursor(phase, LogPosition(message.token, message.partition_key, mutation_id))


def range_request_to_proto(request: RangeRequest) -> pb.StreamRangeRequest:
    return pb.StreamRangeRequest(
        **_fields_of(request, _RANGE_SCALARS), after=cursor_to_proto(request.after)
    )


def range_request_from_proto(message: pb.StreamRangeRequest) -> RangeRequest:
    _check_epochs(message)
    scalars = _fields_of(message, _RANGE_SCALARS)
    scalars["sequence_node"] = message.sequence_node or message.receiver  # empty: its own
    if message.log_mode not in LOG_MODES:
        raise MalformedInput(f"log_mode must be one of {LOG_MODES}, not {message.log_mode!r}")
    return RangeRequest(**scalars, after=cursor_from_proto(message.after))


def chunk_to_proto(chunk: RangeChunk) -> pb.StreamChunk:
    return pb.StreamChunk(
        epoch=chunk.epoch,
        cells=[
            pb.StreamedCell(
                token=c.token, partition_key=c.partition_key, cell=cell_to_proto(c.cell)
            )
            for c in chunk.cells
        ],
        mutations=chunk.mutations,
        cursor=cursor_to_proto(chunk.cursor),
        ids=[
            pb.StreamedId(
                id=id_to_proto(i.mutation_id),
                token=i.token,
                partition_key=i.partition_key,
                whole=i.whole,
            )
            for i in chunk.ids
        ],
    )


def chunk_from_proto(message: pb.StreamChunk) -> ReceivedChunk:
    cells = cells_from_proto(c.cell for c in message.cells)
    return ReceivedChunk(
        epoch=message.epoch,
        cells=tuple(
            StreamedCell(c.token, c.partition_key, cell)
            for c, cell in zip(message.cells, cells, strict=True)
        ),
        mutations=tuple((mutation_from_body(body), body) for body in message.mutations),
        cursor=cursor_from_proto(message.cursor, "cursor"),
        size_bytes=message.ByteSize(),
        ids=tuple(
            StreamedId(id_from_proto(i.id, "ids"), i.token, i.partition_key, i.whole)
            for i in message.ids
        ),
    )


def pull_request_to_proto(request: PullRequest) -> pb.PullRangesRequest:
    return pb.PullRangesRequest(**_fields_of(request))


def pull_request_from_proto(message: pb.PullRangesRequest) -> PullRequest:
    _check_epochs(message)
    return PullRequest(**_fields_of(message, _names(PullRequest)))


def _check_epochs(message: pb.StreamRangeRequest | pb.PullRangesRequest) -> None:
    within(message.epoch, "epoch")
    within(message.prepared_epoch, "prepared_epoch")


def pull_report_to_proto(report: PullReport) -> pb.PullRangesResponse:
    return pb.PullRangesResponse(**_fields_of(report))


def pull_report_from_proto(message: pb.PullRangesResponse) -> PullReport:
    return PullReport(**_fields_of(message, _names(PullReport)))


# --------------------------------------------------------------------------- operations


def operation_status_to_proto(status: OperationStatus) -> pb.OperationStatus:
    return pb.OperationStatus(**_fields_of(status))
