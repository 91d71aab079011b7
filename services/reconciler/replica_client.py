"""The reconciler's calls to replicas (``epochal.v1.ReplicaReconcile``), in domain values: the one
place the reconciler meets protobuf on that side.

A call that fails raises an error of the family, named by ``epochal.reconciler.status`` (one
table, every status a row): ``Unreachable`` only when no answer came (the connection failed or
the deadline passed), ``ReplicaOverloaded``, ``ReplicaRefused`` (a reply's refusal, or a status
the replica answered with) or ``VersionMismatch`` (a replica lacking the method, logged once per
replica and method). Each names the replica.

The state call (``state``) decides who takes part in a round and renews the lease there: it has
its own deadline (``state_timeout_s``, well inside the lease margin), so that a replica that
stopped answering (SIGSTOP, swap, a long pause) holds a round up no longer than that."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence

import grpc

from epochal.mtrack import LogDigests, MalformedSummary, MutationId, Sketch
from epochal.mtrack.cohorts import Cohort, CohortMark
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.range_calls import Delivered, RangeRef, RangeState
from epochal.reconciler.status import (
    ReplicaRefused,
    Unreachable,
    VersionMismatch,
    failure,
    refusal,
)
from epochal.wire.channels import Channels
from epochal.wire.fields import MalformedInput, within
from epochal.wire.reconcile import (
    cohort_from_proto,
    cohort_marks_to_proto,
    cohort_to_proto,
    marks_from_proto,
    marks_to_proto,
    ref_to_proto,
)
from epochal.wire.v1 import replica_pb2 as pb

log = logging.getLogger(__name__)

OUTCOME_NAMES = {number: name.lower() for name, number in pb.PeerOutcome.items()}
SERVICE = pb.DESCRIPTOR.services_by_name["ReplicaReconcile"].full_name

__all__ = ["ReplicaClient", "ReplicaRefused", "Unreachable"]


class ReplicaClient:
    def __init__(
        self, channels: Channels, *, timeout_s: float, state_timeout_s: float | None = None
    ) -> None:
        self.channels = channels
        self.timeout_s = timeout_s
        self.state_timeout_s = timeout_s if state_timeout_s is None else state_timeout_s
        # A cohort's data is a scan of its range at the source: more time than a call.
        self.delivery_timeout_s = max(timeout_s, 10 * timeout_s)
        self.bytes_exchanged = 0  # summaries and sketches received
        self._unimplemented: set[tuple[str, str]] = set()  # (replica, method) logged so far

    async def state(
        self,
        address: str,
        ref: RangeRef,
        *,
        claim: bool = False,
        lease_ms: int = 0,
        sizes: bool = False,
        window_ids: int = 0,
        window_from: Sequence[int] = (),
    ) -> RangeState:
        request = pb.RangeStateRequest(
            range=ref_to_proto(ref),
            claim=claim,
            lease_ms=lease_ms,
            sizes=sizes,
            window_ids=window_ids,
            window_from=window_from,
        )
        with self._answered(address, "RangeState"):
            reply = await self.channels.reconcile(address).RangeState(
                request, timeout=self.state_timeout_s
            )
        _check(address, reply)
        with _read(address):
            return _range_state(address, ref, reply, window_from)

    async def summary(
        self,
        address: str,
        ref: RangeRef,
        low_bounds: RangeMarks,
        *,
        below: int = 0,
        sketch_logs: Sequence[tuple[int, int]] = (),
        sketch_cells: int = 0,
    ) -> tuple[LogDigests, Sketch | None]:
        request = pb.RangeSummaryRequest(
            range=ref_to_proto(ref),
            low_bounds=marks_to_proto(low_bounds),
            below=below,
            sketch_logs=[pb.LogKey(node=n, log=g) for n, g in sketch_logs],
            sketch_cells=sketch_cells,
        )
        with self._answered(address, "RangeSummary"):
            reply = await self.channels.reconcile(address).RangeSummary(
                request, timeout=self.timeout_s
            )
        _check(address, reply)
        self.bytes_exchanged += len(reply.summary) + len(reply.sketch)
        with _read(address):
            sketch = Sketch.decode(reply.sketch) if sketch_cells else None
            return LogDigests.decode(reply.summary), sketch

    async def deliver(
        self, address: str, ref: RangeRef, target: str, ids: Sequence[MutationId]
    ) -> Delivered:
        request = pb.DeliverRequest(
            range=ref_to_proto(ref),
            target=target,
            ids=[
                pb.MutationId(node=i.node, log=i.log, sequence=i.sequence, hlc=i.hlc) for i in ids
            ],
        )
        with self._answered(address, "Deliver"):
            reply = await self.channels.reconcile(address).Deliver(request, timeout=self.timeout_s)
        if reply.outcome in (pb.SUPERSEDED, pb.LAPSED, pb.NOT_A_REPLICA, pb.MALFORMED):
            _check(address, reply)  # about the call itself, not its mutations
        failed = len(ids) - reply.absent - reply.delivered
        problem = (
            f"{OUTCOME_NAMES.get(reply.outcome, reply.outcome)}: {reply.message}"
            if reply.outcome != pb.OK
            else ""
        )
        return Delivered(reply.delivered, reply.bytes, reply.absent, failed, problem)

    async def fence(self, address: str, ref: RangeRef, hlc: int) -> int:
        """The range's fence at the replica once ``hlc`` holds there."""
        request = pb.FenceRequest(range=ref_to_proto(ref), hlc=hlc)
        with self._answered(address, "Fence"):
            reply = await self.channels.reconcile(address).Fence(request, timeout=self.timeout_s)
        _check(address, reply)
        return reply.fence

    async def advance(
        self,
        address: str,
        ref: RangeRef,
        old_bounds: RangeMarks,
        new_bound: int,
        digests: LogDigests,
        cohorts: Sequence[CohortMark] = (),
    ) -> int:
        """How many log entries the replica collected."""
        request = pb.AdvanceLowBoundRequest(
            range=ref_to_proto(ref),
            old_bounds=marks_to_proto(old_bounds),
            new_bound=new_bound,
            digests=digests.encode(),
            cohorts=cohort_marks_to_proto(cohorts),
        )
        with self._answered(address, "AdvanceLowBound"):
            reply = await self.channels.reconcile(address).AdvanceLowBound(
                request, timeout=self.timeout_s
            )
        _check(address, reply)
        return reply.collected

    async def fold(
        self,
        address: str,
        ref: RangeRef,
        old_bounds: RangeMarks,
        new_bound: int,
        digests: LogDigests,
        cohort: Cohort,
    ) -> int:
        """How many log entries the member folded into ``cohort``."""
        request = pb.FoldCohortRequest(
            range=ref_to_proto(ref),
            old_bounds=marks_to_proto(old_bounds),
            new_bound=new_bound,
            digests=digests.encode(),
            cohort=cohort_to_proto(cohort),
        )
        with self._answered(address, "FoldCohort"):
            reply = await self.channels.reconcile(address).FoldCohort(
                request, timeout=self.timeout_s
            )
        _check(address, reply)
        return reply.collected

    async def deliver_cohort(
        self, address: str, ref: RangeRef, cohort: Cohort, target: str
    ) -> tuple[int, int]:
        """Send ``cohort`` from the replica at ``address`` to ``target``: the cells and bytes
        sent (raises ReplicaRefused when some did not arrive)."""
        request = pb.DeliverCohortRequest(
            range=ref_to_proto(ref), cohort=cohort_to_proto(cohort), target=target
        )
        with self._answered(address, "DeliverCohort"):
            reply = await self.channels.reconcile(address).DeliverCohort(
                request, timeout=self.delivery_timeout_s
            )
        _check(address, reply)
        return reply.cells, reply.bytes

    async def hold(self, address: str, ref: RangeRef, cohort: Cohort) -> None:
        request = pb.HoldCohortRequest(range=ref_to_proto(ref), cohort=cohort_to_proto(cohort))
        with self._answered(address, "HoldCohort"):
            reply = await self.channels.reconcile(address).HoldCohort(
                request, timeout=self.timeout_s
            )
        _check(address, reply)

    @contextlib.contextmanager
    def _answered(self, address: str, method: str) -> Iterator[None]:
        """A failed call as the error of the family its status stands for (``status``)."""
        try:
            yield
        except grpc.aio.AioRpcError as error:
            failed = failure(address, f"{SERVICE}/{method}", error)
            if isinstance(failed, VersionMismatch) and (address, method) not in self._unimplemented:
                self._unimplemented.add((address, method))
                log.error(
                    "replica %s does not implement %s/%s (another version?): the rounds of its "
                    "ranges stop until it does",
                    address,
                    SERVICE,
                    method,
                )
            raise failed from None
        self._unimplemented.discard((address, method))


def _range_state(
    address: str, ref: RangeRef, reply: pb.RangeStateResponse, window_from: Sequence[int]
) -> RangeState:
    ends = tuple(reply.window_ends) or (0,) * len(window_from)  # (a replica without windows)
    if len(ends) != len(window_from):
        raise MalformedInput(f"{len(ends)} window ends for {len(window_from)} windows asked")
    for index, end in enumerate(ends):
        within(end, f"window_ends[{index}]", MAX_HLC)
    return RangeState(
        hlc=within(reply.hlc, "hlc", MAX_HLC),
        fence=within(reply.fence, "fence", MAX_HLC),
        low_bounds=marks_from_proto(reply.low_bounds, "low_bounds"),
        lease_token=reply.lease_token,
        lease_idle_ms=None if reply.lease_idle_ms < 0 else reply.lease_idle_ms,
        log_entries=reply.log_entries,
        log_bytes=reply.log_bytes,
        window_ends=ends,
        cohorts=tuple(cohort_from_proto(c, ref.keyspace, "cohorts") for c in reply.cohorts),
        unreachable_peers=tuple(reply.unreachable_peers),
    )


@contextlib.contextmanager
def _read(address: str) -> Iterator[None]:
    """A reply this reconciler cannot read (a replica of another version, or a bug) is the
    replica's refusal, ``malformed_reply``: the round ends with it, as with any refusal."""
    try:
        yield
    except (MalformedInput, MalformedSummary) as error:
        log.debug("a reply of %s does not read", address, exc_info=error)
        detail = f"its reply does not read: {error}"
        raise ReplicaRefused(address, "malformed_reply", detail) from None


def _check(address: str, reply: pb.RangeStateResponse | pb.RangeSummaryResponse | object) -> None:
    outcome = getattr(reply, "outcome", pb.OK)
    if outcome != pb.OK:
        name = OUTCOME_NAMES.get(outcome, str(outcome))
        raise refusal(address, name, reply.message)  # type: ignore[attr-defined]
