"""Write drafts, as the replica's codec makes them from the wire, against the metadata of
typed_tables: shared by the tests of ``prepare_write`` and of the checks on what peers send."""

from __future__ import annotations

from epochal.replica.mutations import CellDraft, RowDraft, WriteDraft
from epochal.tcm import ColumnType
from epochal.wire.values import encode, to_proto

from .typed_tables import METADATA, REGULAR, SAMPLES

__all__ = ["LIMITS", "METADATA", "REGULAR", "SAMPLES", "cell", "row", "write"]

LIMITS = {"max_value_bytes": 1000, "max_mutation_bytes": 100_000}


def cell(column: str, value: object, column_type: ColumnType | None = None) -> CellDraft:
    """A cell as the codec drafts it from the wire (``value`` None: delete the cell)."""
    if value is None:
        return CellDraft(column, None, None)
    proto = to_proto(column, column_type or REGULAR[column], value)
    kind = proto.WhichOneof("kind")
    return CellDraft(column, kind, encode(proto), proto.int if kind == "int" else None)


def write(*rows: RowDraft, keyspace: str = "ks", table: str = "t", **changes) -> WriteDraft:
    fields = {
        "keyspace": keyspace,
        "table": table,
        "partition_key": ("k", 1),
        "rows": rows,
    } | changes
    return WriteDraft(**fields)


def row(*cells: CellDraft, clustering=(5, b"x"), delete: bool = False) -> RowDraft:
    return RowDraft(clustering, cells, delete)
