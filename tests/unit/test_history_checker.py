"""The history checker (epochal.sim.history) catches planted bad histories and passes good ones.

Good histories come from a model that is right by construction: every operation takes effect
at one instant between its invocation and its completion (or never, for some indeterminate
ones), and a read returns the rows live at its instant. Bad ones are planted by hand, one per
rule, and by removing an established row from a later read of a good history.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.sim.history import (
    FLAP,
    LOST,
    LOST_AT_END,
    MALFORMED,
    NOT_MONOTONIC,
    PHANTOM,
    RESURRECTED,
    Kind,
    Op,
    Outcome,
    check,
    from_record,
    to_record,
)


class History:
    """Builds ops with increasing indexes."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _add(self, **fields: object) -> Op:
        op = Op(index=len(self.ops), **fields)  # type: ignore[arg-type]
        self.ops.append(op)
        return op

    def write(
        self, row: str, invoke: float, complete: float | None, outcome: Outcome = Outcome.OK
    ) -> Op:
        return self._add(
            process="w1",
            kind=Kind.WRITE,
            partition=0,
            invoke=invoke,
            complete=complete,
            outcome=outcome,
            row=row,
            value=f"v-{row}",
        )

    def delete(
        self, row: str, invoke: float, complete: float | None, outcome: Outcome = Outcome.OK
    ) -> Op:
        return self._add(
            process="w1",
            kind=Kind.DELETE,
            partition=0,
            invoke=invoke,
            complete=complete,
            outcome=outcome,
            row=row,
        )

    def read(self, invoke: float, complete: float, *rows: str, partition: int = 0) -> Op:
        return self._add(
            process="r1",
            kind=Kind.READ,
            partition=partition,
            invoke=invoke,
            complete=complete,
            outcome=Outcome.OK,
            rows={row: f"v-{row}" for row in rows},
        )

    def rules(self, final: tuple[Op, ...] | None = None) -> set[str]:
        return set(check(self.ops, final).counts)


def test_a_write_acknowledged_before_a_read_started_must_be_in_it() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.read(3.0, 4.0)
    assert h.rules() == {LOST}


def test_a_read_concurrent_with_the_write_may_miss_it_and_a_later_one_may_not() -> None:
    h = History()
    h.write("a", 1.0, 3.0)
    h.read(2.0, 4.0)  # started before the acknowledgement
    assert h.rules() == set()
    h.read(3.5, 5.0)
    assert h.rules() == {LOST}


def test_an_acknowledged_row_a_read_returned_must_be_in_every_later_read() -> None:
    h = History()
    h.write("a", 1.0, 9.0)  # acknowledged late
    h.read(2.0, 3.0, "a")
    h.read(4.0, 5.0)  # started after the first read completed: not monotonic
    assert h.rules() == {NOT_MONOTONIC}


def test_an_unacknowledged_write_once_returned_must_not_flap() -> None:
    h = History()
    h.write("a", 1.0, 2.0, Outcome.INFO)
    h.read(3.0, 4.0)  # not yet applied anywhere: fine
    h.read(5.0, 6.0, "a")
    h.read(5.5, 6.5)  # overlaps the read that returned it: fine
    assert h.rules() == set()
    h.read(7.0, 8.0)
    assert h.rules() == {FLAP}


def test_a_delete_in_flight_excuses_a_missing_row() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.delete("a", 3.0, None, Outcome.INFO)
    h.read(2.5, 4.0)
    assert h.rules() == set()


def test_an_acknowledged_delete_must_stay_deleted() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.delete("a", 3.0, 4.0)
    h.read(3.5, 4.5, "a")  # concurrent with the delete: may still see it
    assert h.rules() == set()
    h.read(5.0, 6.0, "a")
    assert h.rules() == {RESURRECTED}


def test_an_unacknowledged_delete_once_seen_must_not_flap() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.delete("a", 3.0, 4.0, Outcome.INFO)
    h.read(5.0, 6.0)  # the delete took effect
    h.read(7.0, 8.0, "a")  # and the row came back
    assert h.rules() == {RESURRECTED}


def test_nothing_is_read_that_was_never_written() -> None:
    h = History()
    h.read(1.0, 2.0, "ghost")
    assert h.rules() == {PHANTOM}

    h = History()
    h.write("a", 3.0, 4.0)
    h.read(1.0, 2.0, "a")  # returned before its write was invoked
    assert h.rules() == {PHANTOM}

    h = History()
    h.write("a", 1.0, 2.0)
    h.ops.append(
        Op(
            index=1,
            process="r1",
            kind=Kind.READ,
            partition=0,
            invoke=3.0,
            complete=4.0,
            outcome=Outcome.OK,
            rows={"a": "another value"},
        )
    )
    assert h.rules() == {PHANTOM}


def test_a_row_whose_write_failed_or_of_another_partition_is_a_phantom() -> None:
    h = History()
    h.write("a", 1.0, 2.0, Outcome.FAIL)  # refused before anything was stored
    h.read(3.0, 4.0, "a")
    assert h.rules() == {PHANTOM}

    h = History()
    h.write("a", 1.0, 2.0)
    h.read(3.0, 4.0, partition=1)  # misses nothing of partition 1 ...
    h.ops[-1] = _with_rows(h.ops[-1], {"a": "v-a"})  # ... but returns partition 0's row
    assert h.rules() == {PHANTOM}


def test_every_acknowledged_write_is_in_the_final_reads() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.write("b", 1.0, 2.0, Outcome.INFO)  # may or may not be there
    final = Op(
        index=99,
        process="final",
        kind=Kind.READ,
        partition=0,
        invoke=10.0,
        complete=11.0,
        outcome=Outcome.OK,
        rows={},
    )
    assert LOST_AT_END in h.rules((final,))
    assert check(h.ops, ()).counts == {LOST_AT_END: 1}  # no final read at all


def test_a_row_written_twice_is_a_malformed_history() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.write("a", 3.0, 4.0)
    assert MALFORMED in h.rules()


def test_reads_of_other_partitions_are_not_compared() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.read(3.0, 4.0, partition=1)
    assert h.rules() == set()


def test_records_round_trip() -> None:
    h = History()
    h.write("a", 1.0, 2.0)
    h.read(3.0, 4.0, "a")
    assert [from_record(to_record(op)) for op in h.ops] == h.ops


# ------------------------------------------------------------------ a model that is right


def model_history(seed: int, operations: int = 120) -> tuple[list[Op], list[Op]]:
    """Operations on one partition that each take effect at one instant within their
    interval (some indeterminate writes and deletes never do); reads see the state at
    theirs."""
    rng = random.Random(seed)
    events: list[tuple[float, str, Op]] = []  # (effect time, "write"/"delete", op)
    ops: list[Op] = []
    written: list[str] = []
    clock = 0.0
    for index in range(operations):
        clock += rng.random()
        invoke = clock
        complete = invoke + rng.random() * 3
        effect = rng.uniform(invoke, complete)
        roll = rng.random()
        if roll < 0.45 or not written:
            outcome = Outcome.OK if rng.random() < 0.8 else Outcome.INFO
            row = f"r{index}"
            applied = outcome is Outcome.OK or rng.random() < 0.5
            if outcome is Outcome.INFO and applied:
                effect = rng.uniform(invoke, complete + 5)  # may land after the timeout
            op = Op(
                index=index,
                process="w",
                kind=Kind.WRITE,
                partition=0,
                invoke=invoke,
                complete=complete,
                outcome=outcome,
                row=row,
                value=f"v{index}",
            )
            if outcome is Outcome.OK:
                written.append(row)
            if applied:
                events.append((effect, "write", op))
        elif roll < 0.6:
            row = written.pop(rng.randrange(len(written)))
            outcome = Outcome.OK if rng.random() < 0.8 else Outcome.INFO
            op = Op(
                index=index,
                process="w",
                kind=Kind.DELETE,
                partition=0,
                invoke=max(invoke, _completed(ops, row) + 0.01),
                complete=max(complete, _completed(ops, row) + 0.02),
                outcome=outcome,
                row=row,
            )
            if outcome is Outcome.OK or rng.random() < 0.5:
                events.append((rng.uniform(op.invoke, op.complete), "delete", op))
        else:
            op = Op(
                index=index,
                process="r",
                kind=Kind.READ,
                partition=0,
                invoke=invoke,
                complete=complete,
                outcome=Outcome.OK,
                rows={"": ""},  # placeholder: filled in below
            )
            events.append((effect, "read", op))
        ops.append(op)
    live: dict[str, str] = {}
    reads: dict[int, Op] = {}
    for _, what, op in sorted(events, key=lambda e: e[0]):
        if what == "write":
            live[op.row] = op.value
        elif what == "delete":
            live.pop(op.row, None)
        else:
            reads[op.index] = _with_rows(op, dict(live))
    ops = [reads.get(op.index, op) for op in ops]
    final = _with_rows(
        Op(
            index=operations,
            process="final",
            kind=Kind.READ,
            partition=0,
            invoke=clock + 100,
            complete=clock + 101,
            outcome=Outcome.OK,
        ),
        dict(live),
    )
    return ops, [final]


def _completed(ops: list[Op], row: str) -> float:
    return next(op.complete or 0.0 for op in ops if op.kind is Kind.WRITE and op.row == row)


def _with_rows(op: Op, rows: dict[str, str]) -> Op:
    return Op(
        index=op.index,
        process=op.process,
        kind=op.kind,
        partition=op.partition,
        invoke=op.invoke,
        complete=op.complete,
        outcome=op.outcome,
        rows=rows,
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_histories_of_a_correct_model_pass(seed: int) -> None:
    ops, final = model_history(seed)
    verdict = check(ops, final)
    assert verdict.ok, [str(v) for v in verdict.violations]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.randoms(use_true_random=False))
def test_dropping_an_established_row_from_a_later_read_is_caught(seed: int, rng) -> None:  # type: ignore[no-untyped-def]
    ops, final = model_history(seed)
    verdict = check(ops, final)
    assert verdict.ok
    # A row some read returned (or whose write was acknowledged) before a later read started,
    # with no delete invoked before that read completed: planting its absence must be caught.
    candidates = []
    for read in (op for op in ops if op.kind is Kind.READ):
        for op in ops:
            if op.kind is not Kind.WRITE or op.row not in _rows_seen_before(ops, read, op):
                continue
            deletes = [d for d in ops if d.kind is Kind.DELETE and d.row == op.row]
            if not deletes or deletes[0].invoke >= (read.complete or 0.0):
                candidates.append((read, op.row))
    if not candidates:
        return
    read, row = rng.choice(candidates)
    rows = {k: v for k, v in read.rows.items() if k != row}
    planted = [_with_rows(op, rows) if op is read else op for op in ops]
    assert set(check(planted, final).counts) & {LOST, NOT_MONOTONIC, FLAP}


def _rows_seen_before(ops: list[Op], read: Op, write: Op) -> set[str]:
    """The row of ``write`` if it was acknowledged, or returned by a read that completed,
    before ``read`` started."""
    if write.outcome is Outcome.OK and (write.complete or 0.0) < read.invoke:
        return {write.row}
    for other in ops:
        if (
            other.kind is Kind.READ
            and (other.complete or 0.0) < read.invoke
            and write.row in other.rows
        ):
            return {write.row}
    return set()
