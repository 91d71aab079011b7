"""Python values <-> the wire: the SDK's requests and replies as protobuf (with
``epochal.sessions``, the only modules of the SDK that build or read ``replica.proto``).

Theory of operation
-------------------
A write or a read is encoded once, against the table's schema in the client's metadata: its
partition key becomes wire values and the token the SDK routes by (computed from the values as
the replica decodes them — an int for a double, a datetime for a timestamp — so both compute the
same token); rows become a ``Mutation`` of cells, clustering keys and deletions. Every value is
checked against its column's type here, and a value that does not fit is an ``InvalidRequest``
naming the column, before anything is sent. Each attempt then wraps the encoded body in a
``SessionRequest`` that carries what changes between attempts: the epoch and HLC the client has
seen and, for a write's retry, the mutation id to reuse. A reply becomes a ``WriteResult`` or a
``ReadResult``; a reply that is a failure becomes the ``EpochalError`` its status stands for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from epochal.errors import EpochalError, InvalidRequest
from epochal.mtrack import MutationId
from epochal.results import ReadResult, ReadStats, WriteResult
from epochal.status import Operation, error_for
from epochal.tcm import ColumnType, Table
from epochal.tcm.consistency import Consistency
from epochal.tcm.keys import partition_columns, partition_token
from epochal.wire.status import replicas_from_proto
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.values import BadValue, from_proto, to_proto

LEVELS = {
    Consistency.ONE: pb.ONE,
    Consistency.QUORUM: pb.QUORUM,
    Consistency.LOCAL_QUORUM: pb.LOCAL_QUORUM,
    Consistency.ALL: pb.ALL,
}


@dataclass(frozen=True, slots=True)
class Encoded:
    """A write or read in wire form, and where it routes."""

    operation: Operation  # WRITE or READ
    keyspace: str
    token: int
    body: pb.WriteRequest | pb.ReadRequest


class ColumnTypes:
    """Column -> type of a table, computed once per version of the table (tables are immutable:
    an altered table is a new object)."""

    def __init__(self) -> None:
        self._by_table: dict[str, tuple[Table, dict[str, ColumnType]]] = {}

    def of(self, schema: Table) -> dict[str, ColumnType]:
        cached = self._by_table.get(schema.id)
        if cached is None or cached[0] is not schema:
            cached = self._by_table[schema.id] = (schema, {c.name: c.type for c in schema.columns})
        return cached[1]


# ---------------------------------------------------------------------- values and keys


def wire_value(name: str, types: Mapping[str, ColumnType], python_value: Any) -> pb.Value:
    column_type = types.get(name)
    if column_type is None:
        raise InvalidRequest(f"unknown column {name!r}")
    try:
        return to_proto(name, column_type, python_value)
    except BadValue as error:
        raise InvalidRequest(str(error)) from None


def partition(schema: Table, values: Mapping[str, Any]) -> tuple[list[pb.Value], int]:
    """The partition key's wire values, and its token."""
    columns = partition_columns(schema)
    missing = [name for name, _ in columns if values.get(name) is None]
    if missing:
        raise InvalidRequest(f"the partition key needs {missing}")
    try:
        protos = [to_proto(name, kind, values[name]) for name, kind in columns]
        token = partition_token(columns, [from_proto(proto) for proto in protos])
    except (BadValue, ValueError) as error:
        raise InvalidRequest(str(error)) from None
    return protos, token


def _clustering(
    schema: Table, row: Mapping[str, Any], types: Mapping[str, ColumnType]
) -> list[pb.Value]:
    missing = [c for c in schema.clustering_key if row.get(c) is None]
    if missing:
        raise InvalidRequest(f"the clustering key needs {missing}")
    return [wire_value(c, types, row[c]) for c in schema.clustering_key]


def _prefix(
    schema: Table, values: Mapping[str, Any], types: Mapping[str, ColumnType]
) -> list[pb.Value]:
    prefix = []
    for name in schema.clustering_key:
        if name not in values:
            break
        prefix.append(wire_value(name, types, values[name]))
    if len(prefix) != len(values):
        raise InvalidRequest(
            f"a slice bound names a prefix of the clustering key {list(schema.clustering_key)}"
        )
    return prefix


# ---------------------------------------------------------------------- requests


def write_rows(
    schema: Table,
    types: Mapping[str, ColumnType],
    rows: Sequence[Mapping[str, Any]],
    consistency: Consistency,
) -> Encoded:
    """Rows of one partition as one mutation (``None`` deletes a cell)."""
    if not rows:
        raise InvalidRequest("write_rows needs at least one row")
    key, token = partition(schema, rows[0])
    mutation = pb.Mutation(keyspace=schema.keyspace, table=schema.name, partition_key=key)
    first = [rows[0].get(name) for name in schema.partition_key]
    for row in rows:
        if [row.get(name) for name in schema.partition_key] != first:
            raise InvalidRequest("every row of one write must have the same partition key")
        mutation.rows.append(
            pb.RowWrite(
                clustering=_clustering(schema, row, types),
                cells=[
                    pb.CellWrite(column=name, value=wire_value(name, types, cell))
                    for name, cell in row.items()
                    if name not in schema.key_columns
                ],
            )
        )
    return _write(token, mutation, consistency)


def delete(
    schema: Table,
    types: Mapping[str, ColumnType],
    key: Mapping[str, Any],
    columns: Sequence[str],
    consistency: Consistency,
) -> Encoded:
    """Delete ``columns`` of a row, a whole row (``key`` names its clustering key), or the whole
    partition (``key`` names only the partition key)."""
    values, token = partition(schema, key)
    mutation = pb.Mutation(keyspace=schema.keyspace, table=schema.name, partition_key=values)
    has_clustering = any(c in key for c in schema.clustering_key)
    if not has_clustering and schema.clustering_key:
        if columns:
            raise InvalidRequest("deleting columns needs the row's whole clustering key")
        mutation.delete_partition = True
    elif columns:
        mutation.rows.append(
            pb.RowWrite(
                clustering=_clustering(schema, key, types),
                cells=[pb.CellWrite(column=c, value=pb.Value()) for c in columns],
            )
        )
    else:
        mutation.rows.append(pb.RowWrite(clustering=_clustering(schema, key, types), delete=True))
    return _write(token, mutation, consistency)


def _write(token: int, mutation: pb.Mutation, consistency: Consistency) -> Encoded:
    body = pb.WriteRequest(mutation=mutation, consistency=LEVELS[consistency])
    return Encoded(Operation.WRITE, mutation.keyspace, token, body)


@dataclass(frozen=True, slots=True)
class Slice:
    """A clustering slice: ``start``/``end`` name a prefix of the clustering key (None: open)."""

    start: Mapping[str, Any] | None = None
    end: Mapping[str, Any] | None = None
    start_exclusive: bool = False
    end_exclusive: bool = False


def read(
    schema: Table,
    types: Mapping[str, ColumnType],
    partition_key: Mapping[str, Any],
    bounds: Slice,
    columns: Sequence[str],
    consistency: Consistency,
) -> Encoded:
    key, token = partition(schema, partition_key)
    request = pb.ReadRequest(
        keyspace=schema.keyspace,
        table=schema.name,
        partition_key=key,
        columns=list(columns),
        consistency=LEVELS[consistency],
    )
    if bounds.start is not None or bounds.end is not None:
        request.slice.CopyFrom(
            pb.ClusteringSlice(
                start=_prefix(schema, bounds.start or {}, types),
                has_start=bounds.start is not None,
                start_exclusive=bounds.start_exclusive,
                end=_prefix(schema, bounds.end or {}, types),
                has_end=bounds.end is not None,
                end_exclusive=bounds.end_exclusive,
            )
        )
    return Encoded(Operation.READ, schema.keyspace, token, request)


def session_request(
    encoded: Encoded, *, epoch: int, session_hlc: int, mutation_id: str = ""
) -> pb.SessionRequest:
    """One attempt of ``encoded``: what the client has seen, and a write's id to reuse (packed
    hex, as an error names it; "": the coordinator assigns one)."""
    request = pb.SessionRequest()
    body = request.write if encoded.operation is Operation.WRITE else request.read
    body.CopyFrom(encoded.body)
    body.epoch = epoch
    body.session_hlc = session_hlc
    if mutation_id and encoded.operation is Operation.WRITE:
        request.write.mutation_id.CopyFrom(mutation_id_to_proto(mutation_id))
    return request


# ---------------------------------------------------------------------- replies


def reply_or_raise(reply: pb.SessionReply) -> pb.SessionReply:
    """The reply, or the EpochalError its failure describes (what Write or Read would raise)."""
    if reply.WhichOneof("body") != "failure":
        return reply
    failure = reply.failure
    mutation_id = ""
    if failure.HasField("mutation_id"):
        mutation_id = mutation_id_from_proto(failure.mutation_id).pack().hex()
    raise error_for(
        getattr(grpc.StatusCode, failure.code, grpc.StatusCode.UNKNOWN),
        failure.message,
        rule=failure.rule,
        epoch=failure.epoch,
        mutation_id=mutation_id,
        replicas=replicas_from_proto(failure.replicas) if failure.HasField("replicas") else None,
    )


def write_result(reply: pb.SessionReply, address: str, attempts: int) -> WriteResult:
    response = reply.write
    return WriteResult(
        mutation_id_from_proto(response.mutation_id),
        response.epoch,
        tuple(response.acknowledged),
        address,
        attempts,
    )


def read_result(
    schema: Table, partition_key: Mapping[str, Any], reply: pb.SessionReply, address: str
) -> tuple[ReadResult, int]:
    """The rows (each a dict of its key columns and live cells) and statistics, and the HLC
    the reply carried."""
    response = reply.read
    rows = []
    written = []
    for row in response.rows:
        values = {name: partition_key[name] for name in schema.partition_key}
        values.update(
            zip(schema.clustering_key, (from_proto(v) for v in row.clustering), strict=True)
        )
        values.update((cell.column, from_proto(cell.value)) for cell in row.cells)
        rows.append(values)
        written.append({cell.column: cell.hlc for cell in row.cells})
    stats = response.stats
    result = ReadResult(
        rows=rows,
        stats=ReadStats(
            replicas=tuple(stats.replicas),
            data_replica=stats.data_replica,
            repaired_mutations=stats.repaired_mutations,
            repaired=tuple(mutation_id_from_proto(m) for m in stats.repaired),
            digest_mismatch=stats.digest_mismatch,
            repaired_cells=stats.repaired_cells,
            summary_rounds=stats.summary_rounds,
            summaries_agreed=stats.summaries_agreed,
            differing={d.replica: tuple((k.node, k.log) for k in d.logs) for d in stats.differing},
        ),
        epoch=response.epoch,
        coordinator=address,
        written=written,
    )
    return result, response.hlc


# ---------------------------------------------------------------------- mutation ids


def mutation_id_from_proto(message: pb.MutationId) -> MutationId:
    return MutationId(
        node=message.node, log=message.log, sequence=message.sequence, hlc=message.hlc
    )


def mutation_id_to_proto(packed_hex: str) -> pb.MutationId:
    try:
        mutation_id = MutationId.unpack(bytes.fromhex(packed_hex))
    except ValueError as error:
        raise EpochalError(f"the server sent a malformed mutation id: {error}") from None
    return pb.MutationId(
        node=mutation_id.node,
        log=mutation_id.log,
        sequence=mutation_id.sequence,
        hlc=mutation_id.hlc,
    )
