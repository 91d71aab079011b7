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
  write: it passes the fence (its id exists elsewhere, and the round is collecting it).
* **A low bound** (``AdvanceLowBound``) to *t* carries the digests of the ids in
  ``[old bound, t)`` that every replica holds; a replica whose own digests of that span differ
  refuses (``Outcome.MISMATCH``). Otherwise it deletes its log entries below *t* in the range
  (the data stays) and records the bound, in one transaction. A delivery or repair of an id
  below the bound is dropped from then on (acknowledged, not stored): re-applying one could
  bring back a purged delete.
* Both carry the reconciler's **lease token**; one below the highest the replica has seen for
  the range is refused (``Outcome.SUPERSEDED``) and the highest is recorded in the transaction
  of the operation it allows (``epochal.mtrack.leases``).

Writes queued after a fence in the same pass are judged against it as if it will hold (a fence
that is then refused only cost those writes a retry); a low bound drops deliveries only once it
is committed.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochal.mtrack import LogDigests
from epochal.mtrack.marks import RangeMarks
from epochal.replica.data_store import DataStore
from epochal.replica.model import Mutation
from epochal.replica.reconcile_store import MarkKind, ReconcileStore
from epochal.tcm import ClusterMetadata
from epochal.tcm.tokens import TokenRange


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
    old_bound: int
    new_bound: int
    digests: LogDigests  # of the ids in [old_bound, new_bound) every replica holds
    token: int


MarkOp = RaiseFence | AdvanceLowBound


@dataclass(frozen=True, slots=True)
class Refusal:
    outcome: str  # an ``Outcome`` value: fenced, superseded, mismatch, not_a_replica
    message: str
    fence: int = 0  # fenced: the fence the write's id was below


class Admission:
    """The marks' side of one group commit: which writes are refused or dropped, and the
    operations performed after the writes queued before them are durable."""

    def __init__(self, store: ReconcileStore, data: DataStore) -> None:
        self.store = store
        self.data = data

    def judge(
        self,
        metadata: ClusterMetadata,
        writes: list[tuple[Mutation, bool]],
        ops: list[tuple[int, MarkOp]],
    ) -> list[Refusal | bool | None]:
        """Per queued write (``(mutation, delivered)``, in order; ``ops`` each with the number
        of writes queued before it): a Refusal, True to drop it (acknowledged, not stored), or
        None to store it."""
        staged: dict[str, RangeMarks] = {}  # keyspace -> fences as the ops queued so far raise
        pending = sorted(ops, key=lambda op: op[0])
        verdicts: list[Refusal | bool | None] = []
        for index, (mutation, delivered) in enumerate(writes):
            while pending and pending[0][0] <= index:
                _, op = pending.pop(0)
                if isinstance(op, RaiseFence):
                    fences = staged.get(op.keyspace) or self.store.marks(
                        op.keyspace, MarkKind.FENCE
                    )
                    staged[op.keyspace] = fences.raised(op.range, op.hlc)
            verdicts.append(self._verdict(metadata, mutation, delivered, staged))
        return verdicts

    def _verdict(
        self,
        metadata: ClusterMetadata,
        mutation: Mutation,
        delivered: bool,
        staged: dict[str, RangeMarks],
    ) -> Refusal | bool | None:
        if not mutation.tracked:
            return None
        hlc = mutation.id.hlc
        if delivered:
            bound = self.store.marks(mutation.keyspace, MarkKind.LOW_BOUND).at(mutation.token)
            return True if hlc < bound else None
        token_range = metadata.token_range(mutation.keyspace, mutation.token)
        if token_range is None:
            return None  # the gate refused writes to tokens no placement holds
        fences = staged.get(mutation.keyspace) or self.store.marks(
            mutation.keyspace, MarkKind.FENCE
        )
        fence = fences.of(token_range)
        if hlc < fence:
            return Refusal(
                "fenced",
                f"mutation {mutation.id} is below the reconciliation fence {fence} of range "
                f"{token_range} in {mutation.keyspace}: retry with a fresh id",
                fence,
            )
        return None

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
        if isinstance(op, AdvanceLowBound):
            refusal = self._check_digests(op)
            if refusal is not None:
                return refusal
        kind = MarkKind.FENCE if isinstance(op, RaiseFence) else MarkKind.LOW_BOUND
        mark = op.hlc if isinstance(op, RaiseFence) else op.new_bound
        deleted = 0
        with self.store.transaction() as cursor:
            staged_leases = self.store.stage(
                cursor, op.keyspace, MarkKind.LEASE, op.range, op.token
            )
            staged = self.store.stage(cursor, op.keyspace, kind, op.range, mark)
            if isinstance(op, AdvanceLowBound):
                deleted = self.store.delete_log_below(cursor, op.keyspace, op.range, mark)
        self.store.committed(op.keyspace, MarkKind.LEASE, staged_leases)
        self.store.committed(op.keyspace, kind, staged)
        return deleted

    def _check_digests(self, op: AdvanceLowBound) -> Refusal | None:
        if not 0 <= op.old_bound <= op.new_bound:
            return Refusal("mismatch", f"a low bound only rises: {op.old_bound} -> {op.new_bound}")
        bounds = self.store.marks(op.keyspace, MarkKind.LOW_BOUND)
        held = [
            i
            for left, right in op.range.pieces()
            for i, token in self.data.range_ids_by_token(op.keyspace, left, right, op.old_bound)
            if max(op.old_bound, bounds.at(token)) <= i.hlc < op.new_bound
        ]
        own = LogDigests.of(held, low_bound=op.old_bound)
        if own != op.digests:
            return Refusal(
                "mismatch",
                f"this replica's ids of {op.range} in {op.keyspace} in [{op.old_bound}, "
                f"{op.new_bound}) differ from the agreed digests: not advancing",
            )
        return None
