"""The replica's reconciliation marks (epochal.mtrack.marks): per keyspace, its fences, low bounds
and the highest lease token seen, each a ``RangeMarks`` in memory and its pieces on disk; and the
cohorts it holds (epochal.mtrack.cohorts), by id.

A mark is written in the data connection's transaction of what it allows — a fence with the
writes admitted before it, a low bound with the deletion of the log entries below it — and the
copy in memory changes only once that transaction committed (``stage`` then ``committed``), so
what this replica says of its marks is always what a restart would read back.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import Any

from epochal.mtrack.cohorts import Cohort, CohortMark
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

_LOG_BELOW = "SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM mutations " + (
    "WHERE keyspace = ? AND hlc < ? AND token > ? AND token <= ?"
)
_UPSERT_COHORT = (
    "INSERT INTO cohorts (keyspace, cohort_id, range_left, range_right, members, low, high, "
    "folded_high, mutations, bytes, formed_unix_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (keyspace, cohort_id) DO UPDATE SET high = excluded.high, "
    "folded_high = excluded.folded_high, mutations = excluded.mutations, bytes = excluded.bytes"
)

Key = tuple[str, MarkKind]
NO_MARKS = RangeMarks()
Cohorts = dict[int, Cohort]  # one keyspace's, by id


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
        self._cohorts: dict[str, Cohorts] = {}
        for row in db.query(
            "SELECT keyspace, cohort_id, range_left, range_right, members, low, high, "
            "folded_high, mutations, bytes, formed_unix_ms FROM cohorts"
        ):
            keyspace, cohort = row[0], _cohort_of(row)
            self._cohorts.setdefault(keyspace, {})[cohort.id] = cohort
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

    @staticmethod
    def log_below(
        cursor: Any, keyspace: str, token_range: TokenRange, bound: int
    ) -> tuple[int, int]:
        """How many log entries of ``keyspace`` in ``token_range`` are below ``bound``, and
        their bytes (in ``cursor``'s transaction)."""
        entries = size = 0
        for left, right in token_range.pieces():
            cursor.execute(_LOG_BELOW, (keyspace, bound, left, right))
            count, total = cursor.fetchone()
            entries, size = entries + int(count), size + int(total)
        return entries, size

    # ------------------------------------------------------------------ cohorts

    @staticmethod
    def tag_cohort(
        cursor: Any, keyspace: str, token_range: TokenRange, bound: int, cohort_id: int
    ) -> None:
        """Record, in ``cursor``'s transaction, the partitions the log entries of
        ``token_range`` below ``bound`` wrote as ``cohort_id``'s data."""
        for left, right in token_range.pieces():
            cursor.execute(
                "INSERT OR IGNORE INTO cohort_partitions (cohort_id, table_id, token, pkey) "
                "SELECT DISTINCT ?, table_id, token, pkey FROM mutations "
                "WHERE keyspace = ? AND hlc < ? AND token > ? AND token <= ?",
                (cohort_id, keyspace, bound, left, right),
            )

    def cohorts(self, keyspace: str, token_range: TokenRange | None = None) -> list[Cohort]:
        """The cohorts held of ``keyspace`` (those intersecting ``token_range``), by id."""
        held = self._cohorts.get(keyspace, {})
        return [
            c
            for _, c in sorted(held.items())
            if token_range is None or c.range.intersects(token_range)
        ]

    def cohort(self, keyspace: str, cohort_id: int) -> Cohort | None:
        return self._cohorts.get(keyspace, {}).get(cohort_id)

    def cohort_marks_at(self, keyspace: str, token: int) -> tuple[CohortMark, ...]:
        """What a summary of a partition at ``token`` names: the cohorts held there."""
        held = self._cohorts.get(keyspace)
        if not held:
            return ()
        return tuple(c.mark for _, c in sorted(held.items()) if c.range.contains(token))

    def stage_cohort(self, cursor: Any, cohort: Cohort) -> Cohorts:
        """Write ``cohort`` as held, merged with this replica's record of it (its high and how
        far its own folds went only rise; a record's own counts stay unless a fold adds to
        them), in ``cursor``'s transaction; returns the keyspace's cohorts to pass to
        ``cohorts_committed``."""
        held = dict(self._cohorts.get(cohort.keyspace, {}))
        before = held.get(cohort.id)
        if before is not None:
            cohort = replace(
                before,
                high=max(before.high, cohort.high),
                folded=max(before.folded, cohort.folded),
                mutations=max(before.mutations, cohort.mutations),
                bytes=max(before.bytes, cohort.bytes),
            )
            if cohort == before:
                return held
        cursor.execute(
            _UPSERT_COHORT,
            (
                cohort.keyspace,
                cohort.id,
                cohort.range.left,
                cohort.range.right,
                ",".join(cohort.members),
                cohort.low,
                cohort.high,
                cohort.folded,
                cohort.mutations,
                cohort.bytes,
                cohort.formed_unix_ms,
            ),
        )
        held[cohort.id] = cohort
        return held

    def stage_forget(self, cursor: Any, keyspace: str, bounds: RangeMarks) -> Cohorts:
        """Forget, in ``cursor``'s transaction, the cohorts whose whole range has a low bound of
        at least their high in ``bounds``: everything they covered is below the bound."""
        held = dict(self._cohorts.get(keyspace, {}))
        for cohort in list(held.values()):
            if bounds.lowest(cohort.range) >= cohort.high:
                cursor.execute(
                    "DELETE FROM cohorts WHERE keyspace = ? AND cohort_id = ?",
                    (keyspace, cohort.id),
                )
                cursor.execute("DELETE FROM cohort_partitions WHERE cohort_id = ?", (cohort.id,))
                del held[cohort.id]
        return held

    def cohorts_committed(self, keyspace: str, held: Cohorts) -> None:
        if self._cohorts.get(keyspace) != held:
            self._cohorts[keyspace] = held
            self.version += 1


def _cohort_of(row: tuple[Any, ...]) -> Cohort:
    _, cohort_id, left, right, members, low, high, folded, mutations, size, formed = row
    return Cohort(
        id=int(cohort_id),
        keyspace=row[0],
        range=TokenRange(int(left), int(right)),
        members=tuple(members.split(",")),
        low=int(low),
        high=int(high),
        folded=int(folded),
        mutations=int(mutations),
        bytes=int(size),
        formed_unix_ms=int(formed),
    )
