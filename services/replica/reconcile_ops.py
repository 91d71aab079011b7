"""What the reconciliation marks do where a write is admitted to the log (the replica's group
commit, ``LocalReplica._flush``), and the reconciler's two operations on them.

Theory of operation
-------------------
The replica stores writes in group commits: everything queued during one pass of the event loop
is one durable transaction. The reconciler's operations go through the same queue, in order:

* **A fence** (``RaiseFence``) at *t* refuses, from its place in the queue on, every new write
  to the range whose id is below *t* (``Outcome.FENCED``: the coordinator retries with a fresh
  id). The writes queued before it are stored first, in their own transaction, and the fence is
  acknowledged only once it is durable — so every write admitted below *t* is durable when the
  reconciler learns the fence holds, and none is admitted after. The check is made here, where
  a write enters the log, not when it arrives: a write that passed an earlier check is never
  queued behind the fence. A mutation delivered by reconciliation or read repair is not a new
  write: it passes the fence (its id exists elsewhere, and the round is collecting it). A new
  write whose id this replica holds already, the same, is acknowledged and not stored
  (``HELD``): a client's retry of a write stored here before the fence (``Admission._verdict``
  says why that is safe).
* **A low bound** (``AdvanceLowBound``) to *t* carries the old bounds per token (the highest
  any replica holds) and the digests of the ids in ``[old bound, t)`` every replica reported
  (``epochal.mtrack.reconciliation.span_digests``); a replica whose own digests of that span
  differ, or whose own bound is above the old one somewhere, refuses (``Outcome.MISMATCH``).
  Otherwise it deletes its log entries below *t* in the range (the data stays), records the
  bound and raises the range's fence to *t* too (a write below the bound would be lost to every
  summary), in one transaction. A delivery or repair of an id
  below the bound is dropped from then on (acknowledged, not stored): re-applying one could
  bring back a purged delete.
* Both carry the reconciler's **lease token**; one below the highest the replica has seen for
  the range is refused (``Outcome.SUPERSEDED``) and the highest is recorded in the transaction
  of the operation it allows (``epochal.mtrack.leases``, rule 1). Rule 2 — refuse a token not
  renewed here within the lease — is ``reconcile_node``'s, which checks it before it queues the
  operation.

**A cohort fold** (``FoldCohort``) to *t* is a low bound's advance among the cohort's members
only (``epochal.mtrack.cohorts``): the same checks (lease, old bounds, the agreed digests of
``[old bound, t)``), then, in one transaction, the fence rises to *t*, the partitions the log
entries below *t* wrote are recorded as the cohort's data, those entries are deleted — their
ids are reconciled by the cohort — and the cohort is recorded as held (and folded here) up to
*t* with what it folded; the low bound stays. **A cohort hold** (``HoldCohort``)
records a cohort whose data was delivered here. An advance carries the cohorts every replica
reported holding in the range; a replica holding others refuses (a replica lacking one would
have its ids counted as reconciled without their data), and the advance forgets the cohorts the
new bound passes.

Writes queued after a fence in the same pass are judged against it as if it will hold (a fence
that is then refused only cost those writes a retry); a low bound drops deliveries only once it
is committed.

**The write timeout's fence.** Besides the reconciler's fences, a new tracked write whose id is
older than the replica's write timeout (by its own clock) is refused the same way: no
coordinator still waits for it (it is a client's retry of an old write, or a late copy), and it
keeps a replica that holds no fence for a range — one new to it (a joining node, one taking a
leaving node's ranges) or one whose marks the others' rounds raised before it replicated the
range — from storing, alone, an id below the others' low bound, which no round would compare or
deliver again. It holds whatever a replica knows: every *t* is at least the write timeout and a
slack of at least the clock skew behind every replica's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from epochal.mtrack import LogDigests
from epochal.mtrack.cohorts import Cohort, CohortMark, finished
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.reconciliation import span_digests
from epochal.replica.data_store import DataStore
from epochal.replica.model import Mutation
from epochal.replica.reconcile_store import MarkKind, ReconcileStore
from epochal.tcm import ClusterMetadata
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange


@dataclass(frozen=True, slots=True, kw_only=True)
class RaiseFence:
    keyspace: str
    range: TokenRange
    hlc: int
    token: int  # the reconciler's lease token


@dataclass(frozen=True, slots=True, kw_only=True)
class AdvanceLowBound:
    keyspace: str
    range: TokenRange
    old_bounds: RangeMarks  # per token, the highest low bound any replica of the range holds
    new_bound: int
    digests: LogDigests  # span_digests of [old bound, new_bound), as every replica reported
    token: int
    cohorts: tuple[CohortMark, ...] = ()  # the cohorts every replica holds in the range


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldCohort:
    keyspace: str
    range: TokenRange
    old_bounds: RangeMarks  # as AdvanceLowBound's, among the members
    new_bound: int  # the cohort's new high
    digests: LogDigests
    token: int
    cohort: Cohort  # its id, members and low (its high: new_bound)
    node_id: str  # this replica (a member)


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldCohort:
    keyspace: str
    range: TokenRange
    token: int
    cohort: Cohort  # delivered here up to its high


MarkOp = RaiseFence | AdvanceLowBound | FoldCohort | HoldCohort


def malformed(op: MarkOp) -> str:
    """Why no reconciler could have sent ``op`` ("" when it could)."""
    ends = (op.range.left, op.range.right)
    if not all(MIN_TOKEN <= end <= MAX_TOKEN for end in ends):
        return f"the range {op.range} is not one of tokens"
    marks = {"token": op.token}
    if isinstance(op, RaiseFence):
        marks["fence"] = op.hlc
    elif not isinstance(op, HoldCohort):
        marks["new_bound"] = op.new_bound
    for name, value in marks.items():
        if not 0 <= value <= MAX_HLC:
            return f"{name} {value} is not in 0..2^63-1"
    return ""


@dataclass(frozen=True, slots=True)
class Refusal:
    outcome: str  # an ``Outcome`` value: fenced, superseded, mismatch, not_a_replica
    message: str
    fence: int = 0  # fenced: the fence the write's id was below


DROP = "drop"  # a delivery below the low bound: acknowledged as reconciled, not stored
HELD = "held"  # a new write refused but for this: its id is held here, the same: acknowledged
Verdict = Refusal | Literal["drop", "held"] | None


class Admission:
    """The marks' side of one group commit: which writes are refused or dropped, and the
    operations performed after the writes queued before them are durable."""

    def __init__(self, store: ReconcileStore, data: DataStore) -> None:
        self.store = store
        self.data = data
        # The committed fence of each (keyspace, range) asked, while the marks do not change:
        # every tracked write asks, and a keyspace may hold many pieces.
        self._fences: dict[tuple[str, TokenRange], int] = {}
        self._fences_version = store.version

    def judge(
        self,
        metadata: ClusterMetadata,
        writes: list[tuple[Mutation, bytes, bool]],
        ops: list[tuple[int, MarkOp]],
        *,
        floor: int = 0,
    ) -> list[Verdict]:
        """Per queued write (``(mutation, body, delivered)``, in order; ``ops`` each with the
        number of writes queued before it): a Refusal, DROP or HELD (acknowledged, not stored),
        or None to store it. ``floor``: a new tracked write whose id is below it is refused like
        a fenced one (the write timeout's fence, module docstring)."""
        staged: dict[str, RangeMarks] = {}  # keyspace -> fences as the ops queued so far raise
        pending = sorted(ops, key=lambda op: op[0])
        verdicts: list[Verdict] = []
        for index, (mutation, body, delivered) in enumerate(writes):
            while pending and pending[0][0] <= index:
                _, op = pending.pop(0)
                if isinstance(op, HoldCohort):
                    continue
                # A low bound or a fold fences too (``perform``): the writes after are judged by it.
                fence = _fence_of(op)
                fences = staged.get(op.keyspace) or self.store.marks(op.keyspace, MarkKind.FENCE)
                staged[op.keyspace] = fences.raised(op.range, fence)
            verdicts.append(self._verdict(metadata, mutation, body, delivered, staged, floor))
        return verdicts

    def _verdict(
        self,
        metadata: ClusterMetadata,
        mutation: Mutation,
        body: bytes,
        delivered: bool,
        staged: dict[str, RangeMarks],
        floor: int,
    ) -> Verdict:
        if not mutation.tracked:
            return None
        if delivered:
            bound = self.store.marks(mutation.keyspace, MarkKind.LOW_BOUND).at(mutation.token)
            return DROP if mutation.id.hlc < bound else None
        refusal = self._refusal(metadata, mutation, staged, floor)
        # A retry of a write this replica stored before its fence (or its floor) passed the id:
        # it is durable here already, so the answer is OK and nothing is stored. Safe, because
        # a fence (and the floor) exists to freeze the set of ids below it at this replica —
        # no id joins it after — and answering OK for one already in that set adds none: the
        # round's digests, deliveries and advance see the same set either way. And true: OK
        # means durable here, which it is. An id the low bound (or a cohort fold) collected
        # has no log entry any more and stays refused: the coordinator's retry goes past the
        # fence under a fresh id, as before. Only an entry whole and the same counts (one
        # held by its id only, streamed without its body, is not known to be the same). Looked
        # up on the refusal path only: a write that passes costs nothing more.
        if refusal is not None and self.data.holds(mutation, body):
            return HELD
        return refusal

    def _refusal(
        self,
        metadata: ClusterMetadata,
        mutation: Mutation,
        staged: dict[str, RangeMarks],
        floor: int,
    ) -> Refusal | None:
        """Why a new tracked write may not enter the log here: its id is below the floor, or
        below its range's fence (committed, or raised by an operation queued before it)."""
        hlc = mutation.id.hlc
        if hlc < floor:
            return Refusal(
                "fenced",
                f"mutation {mutation.id} is older than the write timeout at this replica: retry "
                "with a fresh id",
                floor,
            )
        staged_fences = staged.get(mutation.keyspace)
        fences = staged_fences or self.store.marks(mutation.keyspace, MarkKind.FENCE)
        if not fences.pieces:
            return None  # never fenced: the common case costs no placement lookup
        token_range = metadata.token_range(mutation.keyspace, mutation.token)
        if token_range is None:
            return None  # the gate refused writes to tokens no placement holds
        fence = (
            staged_fences.of(token_range)
            if staged_fences is not None
            else self._committed_fence(mutation.keyspace, token_range)
        )
        if hlc < fence:
            return Refusal(
                "fenced",
                f"mutation {mutation.id} is below the reconciliation fence {fence} of range "
                f"{token_range} in {mutation.keyspace}: retry with a fresh id",
                fence,
            )
        return None

    def _committed_fence(self, keyspace: str, token_range: TokenRange) -> int:
        if self._fences_version != self.store.version:
            self._fences.clear()
            self._fences_version = self.store.version
        key = (keyspace, token_range)
        fence = self._fences.get(key)
        if fence is None:
            fence = self._fences[key] = self.store.marks(keyspace, MarkKind.FENCE).of(token_range)
        return fence

    def perform(self, op: MarkOp) -> Refusal | int:
        """One operation in one durable transaction, after the writes queued before it are
        durable: the log entries deleted (0 for a fence), or why it was refused."""
        leases = self.store.marks(op.keyspace, MarkKind.LEASE)
        highest = leases.of(op.range)
        if op.token < highest:
            return Refusal(
                "superseded",
                f"lease token {op.token} is below {highest}, the highest seen for {op.range} "
                f"in {op.keyspace}: another reconciler holds the range",
            )
        if isinstance(op, AdvanceLowBound | FoldCohort):
            refusal = self._check_digests(op) or self._check_cohorts(op)
            if refusal is not None:
                return refusal
        deleted = 0
        held = None
        with self.store.transaction() as cursor:
            staged = {
                MarkKind.LEASE: self.store.stage(
                    cursor, op.keyspace, MarkKind.LEASE, op.range, op.token
                ),
            }
            if not isinstance(op, HoldCohort):
                # A low bound or a fold fences too: no write may land below it after it.
                staged[MarkKind.FENCE] = self.store.stage(
                    cursor, op.keyspace, MarkKind.FENCE, op.range, _fence_of(op)
                )
            if isinstance(op, AdvanceLowBound):
                staged[MarkKind.LOW_BOUND] = self.store.stage(
                    cursor, op.keyspace, MarkKind.LOW_BOUND, op.range, op.new_bound
                )
                deleted = self.store.delete_log_below(cursor, op.keyspace, op.range, op.new_bound)
                held = self.store.stage_forget(cursor, op.keyspace, staged[MarkKind.LOW_BOUND])
            elif isinstance(op, FoldCohort):
                deleted, size = self.store.log_below(cursor, op.keyspace, op.range, op.new_bound)
                self.store.tag_cohort(cursor, op.keyspace, op.range, op.new_bound, op.cohort.id)
                self.store.delete_log_below(cursor, op.keyspace, op.range, op.new_bound)
                before = self.store.cohort(op.keyspace, op.cohort.id)
                folded = replace(
                    before or op.cohort,
                    high=max(op.new_bound, before.high if before else 0),
                    folded=max(op.new_bound, before.folded if before else 0),
                    mutations=(before.mutations if before else 0) + deleted,
                    bytes=(before.bytes if before else 0) + size,
                )
                held = self.store.stage_cohort(cursor, folded)
            elif isinstance(op, HoldCohort):  # delivered: nothing folded here
                delivered = replace(op.cohort, folded=0, mutations=0, bytes=0)
                held = self.store.stage_cohort(cursor, delivered)
        for kind, marks in staged.items():
            self.store.committed(op.keyspace, kind, marks)
        if held is not None:
            self.store.cohorts_committed(op.keyspace, held)
        return deleted

    def _check_cohorts(self, op: AdvanceLowBound | FoldCohort) -> Refusal | None:
        if isinstance(op, FoldCohort):
            if op.node_id not in op.cohort.members:
                return Refusal(
                    "mismatch", f"{op.node_id} is not a member of cohort {op.cohort.id:x}"
                )
            return None
        # (a cohort the round's bounds passed is finished: every replica held it then)
        own = tuple(
            sorted(
                c.mark
                for c in self.store.cohorts(op.keyspace, op.range)
                if not finished(c, op.old_bounds)
            )
        )
        if own != tuple(sorted(op.cohorts)):
            return Refusal(
                "mismatch",
                f"this replica holds the cohorts {_named(own)} of {op.range} in {op.keyspace}, "
                f"not the round's {_named(op.cohorts)}: their data must be delivered first",
            )
        return None

    def _check_digests(self, op: AdvanceLowBound | FoldCohort) -> Refusal | None:
        if op.old_bounds.lowest(op.range) > op.new_bound:
            return Refusal(
                "mismatch",
                f"a low bound only rises: {op.old_bounds.lowest(op.range)} -> {op.new_bound}",
            )
        own_bounds = self.store.marks(op.keyspace, MarkKind.LOW_BOUND)
        if not own_bounds.at_most(op.old_bounds, op.range):
            return Refusal(
                "mismatch",
                f"this replica's low bound of {op.range} in {op.keyspace} is above the round's "
                "old bound somewhere: the round must start from the highest bounds",
            )
        entries = [
            entry
            for left, right in op.range.pieces()
            for entry in self.data.range_ids_by_token(
                op.keyspace, left, right, 0, below=op.new_bound
            )
        ]
        if span_digests(entries, op.old_bounds, op.new_bound) != op.digests:
            return Refusal(
                "mismatch",
                f"this replica's ids of {op.range} in {op.keyspace} below {op.new_bound} (from "
                "the old bounds) differ from the agreed digests: not advancing",
            )
        return None


def _fence_of(op: MarkOp) -> int:
    if isinstance(op, RaiseFence):
        return op.hlc
    if isinstance(op, HoldCohort):
        return 0  # a delivered cohort fences nothing: the fence stays as it is
    return op.new_bound


def _named(marks: tuple[CohortMark, ...]) -> str:
    return "[" + ", ".join(f"{m.id:x}@{m.high}" for m in marks) + "]"
