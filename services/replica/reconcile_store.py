"""The replica's reconciliation marks (epochal.mtrack.marks): per keyspace, its fences, low bounds
and the highest lease token seen, each a ``RangeMarks`` in memory and its pieces on disk.

A mark is written in the data connection's transaction of what it allows — a fence with the
writes admitted before it, a low bound with the deletion of the log entries below it — and the
copy in memory changes only once that transaction committed (``stage`` then ``committed``), so
what this replica says of its marks is always what a restart would read back.
"""

from __future__ import annotations

import enum
from typing import Any

from epochal.mtrack.marks import Mark, RangeMarks
from epochal.replica.database import ReplicaDatabase
from epochal.runtime.database import transaction
from epochal.tcm.tokens import TokenRange


class MarkKind(enum.Enum):
    FENCE = "fence"  # writes with ids below it are refused for the range
    LOW_BOUND = "low_bound"  # ids below it are reconciled: their log entries are deleted
    LEASE = "lease"  # the highest reconciler lease token seen for the range


_INSERT = (
    "INSERT INTO reconcile_marks (keyspace, kind, range_left, range_right, mark) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (keyspace, kind, range_left, range_right) "
    "DO UPDATE SET mark = excluded.mark"
)
_DELETE = (
    "DELETE FROM reconcile_marks "
    "WHERE keyspace = ? AND kind = ? AND range_left = ? AND range_right = ?"
)
_DELETE_LOG_BELOW = (
    "DELETE FROM mutations WHERE keyspace = ? AND hlc < ? AND token > ? AND token <= ?"
)

Key = tuple[str, MarkKind]
NO_MARKS = RangeMarks()


class ReconcileStore:
    def __init__(self, db: ReplicaDatabase) -> None:
        self._db = db
        pieces: dict[Key, list[Mark]] = {}
        for keyspace, kind, left, right, mark in db.query(
            "SELECT keyspace, kind, range_left, range_right, mark FROM reconcile_marks"
        ):
            pieces.setdefault((keyspace, MarkKind(kind)), []).append(
                Mark(TokenRange(left, right), mark)
            )
        self._marks = {key: RangeMarks.of_pieces(found) for key, found in pieces.items()}
        self.version = 0  # rises with every committed change: caches of answers check it

    def transaction(self) -> Any:
        """A durable transaction on the data connection, for a mark and what it allows."""
        return transaction(self._db.raw)

    def marks(self, keyspace: str, kind: MarkKind) -> RangeMarks:
        return self._marks.get((keyspace, kind), NO_MARKS)

    def stage(
        self,
        cursor: Any,
        keyspace: str,
        kind: MarkKind,
        token_range: TokenRange,
        mark: int,
        *,
        base: RangeMarks | None = None,
    ) -> RangeMarks:
        """Write, in ``cursor``'s transaction, ``token_range`` marked at ``mark`` over ``base``
        (default: the committed marks); returns the marks to pass to ``committed`` once the
        transaction committed."""
        before = self.marks(keyspace, kind) if base is None else base
        after = before.raised(token_range, mark)
        if after is before:
            return after
        for piece in set(before.pieces) - set(after.pieces):
            cursor.execute(_DELETE, (keyspace, kind.value, piece.range.left, piece.range.right))
        for piece in set(after.pieces) - set(before.pieces):
            cursor.execute(
                _INSERT,
                (keyspace, kind.value, piece.range.left, piece.range.right, piece.hlc),
            )
        return after

    def committed(self, keyspace: str, kind: MarkKind, marks: RangeMarks) -> None:
        if self._marks.get((keyspace, kind)) is not marks:
            self._marks[(keyspace, kind)] = marks
            self.version += 1

    @staticmethod
    def delete_log_below(cursor: Any, keyspace: str, token_range: TokenRange, bound: int) -> int:
        """Delete, in ``cursor``'s transaction, the log entries of ``keyspace`` whose token is in
        ``token_range`` and whose id is below ``bound`` (the data stays); how many."""
        deleted = 0
        for left, right in token_range.pieces():
            cursor.execute(_DELETE_LOG_BELOW, (keyspace, bound, left, right))
            deleted += cursor.rowcount
        return deleted
