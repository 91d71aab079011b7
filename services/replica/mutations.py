"""What a client asks for, checked against the schema of the coordinator's epoch. Pure.

A client's write arrives as a ``WriteDraft`` (values already decoded from the wire, cell
values still encoded); ``prepare_write`` checks it against the table — columns exist and are not
key columns, every value fits its column's type and the size limits — encodes its keys and finds
its token. The coordinator then gives it an id (``PreparedWrite.with_id``), which fixes its
timestamp: one ``Mutation``, the unit replicas store and exchange whole.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from epochal.mtrack import MutationId
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.ids import MAX_SEQUENCE
from epochal.replica.model import (
    PARTITION_DELETION,
    ROW_DELETION,
    ROW_MARKER,
    WRITER_BYTES,
    Cell,
    Mutation,
    RowWrite,
)
from epochal.tcm import ClusterMetadata, ColumnType, Keyspace, ReplicationType, Table
from epochal.tcm.keys import (
    BadKey,
    KeyBounds,
    KeyValue,
    clustering_columns,
    decode_canonical,
    encode_key,
    partition_columns,
    partition_token,
    slice_bounds,
)
from epochal.tcm.schema import is_identifier
from epochal.wire.values import KIND_OF_TYPE, BadValue, encoded_kind

INT32 = (-(1 << 31), (1 << 31) - 1)
_WRITER = struct.Struct(">IIQ")  # a mutation id's identity, as model.writer_of packs it


class BadRequest(ValueError):
    """The request does not fit the schema; the message says what to change."""


@dataclass(frozen=True, slots=True)
class CellDraft:
    column: str
    kind: str | None  # the value's type on the wire; None: delete the cell
    encoded: bytes | None
    number: int | None = None  # an int value, for the 32-bit range check


@dataclass(frozen=True, slots=True)
class RowDraft:
    clustering: tuple[KeyValue, ...]
    cells: tuple[CellDraft, ...]
    delete: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteDraft:
    keyspace: str
    table: str
    partition_key: tuple[KeyValue, ...]
    rows: tuple[RowDraft, ...]
    delete_partition: bool = False


@dataclass(frozen=True, slots=True)
class SliceDraft:
    start: tuple[KeyValue, ...] | None
    start_exclusive: bool
    end: tuple[KeyValue, ...] | None
    end_exclusive: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadDraft:
    keyspace: str
    table: str
    partition_key: tuple[KeyValue, ...]
    slice: SliceDraft | None = None
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedWrite:
    keyspace: Keyspace
    table: Table
    partition_key: bytes
    token: int
    rows: tuple[RowWrite, ...]
    partition_deleted: bool
    size_bytes: int

    def with_id(self, mutation_id: MutationId) -> Mutation:
        return Mutation(
            id=mutation_id,
            keyspace=self.keyspace.name,
            table_id=self.table.id,
            token=self.token,
            partition_key=self.partition_key,
            rows=self.rows,
            partition_deleted=self.partition_deleted,
            tracked=self.keyspace.replication_type is ReplicationType.TRACKED,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRead:
    keyspace: Keyspace
    table: Table
    partition_key: bytes
    token: int
    bounds: KeyBounds
    columns: tuple[str, ...]

    @property
    def tracked(self) -> bool:
        return self.keyspace.replication_type is ReplicationType.TRACKED


def locate(metadata: ClusterMetadata, keyspace: str, table: str) -> tuple[Keyspace, Table]:
    found = metadata.keyspaces.get(keyspace)
    if found is None:
        raise BadRequest(f"keyspace {keyspace!r} does not exist (at epoch {metadata.epoch})")
    schema = found.tables.get(table)
    if schema is None:
        raise BadRequest(f"table {keyspace}.{table} does not exist (at epoch {metadata.epoch})")
    return found, schema


def partition_of(table: Table, values: Sequence[KeyValue]) -> tuple[bytes, int]:
    """The partition key as stored (order-preserving encoding) and its token (Cassandra's)."""
    columns = partition_columns(table)
    try:
        return encode_key(columns, values), partition_token(columns, values)
    except BadKey as error:
        raise BadRequest(f"partition key of {table.keyspace}.{table.name}: {error}") from None


def prepare_write(
    metadata: ClusterMetadata,
    draft: WriteDraft,
    *,
    max_value_bytes: int,
    max_mutation_bytes: int,
) -> PreparedWrite:
    keyspace, table = locate(metadata, draft.keyspace, draft.table)
    partition_key, token = partition_of(table, draft.partition_key)
    if draft.delete_partition and draft.rows:
        raise BadRequest("a partition deletion carries no rows; send the rows in another write")
    if not draft.delete_partition and not draft.rows:
        raise BadRequest("a write needs at least one row (or delete_partition)")
    clustering = clustering_columns(table)
    types = {c.name: c.type for c in table.columns}
    rows = []
    keys: set[bytes] = set()
    size = len(partition_key)
    for row in draft.rows:
        try:
            key = encode_key(clustering, row.clustering)
        except BadKey as error:
            raise BadRequest(f"clustering key of {table.keyspace}.{table.name}: {error}") from None
        if key in keys:
            raise BadRequest(
                f"the row {list(row.clustering)} is written twice in one write (both parts "
                "would carry one timestamp): merge them into one row"
            )
        keys.add(key)
        if row.delete and row.cells:
            raise BadRequest("a row deletion carries no cells")
        cells = []
        seen: set[str] = set()
        for cell in row.cells:
            _check_cell(table, types, cell, max_value_bytes)
            if cell.column in seen:
                raise BadRequest(f"column {cell.column!r} is written twice in one row")
            seen.add(cell.column)
            cells.append((cell.column, cell.encoded if cell.kind is not None else None))
            size += len(cell.column) + len(cell.encoded or b"")
        size += len(key)
        rows.append(RowWrite(key, tuple(cells), row.delete))
    if size > max_mutation_bytes:
        raise BadRequest(f"the write is {size} bytes; the limit is {max_mutation_bytes}")
    return PreparedWrite(
        keyspace=keyspace,
        table=table,
        partition_key=partition_key,
        token=token,
        rows=tuple(rows),
        partition_deleted=draft.delete_partition,
        size_bytes=size,
    )


def _check_cell(table: Table, types: dict, cell: CellDraft, max_value_bytes: int) -> None:
    name = f"{table.keyspace}.{table.name}"
    column_type = types.get(cell.column)
    if column_type is None:
        raise BadRequest(f"table {name} has no column {cell.column!r}")
    if cell.column in table.key_columns:
        raise BadRequest(f"{cell.column!r} is a key column of {name}: set it in the key")
    if cell.kind is None:
        return
    if cell.kind != KIND_OF_TYPE[column_type]:
        raise BadRequest(
            f"column {cell.column!r} of {name} is {column_type.value}; got a {cell.kind} value"
        )
    if column_type is ColumnType.INT and not INT32[0] <= (cell.number or 0) <= INT32[1]:
        raise BadRequest(f"column {cell.column!r} is int (32-bit); {cell.number} is out of range")
    if cell.encoded is not None and len(cell.encoded) > max_value_bytes:
        raise BadRequest(
            f"the value of column {cell.column!r} is {len(cell.encoded)} bytes; the limit is "
            f"{max_value_bytes} (--max-value-bytes)"
        )


def check_stored(
    keyspace: Keyspace,
    table: Table,
    mutation: Mutation,
    *,
    issued_nodes: int,
    max_value_bytes: int,
    max_mutation_bytes: int,
) -> None:
    """A whole mutation another node sent (a coordinator's write, a read repair) is one a
    coordinator could have prepared: its id from a node number the CMS issued (below
    ``issued_nodes``), its keys canonical for the table and its token theirs, its values encoded
    values, within the size limits. Raises ``BadRequest``. A column the table no longer has, or
    a value of another type than its column's, is accepted: the column may have been dropped
    (and added again) since the write was prepared, against the coordinator's epoch."""
    name = f"{table.keyspace}.{table.name}"
    if mutation.id.node >= issued_nodes:
        raise BadRequest(f"mutation {mutation.id} names node {mutation.id.node}, never issued")
    if mutation.tracked != (keyspace.replication_type is ReplicationType.TRACKED):
        raise BadRequest(f"mutation {mutation.id}: tracked is wrong for keyspace {keyspace.name}")
    if mutation.timestamp > mutation.id.hlc:
        raise BadRequest(
            f"mutation {mutation.id}: its cells' time {mutation.timestamp} is after its id's (a "
            "retried write keeps an earlier time, never a later one)"
        )
    columns = partition_columns(table)
    try:
        values = decode_canonical(columns, mutation.partition_key)
        token = partition_token(columns, values)
    except BadKey as error:
        raise BadRequest(f"partition key of {name}: {error}") from None
    if token != mutation.token:
        raise BadRequest(f"mutation {mutation.id}: token {mutation.token} is not its key's")
    if mutation.partition_deleted == bool(mutation.rows):
        raise BadRequest("a mutation has rows or deletes its partition, not both or neither")
    clustering = clustering_columns(table)
    size = len(mutation.partition_key)
    if len({row.clustering for row in mutation.rows}) != len(mutation.rows):
        raise BadRequest("a row is written twice in one mutation")
    for row in mutation.rows:
        try:
            decode_canonical(clustering, row.clustering)
        except BadKey as error:
            raise BadRequest(f"clustering key of {name}: {error}") from None
        if row.deleted and row.cells:
            raise BadRequest("a row deletion carries no cells")
        if len({column for column, _ in row.cells}) != len(row.cells):
            raise BadRequest("a column is written twice in one row")
        for column, encoded in row.cells:
            _check_stored_cell(table, column, encoded, max_value_bytes)
            size += len(column) + len(encoded or b"")
        size += len(row.clustering)
    if size > max_mutation_bytes:
        raise BadRequest(f"the mutation is {size} bytes; the limit is {max_mutation_bytes}")


def _check_stored_cell(
    table: Table, column: str, encoded: bytes | None, max_value_bytes: int
) -> None:
    """A cell another node sent: a column name, not a key column, and an encoded value (any
    kind: the column may have been dropped and added again with another type since the write
    was prepared, which the coordinator checked against its own epoch)."""
    if table.column(column) is None and not is_identifier(column):  # the table's own go
        raise BadRequest(f"{column[:60]!r} is not a column name")
    if column in table.key_columns:
        raise BadRequest(f"{column!r} is a key column of {table.keyspace}.{table.name}")
    if encoded is None:
        return
    try:
        encoded_kind(encoded)
    except BadValue as error:
        raise BadRequest(f"column {column!r}: {error}") from None
    if len(encoded) > max_value_bytes:
        raise BadRequest(f"the value of column {column!r} is {len(encoded)} bytes")


def check_repaired_cells(
    table: Table,
    token: int,
    partition_key: bytes,
    cells: Sequence[Cell],
    *,
    issued_nodes: int,
    max_value_bytes: int,
) -> None:
    """Cells an untracked read repair writes are cells some mutation made: a canonical key
    whose token is ``token``, writers a node the CMS issued, timestamps that fit storage, and
    values (or the row marker and deletions of ``epochal.replica.model``) as a write makes
    them. Raises ``BadRequest``."""
    name = f"{table.keyspace}.{table.name}"
    columns = partition_columns(table)
    try:
        if partition_token(columns, decode_canonical(columns, partition_key)) != token:
            raise BadRequest(f"token {token} is not the token of its partition key")
    except BadKey as error:
        raise BadRequest(f"partition key of {name}: {error}") from None
    clustering = clustering_columns(table)
    for cell in cells:
        _check_writer(cell.writer, issued_nodes)
        if not 0 <= cell.hlc <= MAX_HLC:
            raise BadRequest(f"cell time {cell.hlc} is out of range")
        if cell.column == PARTITION_DELETION:
            if cell.clustering or not cell.tombstone or cell.value is not None:
                raise BadRequest("a partition deletion is a tombstone with no clustering key")
            continue
        try:
            decode_canonical(clustering, cell.clustering)
        except BadKey as error:
            raise BadRequest(f"clustering key of {name}: {error}") from None
        if cell.column in (ROW_MARKER, ROW_DELETION):
            if cell.value is not None or cell.tombstone != (cell.column == ROW_DELETION):
                raise BadRequest(f"a row's own cell {cell.column!r} is malformed")
            continue
        if cell.tombstone != (cell.value is None):
            raise BadRequest(f"cell {cell.column!r}: a tombstone has no value, a value no tomb")
        _check_stored_cell(table, cell.column, cell.value, max_value_bytes)


def _check_writer(writer: bytes, issued_nodes: int) -> None:
    if len(writer) != WRITER_BYTES:
        raise BadRequest(f"a cell's writer is {WRITER_BYTES} bytes, got {len(writer)}")
    node, log, sequence = _WRITER.unpack(writer)
    if not (0 < node < issued_nodes and log > 0 and 0 < sequence <= MAX_SEQUENCE):
        raise BadRequest(f"a cell's writer node-{node}/L{log}#{sequence} was never issued")


def prepare_read(metadata: ClusterMetadata, draft: ReadDraft) -> PreparedRead:
    keyspace, table = locate(metadata, draft.keyspace, draft.table)
    partition_key, token = partition_of(table, draft.partition_key)
    for column in draft.columns:
        if table.column(column) is None:
            raise BadRequest(f"table {table.keyspace}.{table.name} has no column {column!r}")
    bounds = KeyBounds()
    if draft.slice is not None:
        bounds = _bounds(table, draft.slice)
    return PreparedRead(
        keyspace=keyspace,
        table=table,
        partition_key=partition_key,
        token=token,
        bounds=bounds,
        columns=draft.columns,
    )


def _bounds(table: Table, draft: SliceDraft) -> KeyBounds:
    clustering = clustering_columns(table)
    try:
        start = None if draft.start is None else encode_key(clustering, draft.start, prefix=True)
        end = None if draft.end is None else encode_key(clustering, draft.end, prefix=True)
    except BadKey as error:
        raise BadRequest(f"clustering slice of {table.keyspace}.{table.name}: {error}") from None
    return slice_bounds(start, draft.start_exclusive, end, draft.end_exclusive)
