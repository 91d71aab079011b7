"""This replica's side of reconciliation: what a reconciler asks of it for one token range of a
tracked keyspace (``ReplicaReconcile``), in domain values.

Theory of operation
-------------------
Every call names the reconciler's range as placed at its epoch and its lease token. It is served
only when this replica, caught up to that epoch, is in the range's read or write group (pending
replicas included), the keyspace is tracked, and the lease rules of ``epochal.mtrack.leases``
hold:

* rule 1: a token below the highest seen for the range — in a claim, in an action persisted
  with its marks, or as a grant in the metadata log — is refused (``SUPERSEDED``);
* rule 2: an action (a summary, a delivery, a fence, a low bound) under a token not claimed or
  renewed here within its lease, by this replica's monotonic clock, is refused too, and so is a
  renewal of a lease that lapsed here: a reconciler paused past its lease acts nowhere when it
  wakes, even where no successor claimed yet. Renewals live in memory only: after a restart a
  holder claims again (its token is still the highest, and a lease never claimed here is not
  lapsed).

Guards are kept per (keyspace, range) as the reconciler names it; a range split or merged by a
topology step is a new range, claimed anew (its highest token is still the highest of every
piece it intersects).

``state`` reports this replica's clock, fence, low bounds and log size; ``summary`` the digests
(and a sketch) of the range's ids from the given per-token low bounds up to ``below``;
``deliver`` sends ids from this replica's log to another replica over this node's peer stream
to it (``epochal.replica.handles``: batched, one stream, no call per mutation); ``fence`` and
``advance`` go through the group commit (``LocalReplica.perform``), as do a cohort's ``fold``
(the members of a cohort reconciling while another replica is cut off) and ``hold`` (a cohort
delivered here); ``deliver_cohort`` sends a cohort's data to a replica lacking it
(``cohort_delivery``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from epochal.mtrack import LogDigests, MutationId, Sketch, make_hlc
from epochal.mtrack.cohorts import Cohort, CohortMark, cohort_id
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.leases import TokenGuard, Verdict
from epochal.mtrack.marks import RangeMarks, bounded_segments
from epochal.mtrack.range_calls import Delivered, RangeRef, RangeState
from epochal.replica.borrowed import borrow
from epochal.replica.cohort_delivery import CohortSent, send_cohort
from epochal.replica.coordinator import Coordinator
from epochal.replica.handles import PeerFailed, RemoteHandle
from epochal.replica.ids import wall_ms
from epochal.replica.local_replica import LocalReplica, Outcome, PeerReply
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.reconcile_ops import (
    AdvanceLowBound,
    FoldCohort,
    HoldCohort,
    MarkOp,
    RaiseFence,
)
from epochal.replica.reconcile_store import MarkKind
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata
from epochal.tcm.schema import ReplicationType
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange

MAX_LEASE_MS = 600_000
# A window is read from the log in one query: at most this many ids, this many windows a call.
MAX_WINDOW_IDS = 1_000_000
MAX_WINDOWS = 4
# A delivery goes to its target in requests of about this many bytes of mutations (one group
# commit each there), well under a stream message's limit.
DELIVERY_REQUEST_BYTES = 1 << 20


class Refused(Exception):
    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


@dataclass(frozen=True, slots=True)
class Delivery:
    done: Delivered
    outcome: Outcome  # OK, else the first refusal's (the target's)


class ReconcileNode:
    def __init__(
        self,
        settings: ReplicaSettings,
        local: LocalReplica,
        follower: MetadataFollower,
        coordinator: Coordinator,
        storage: ReplicaStorage,
        metrics: ReplicaMetrics,
    ) -> None:
        self.settings = settings
        self.local = local
        self.follower = follower
        self.coordinator = coordinator
        self.storage = storage
        self.metrics = metrics
        self.guards: dict[tuple[str, TokenRange], TokenGuard] = {}

    # ------------------------------------------------------------------ the gate

    async def _gate(self, ref: RangeRef, wait_s: float | None = None) -> ClusterMetadata:
        """The metadata at the call's epoch or newer, once the call may be served here
        (``wait_s``: the longest the call may wait to catch up, within its deadline)."""
        for end in (ref.range.left, ref.range.right):
            if not MIN_TOKEN <= end <= MAX_TOKEN:
                raise Refused(Outcome.MALFORMED, f"the range {ref.range} is not one of tokens")
        follower = self.follower
        catch_up_s = self.settings.catch_up_timeout_ms / 1000
        if ref.epoch > follower.epoch and not await follower.catch_up(
            ref.epoch, catch_up_s if wait_s is None else min(catch_up_s, wait_s)
        ):
            raise Refused(
                Outcome.BEHIND,
                f"{self.local.node_id} could not catch up from epoch {follower.epoch} to "
                f"{ref.epoch} in time",
            )
        metadata = follower.metadata
        keyspace = metadata.keyspace(ref.keyspace)
        if keyspace is None:
            raise Refused(
                Outcome.UNKNOWN_TABLE,
                f"no keyspace {ref.keyspace!r} at epoch {metadata.epoch}",
            )
        if keyspace.replication_type is not ReplicationType.TRACKED:
            raise Refused(
                Outcome.MALFORMED, f"keyspace {ref.keyspace!r} is not tracked: nothing to reconcile"
            )
        if self.local.node_id not in self._replicas(metadata, ref):
            raise Refused(
                Outcome.NOT_A_REPLICA,
                f"{self.local.node_id} does not replicate {ref.range} of {ref.keyspace!r} at "
                f"epoch {metadata.epoch}",
            )
        return metadata

    def _same_range(self, metadata: ClusterMetadata, ref: RangeRef) -> None:
        """A fence or a low bound acts on the round's range as its replicas are now: refused
        when the range is no longer a range of the placement here, or its replicas changed
        (a join, a leave: the round must start again with the new replicas, or a replica the
        round never saw would miss what the bound collects)."""
        now = self._replicas(metadata, ref)
        if metadata.token_range(ref.keyspace, ref.range.right) != ref.range or now != frozenset(
            ref.replicas
        ):
            raise Refused(
                Outcome.NOT_A_REPLICA,
                f"at epoch {metadata.epoch} the range {ref.range} of {ref.keyspace!r} is "
                f"{metadata.token_range(ref.keyspace, ref.range.right)} with replicas "
                f"{sorted(now)}, not the round's {sorted(ref.replicas)}: start the round again",
            )

    @staticmethod
    def _replicas(metadata: ClusterMetadata, ref: RangeRef) -> frozenset[str]:
        right = ref.range.right
        return metadata.replica_group(ref.keyspace, right, write=True) | (
            metadata.replica_group(ref.keyspace, right, write=False)
        )

    def _guard(self, metadata: ClusterMetadata, ref: RangeRef) -> TokenGuard | None:
        """The range's guard, told the highest token known here (None: never claimed here)."""
        guard = self.guards.get((ref.keyspace, ref.range))
        if guard is not None:
            guard.learn(self._highest(metadata, ref))
        return guard

    def _highest(self, metadata: ClusterMetadata, ref: RangeRef) -> int:
        stored = self.storage.reconcile.marks(ref.keyspace, MarkKind.LEASE).of(ref.range)
        grant = metadata.lease_of(ref.keyspace, ref.range)
        return max(stored, grant.epoch if grant is not None else 0)

    def _admit(self, metadata: ClusterMetadata, ref: RangeRef) -> None:
        guard = self._guard(metadata, ref)
        highest = max(self._highest(metadata, ref), guard.highest if guard is not None else 0)
        if ref.lease_token < highest:
            raise self._superseded(ref, f"the highest seen here is {highest}")
        if guard is None or guard.admit(ref.lease_token, _now_ms()) is not Verdict.OK:
            raise self._lapsed(ref, "it was not claimed or renewed here within its lease")

    def _superseded(self, ref: RangeRef, why: str) -> Refused:
        self.metrics.reconcile_refusals.inc()
        return Refused(
            Outcome.SUPERSEDED,
            f"{self.local.node_id} refuses lease token {ref.lease_token} for {ref.range} of "
            f"{ref.keyspace!r}: {why}; another reconciler holds the range",
        )

    def _lapsed(self, ref: RangeRef, why: str) -> Refused:
        self.metrics.reconcile_refusals.inc()
        return Refused(
            Outcome.LAPSED,
            f"{self.local.node_id} refuses lease token {ref.lease_token} for {ref.range} of "
            f"{ref.keyspace!r}: {why}; claim it again (a lapsed lease needs a new grant)",
        )

    # ------------------------------------------------------------------ calls

    async def state(
        self,
        ref: RangeRef,
        *,
        claim: bool = False,
        lease_ms: int = 0,
        sizes: bool = False,
        window_ids: int = 0,
        window_from: Sequence[int] = (),
        wait_s: float | None = None,
    ) -> RangeState:
        """(``wait_s``: the longest to wait to catch up to the call's epoch: a reconciler's
        state call has a short deadline, and a replica behind answers BEHIND within it rather
        than not at all — no answer would leave it out of the round, as if cut off.)"""
        metadata = await self._gate(ref, wait_s)
        if window_from and not 0 < window_ids <= MAX_WINDOW_IDS:
            raise Refused(Outcome.MALFORMED, f"window_ids must be in 1..{MAX_WINDOW_IDS}")
        if len(window_from) > MAX_WINDOWS:
            raise Refused(Outcome.MALFORMED, f"at most {MAX_WINDOWS} windows a call")
        if not all(0 <= start <= MAX_HLC for start in window_from):
            raise Refused(Outcome.MALFORMED, "a window starts at an HLC in 0..2^63-1")
        if claim:
            if not 0 < lease_ms <= MAX_LEASE_MS:
                raise Refused(Outcome.MALFORMED, f"lease_ms must be in 1..{MAX_LEASE_MS}")
            highest = self._highest(metadata, ref)
            key = (ref.keyspace, ref.range)
            guard = self.guards.get(key)
            if guard is None or guard.lease_ms != lease_ms:
                kept = guard.renewed_ms if guard is not None else None
                known = max(highest, guard.highest if guard is not None else 0)
                guard = self.guards[key] = TokenGuard(lease_ms, known, kept)
            guard.learn(highest)
            verdict = guard.claim(ref.lease_token, _now_ms())
            if verdict is Verdict.SUPERSEDED:
                raise self._superseded(ref, f"the highest seen here is {guard.highest}")
            if verdict is Verdict.LAPSED:
                raise self._lapsed(ref, f"its lease lapsed here ({lease_ms} ms unrenewed)")
        guard = self._guard(metadata, ref)
        reconcile = self.storage.reconcile
        bounds = reconcile.marks(ref.keyspace, MarkKind.LOW_BOUND)
        entries, size = (
            self.storage.data.range_log_size(ref.keyspace, ref.range) if sizes else (0, 0)
        )
        segments = bounded_segments(ref.range, bounds)  # each window from its start or above
        ends = tuple(
            self.storage.data.window_end(
                ref.keyspace,
                [(lo, hi, max(bound, start)) for lo, hi, bound in segments],
                window_ids,
            )
            for start in window_from
        )
        return RangeState(
            hlc=self.hlc_now(),
            fence=reconcile.marks(ref.keyspace, MarkKind.FENCE).of(ref.range),
            low_bounds=RangeMarks(tuple(p for p in bounds.pieces if p.range.intersects(ref.range))),
            lease_token=max(
                self._highest(metadata, ref), guard.highest if guard is not None else 0
            ),
            lease_idle_ms=guard.idle_ms(_now_ms()) if guard is not None else None,
            log_entries=entries,
            log_bytes=size,
            window_ends=ends,
            cohorts=tuple(reconcile.cohorts(ref.keyspace, ref.range)),
            unreachable_peers=tuple(
                sorted(self.coordinator.reach.unreachable() & self._replicas(metadata, ref))
            ),
        )

    def hlc_now(self) -> int:
        ids = self.coordinator.ids
        now = make_hlc(wall_ms())
        return max(now, ids.hlc.last) if ids is not None else now

    async def summary(
        self,
        ref: RangeRef,
        low_bounds: RangeMarks,
        below: int,
        sketch_logs: Sequence[tuple[int, int]],
        sketch_cells: int,
    ) -> tuple[LogDigests, Sketch | None]:
        metadata = await self._gate(ref)
        self._admit(metadata, ref)
        own = self.storage.reconcile.marks(ref.keyspace, MarkKind.LOW_BOUND)
        ids = [
            mutation_id
            for left, right, bound in bounded_segments(ref.range, own, low_bounds)
            for mutation_id, _ in self.storage.data.range_ids_by_token(
                ref.keyspace, left, right, bound, below=below or None
            )
        ]
        sketch = None
        if sketch_cells:
            wanted = frozenset(sketch_logs)
            sketch = Sketch.of([i for i in ids if i.log_key in wanted], sketch_cells)
        self.metrics.summary_reads.inc()
        return LogDigests.of(ids, low_bound=0), sketch

    async def deliver(
        self, ref: RangeRef, target: str, ids: Sequence[MutationId], timeout_s: float
    ) -> Delivery:
        metadata = await self._gate(ref)
        self._admit(metadata, ref)
        handle = self._peer(metadata, ref, target)
        bodies = self.storage.data.mutation_bodies(ids)
        if len(bodies) < len(ids):  # entries held by id only: their bodies from the others
            by_id = self.storage.data.held_by_id(ids)
            others = sorted(self._replicas(metadata, ref) - {self.local.node_id, target})
            handles = [self.coordinator.handle(metadata, node) for node in others]
            bodies += await borrow(handles, metadata.epoch, by_id, timeout_s=timeout_s)
        chunks: list[list[bytes]] = [[]]
        size = 0
        for body in bodies:
            if chunks[-1] and (size + len(body) > DELIVERY_REQUEST_BYTES):
                chunks.append([])
                size = 0
            chunks[-1].append(body)
            size += len(body)
        answers = await asyncio.gather(
            *(handle.deliver(metadata.epoch, chunk, timeout_s=timeout_s) for chunk in chunks),
            return_exceptions=True,
        )
        delivered = size = 0
        problem = ""
        outcome = Outcome.OK
        for chunk, answer in zip(chunks, answers, strict=True):
            if isinstance(answer, PeerReply):
                delivered += answer.examined
                size += sum(len(b) for b in chunk[: answer.examined])
                if answer.outcome is Outcome.OK:
                    continue
            if not problem:
                # The target's refusal as it named it (a transport failure: overloaded); a
                # lease refusal there is the target's business, not this call's lease.
                outcome = answer.outcome if isinstance(answer, PeerReply) else Outcome.OVERLOADED
                if outcome in (Outcome.SUPERSEDED, Outcome.LAPSED):
                    outcome = Outcome.OVERLOADED
                problem = (
                    f"{target}: {answer.message}"
                    if isinstance(answer, PeerReply)
                    else str(answer)
                    if isinstance(answer, PeerFailed)
                    else repr(answer)
                )
        self.metrics.reconcile_delivered.inc(delivered)
        self.metrics.reconcile_delivered_bytes.inc(size)
        failed = len(bodies) - delivered
        return Delivery(
            Delivered(delivered, size, len(ids) - len(bodies), failed, problem), outcome
        )

    async def fence(self, ref: RangeRef, hlc: int) -> PeerReply:
        return await self._perform(
            ref, RaiseFence(keyspace=ref.keyspace, range=ref.range, hlc=hlc, token=ref.lease_token)
        )

    async def advance(
        self,
        ref: RangeRef,
        old_bounds: RangeMarks,
        new_bound: int,
        digests: LogDigests,
        cohorts: Sequence[CohortMark] = (),
    ) -> PeerReply:
        op = AdvanceLowBound(
            keyspace=ref.keyspace,
            range=ref.range,
            old_bounds=old_bounds,
            new_bound=new_bound,
            digests=digests,
            token=ref.lease_token,
            cohorts=tuple(cohorts),
        )
        return await self._perform(ref, op)

    async def fold(
        self,
        ref: RangeRef,
        old_bounds: RangeMarks,
        new_bound: int,
        digests: LogDigests,
        cohort: Cohort,
    ) -> PeerReply:
        """Fold ``[old bounds, new_bound)`` into ``cohort`` (this replica is a member)."""
        self._check_cohort(ref, cohort)
        op = FoldCohort(
            keyspace=ref.keyspace,
            range=ref.range,
            old_bounds=old_bounds,
            new_bound=new_bound,
            digests=digests,
            token=ref.lease_token,
            cohort=replace(cohort, high=new_bound, folded=new_bound, mutations=0, bytes=0),
            node_id=self.local.node_id,
        )
        return await self._perform(ref, op, members=cohort.members)

    async def hold(self, ref: RangeRef, cohort: Cohort) -> PeerReply:
        """Record ``cohort`` as held here: its data was delivered."""
        self._check_cohort(ref, cohort)
        delivered = replace(cohort, folded=0, mutations=0, bytes=0)  # nothing folded here
        op = HoldCohort(
            keyspace=ref.keyspace, range=ref.range, token=ref.lease_token, cohort=delivered
        )
        return await self._perform(ref, op)

    async def deliver_cohort(
        self, ref: RangeRef, cohort: Cohort, target: str, timeout_s: float
    ) -> CohortSent:
        """Send ``cohort``'s data to ``target`` (``cohort_delivery``); this replica holds it."""
        self._check_cohort(ref, cohort)
        metadata = await self._gate(ref)
        self._admit(metadata, ref)
        handle = self._peer(metadata, ref, target)
        held = self.storage.reconcile.cohort(ref.keyspace, cohort.id)
        if held is None or held.folded < cohort.high:
            raise Refused(
                Outcome.MISMATCH,
                f"{self.local.node_id} did not fold cohort {cohort.id:x} up to {cohort.high} "
                f"(its folds went up to {held.folded if held else 'nothing'}): only its folds "
                "recorded its data here",
            )
        sent = await send_cohort(
            self.storage.data,
            self.storage.streams,
            handle,
            epoch=metadata.epoch,
            keyspace=ref.keyspace,
            cohort_id=cohort.id,
            timeout_s=timeout_s,
        )
        self.metrics.cohort_cells_sent.inc(sent.cells)
        self.metrics.cohort_bytes_sent.inc(sent.bytes)
        return sent

    def _check_cohort(self, ref: RangeRef, cohort: Cohort) -> None:
        named = cohort_id(cohort.keyspace, cohort.range, cohort.members, cohort.low)
        if cohort.id != named:
            raise Refused(
                Outcome.MALFORMED,
                f"cohort {cohort.id:x} is not the id of its range, members and low ({named:x})",
            )
        if cohort.keyspace != ref.keyspace or cohort.range != ref.range:
            raise Refused(
                Outcome.MALFORMED,
                f"cohort {cohort.id:x} is of {cohort.range} in {cohort.keyspace!r}, not the "
                f"call's {ref.range} in {ref.keyspace!r}",
            )
        if ref.replicas and not set(cohort.members) <= set(ref.replicas):
            raise Refused(
                Outcome.MALFORMED,
                f"cohort {cohort.id:x}'s members {list(cohort.members)} are not replicas of "
                f"{ref.range}: {list(ref.replicas)}",
            )

    async def _perform(
        self, ref: RangeRef, op: MarkOp, members: Sequence[str] | None = None
    ) -> PeerReply:
        metadata = await self._gate(ref)
        self._same_range(metadata, ref)
        self._admit(metadata, ref)
        if members is not None and self.local.node_id not in members:
            raise Refused(
                Outcome.NOT_A_REPLICA,
                f"{self.local.node_id} is not a member of the cohort {list(members)}",
            )
        return await self.local.perform(ref.epoch, op)

    def _peer(self, metadata: ClusterMetadata, ref: RangeRef, target: str) -> RemoteHandle:
        if target == self.local.node_id or target not in self._replicas(metadata, ref):
            raise Refused(
                Outcome.NOT_A_REPLICA,
                f"{target} is not another replica of {ref.range} of {ref.keyspace!r} at epoch "
                f"{metadata.epoch}",
            )
        handle = self.coordinator.handle(metadata, target)
        assert isinstance(handle, RemoteHandle)  # another node
        return handle

    def fence_of(self, ref: RangeRef) -> int:
        return self.storage.reconcile.marks(ref.keyspace, MarkKind.FENCE).of(ref.range)


def _now_ms() -> float:
    return time.monotonic() * 1000
