"""A checker of recorded client histories (Jepsen's method) for QUORUM reads and writes. Pure.

Theory of operation
-------------------
A run records every client operation on a table whose rows are written once: its process, its
partition and row, when it was invoked and when it completed (seconds on one clock), and its
outcome — ``ok`` (acknowledged), ``info`` (indeterminate: a timeout or an unavailable error; it
may have taken effect, now or later) or ``fail`` (refused before anything was stored). A write
creates one new row with one value; a writer deletes only rows it wrote, after their write was
acknowledged; a read returns the rows of one partition. A write the SDK retried under several
mutation ids is still one operation here: rows, not ids, are what is checked.

A row is *established* from the earliest of: its write's acknowledgement, or the completion of
a read that returned it. From then on every read invoked later must return it, unless the row's
delete was invoked before that read completed (the delete may then have taken effect). That one
rule covers both properties a QUORUM read promises:

- every row acknowledged before a read started is in it (the acknowledgement establishes it);
- reads are monotonic, and an unacknowledged write, once returned, stays returned (a read
  establishes it; a later read that misses it is a *flap* when the write was never
  acknowledged).

Deletes mirror it: a delete is *established* from its acknowledgement, or from the completion of
a read that missed the row although the row was established before that read started and the
delete had been invoked before it completed. A read invoked after that must not return the row.

Finally nothing is read that was never written (a row with no write invoked before the read
completed, with another value, of another partition, or whose write certainly failed), and
every acknowledged write whose row has no delete at all is in the final reads, taken after the
faults are healed.

Each violation names the property, the read, the row and the operation that established the
row, so a failure can be traced back to the servers' logs and spans.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field


class Kind(enum.Enum):
    WRITE = "write"
    DELETE = "delete"
    READ = "read"


class Outcome(enum.Enum):
    OK = "ok"
    INFO = "info"  # indeterminate: may have taken effect
    FAIL = "fail"  # certainly did not take effect


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One client operation. ``row`` names the row written or deleted; ``rows`` is what a read
    returned (row -> value). ``complete`` is None for an operation still running at the end."""

    index: int
    process: str
    kind: Kind
    partition: int
    invoke: float
    complete: float | None
    outcome: Outcome
    row: str = ""
    value: str = ""
    rows: Mapping[str, str] = field(default_factory=dict)
    detail: str = ""  # what the client saw (coordinator, repaired mutations, error text)

    def __post_init__(self) -> None:
        if self.complete is not None and self.complete < self.invoke:
            raise ValueError(f"op {self.index} completes before it is invoked")
        if self.kind is not Kind.READ and not self.row:
            raise ValueError(f"op {self.index}: a {self.kind.value} names its row")
        if self.kind is Kind.READ and self.outcome is Outcome.OK and self.complete is None:
            raise ValueError(f"op {self.index}: an acknowledged read has a completion time")

    @property
    def acknowledged(self) -> bool:
        return self.outcome is Outcome.OK and self.complete is not None


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    read: int  # the index of the offending read (or -1)
    row: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


# The rules, by name.
LOST = "lost"  # an acknowledged write missing from a read that started after it
NOT_MONOTONIC = "not_monotonic"  # an acknowledged row a read returned, missing later
FLAP = "flap"  # an unacknowledged row a read returned, missing later
RESURRECTED = "resurrected"  # a deleted row returned after its delete was established
PHANTOM = "phantom"  # a row or value that was never written
LOST_AT_END = "lost_at_end"  # an acknowledged write not in the final reads
MALFORMED = "malformed"  # the history breaks its own rules (row written twice...)


@dataclass(slots=True)
class _Row:
    partition: int
    write: Op | None = None
    delete: Op | None = None
    established: float | None = None
    established_by: str = ""
    deleted: float | None = None
    deleted_by: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """``counts``: violations by rule; ``violations``: the first ``limit`` of each rule."""

    counts: Mapping[str, int]
    violations: tuple[Violation, ...]
    reads_checked: int
    rows_checked: int

    @property
    def ok(self) -> bool:
        return not self.counts


Report = Callable[[Violation], None]


def check(
    ops: Sequence[Op], final_reads: Iterable[Op] | None = None, *, limit: int = 50
) -> Verdict:
    """Every violation in ``ops``, and in the ``final_reads`` (one per partition, taken after
    the faults were healed; None: the run has none, so the end is not checked)."""
    found: list[Violation] = []
    counts: dict[str, int] = {}

    def report(violation: Violation) -> None:
        counts[violation.rule] = counts.get(violation.rule, 0) + 1
        if counts[violation.rule] <= limit:
            found.append(violation)

    rows = _rows(ops, report)
    reads = [op for op in ops if op.kind is Kind.READ and op.acknowledged]
    _establish(rows, reads)
    index = _Index(rows)
    for read in reads:
        _check_read(read, rows, index, report)
    finals = [op for op in final_reads or () if op.acknowledged]
    for read in finals:
        _check_read(read, rows, index, report)
    if final_reads is not None:
        _check_end(rows, finals, report)
    return Verdict(dict(counts), tuple(found), len(reads) + len(finals), len(rows))


def _rows(ops: Sequence[Op], report: Report) -> dict[str, _Row]:
    rows: dict[str, _Row] = {}
    for op in ops:
        if op.kind is Kind.READ:
            continue
        row = rows.setdefault(op.row, _Row(op.partition))
        if op.kind is Kind.WRITE:
            if row.write is not None:
                report(Violation(MALFORMED, -1, op.row, f"row {op.row} is written twice"))
                continue
            row.write = op
        else:
            if row.write is None or row.write.process != op.process:
                report(Violation(MALFORMED, -1, op.row, f"row {op.row} is deleted by a non-writer"))
            row.delete = op
    return rows


def _establish(rows: dict[str, _Row], reads: Sequence[Op]) -> None:
    """When each row (and each delete) became established: acknowledgement or first read."""
    for row in rows.values():
        if row.write is not None and row.write.acknowledged:
            row.established, row.established_by = row.write.complete, f"write op {row.write.index}"
        if row.delete is not None and row.delete.acknowledged:
            row.deleted, row.deleted_by = row.delete.complete, f"delete op {row.delete.index}"
    for read in sorted(reads, key=lambda r: r.complete or 0.0):
        assert read.complete is not None
        for name in read.rows:
            row = rows.get(name)
            if row is not None and (row.established is None or read.complete < row.established):
                row.established, row.established_by = read.complete, f"read op {read.index}"
    # A read that missed an established row whose delete it may have seen establishes the delete.
    by_partition: dict[int, list[tuple[str, _Row]]] = {}
    for name, row in rows.items():
        if row.delete is not None and row.established is not None:
            by_partition.setdefault(row.partition, []).append((name, row))
    for read in reads:
        assert read.complete is not None
        for name, row in by_partition.get(read.partition, ()):
            assert row.delete is not None and row.established is not None
            if (
                name not in read.rows
                and row.established < read.invoke
                and row.delete.invoke < read.complete
                and (row.deleted is None or read.complete < row.deleted)
            ):
                row.deleted, row.deleted_by = read.complete, f"read op {read.index}"


class _Index:
    """Per partition, the established rows sorted by when they were established."""

    def __init__(self, rows: Mapping[str, _Row]) -> None:
        by_partition: dict[int, list[tuple[float, str]]] = {}
        for name, row in rows.items():
            if row.established is not None:
                by_partition.setdefault(row.partition, []).append((row.established, name))
        self._times: dict[int, list[float]] = {}
        self._names: dict[int, list[str]] = {}
        for partition, entries in by_partition.items():
            entries.sort()
            self._times[partition] = [t for t, _ in entries]
            self._names[partition] = [n for _, n in entries]

    def established_before(self, partition: int, moment: float) -> list[str]:
        times = self._times.get(partition, [])
        return self._names.get(partition, [])[: bisect.bisect_left(times, moment)]


def _check_read(read: Op, rows: Mapping[str, _Row], index: _Index, report: Report) -> None:
    assert read.complete is not None
    for name, value in read.rows.items():
        row = rows.get(name)
        write = row.write if row is not None else None
        if (
            write is None
            or write.invoke > read.complete
            or write.value != value
            or write.outcome is Outcome.FAIL
            or write.partition != read.partition
        ):
            why = "never written" if write is None else _why_phantom(write, read)
            report(
                Violation(
                    PHANTOM,
                    read.index,
                    name,
                    f"read op {read.index} ({read.process}, partition {read.partition}) returned "
                    f"row {name}={value!r}, {why}",
                )
            )
            continue
        assert row is not None
        if row.deleted is not None and row.deleted < read.invoke:
            report(
                Violation(
                    RESURRECTED,
                    read.index,
                    name,
                    f"read op {read.index} ({read.process}, invoked {read.invoke:.3f}) returned "
                    f"row {name}, deleted as of {row.deleted:.3f} by {row.deleted_by}",
                )
            )
    for name in index.established_before(read.partition, read.invoke):
        if name in read.rows:
            continue
        row = rows[name]
        if _may_be_deleted(row, read.complete):
            continue
        assert row.write is not None and row.established is not None
        if row.established_by.startswith("write"):
            rule = LOST
        else:
            rule = NOT_MONOTONIC if row.write.acknowledged else FLAP
        report(
            Violation(
                rule,
                read.index,
                name,
                f"read op {read.index} ({read.process}, partition {read.partition}, "
                f"{read.invoke:.3f}-{read.complete:.3f}; {read.detail}) missed row {name}, "
                f"established at {row.established:.3f} by {row.established_by} "
                f"(write op {row.write.index} {row.write.outcome.value}, "
                f"{row.write.invoke:.3f}-{_at(row.write.complete)}; {row.write.detail})",
            )
        )


def _check_end(rows: Mapping[str, _Row], finals: Sequence[Op], report: Report) -> None:
    seen = {op.partition: op for op in finals}
    for name, row in sorted(rows.items()):
        if row.write is None or not row.write.acknowledged or _may_be_deleted(row, None):
            continue
        final = seen.get(row.partition)
        if final is None:
            report(Violation(LOST_AT_END, -1, name, f"no final read of partition {row.partition}"))
        elif name not in final.rows:
            report(
                Violation(
                    LOST_AT_END,
                    final.index,
                    name,
                    f"acknowledged write op {row.write.index} of row {name} is not in the final "
                    f"read of partition {row.partition}",
                )
            )


def _why_phantom(write: Op, read: Op) -> str:
    if write.outcome is Outcome.FAIL:
        return f"whose write op {write.index} certainly failed"
    if write.partition != read.partition:
        return f"written to partition {write.partition}"
    if write.invoke > read.complete:
        return f"written only at {write.invoke:.3f}"
    return f"written as {write.value!r}"


def _may_be_deleted(row: _Row, before: float | None) -> bool:
    """Whether the row's delete may have taken effect (by ``before``; None: ever)."""
    delete = row.delete
    if delete is None or delete.outcome is Outcome.FAIL:
        return False
    return before is None or delete.invoke < before


def _at(moment: float | None) -> str:
    return "never" if moment is None else f"{moment:.3f}"


def to_record(op: Op) -> dict[str, object]:
    """``op`` as plain JSON values (a run saves its history; ``from_record`` reads it back)."""
    return {
        "index": op.index,
        "process": op.process,
        "kind": op.kind.value,
        "partition": op.partition,
        "invoke": op.invoke,
        "complete": op.complete,
        "outcome": op.outcome.value,
        "row": op.row,
        "value": op.value,
        "rows": dict(op.rows),
        "detail": op.detail,
    }


def from_record(record: Mapping[str, object]) -> Op:
    complete = record["complete"]
    return Op(
        index=int(record["index"]),  # type: ignore[call-overload]
        process=str(record["process"]),
        kind=Kind(record["kind"]),
        partition=int(record["partition"]),  # type: ignore[call-overload]
        invoke=float(record["invoke"]),  # type: ignore[arg-type]
        complete=None if complete is None else float(complete),  # type: ignore[arg-type]
        outcome=Outcome(record["outcome"]),
        row=str(record.get("row", "")),
        value=str(record.get("value", "")),
        rows=dict(record.get("rows", {})),  # type: ignore[call-overload]
        detail=str(record.get("detail", "")),
    )


__all__ = [
    "FLAP",
    "LOST",
    "LOST_AT_END",
    "MALFORMED",
    "NOT_MONOTONIC",
    "PHANTOM",
    "RESURRECTED",
    "Kind",
    "Op",
    "Outcome",
    "Verdict",
    "Violation",
    "check",
    "from_record",
    "to_record",
]
