"""epochal.v1.ReplicaReconcile: what a reconciler asks of this replica (``reconcile_node``),
protobuf <-> domain values. A refusal is an answer (its ``outcome`` and ``message``), as on the
peer stream; input no reconciler could send is ``INVALID_ARGUMENT``; an isolated replica (test
hook) answers ``UNAVAILABLE``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from epochal.errors import InvalidRequest, Unavailable
from epochal.mtrack import EXPLICIT_CELLS, LogDigests, MalformedSummary
from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.range_calls import RangeRef
from epochal.replica.codec import id_from_proto
from epochal.replica.exchange_codec import OUTCOME_NUMBERS
from epochal.replica.faults import ISOLATED, Faults
from epochal.replica.local_replica import Outcome, PeerReply
from epochal.replica.reconcile_node import ReconcileNode, Refused
from epochal.replica.status import abort_with
from epochal.wire.fields import MalformedInput, within
from epochal.wire.reconcile import (
    cohort_from_proto,
    cohort_marks_from_proto,
    cohort_to_proto,
    marks_from_proto,
    marks_to_proto,
    ref_from_proto,
)
from epochal.wire.status import bounded_message
from epochal.wire.v1 import replica_pb2 as pb

Reply = TypeVar("Reply")
DELIVERY_TIMEOUT_S = 30.0
ANSWER_S = 0.1  # of a state call's deadline, kept to answer BEHIND in time when not caught up
MAX_DELIVERY_IDS = 50_000


class ReconcileServicer:
    def __init__(self, node: ReconcileNode, faults: Faults) -> None:
        self.node = node
        self.faults = faults

    def _epoch(self) -> int:
        return self.node.follower.epoch

    async def _serve(
        self,
        context: grpc.aio.ServicerContext,
        call: Callable[[], Awaitable[Reply]],
        refused: Callable[[dict[str, Any]], Reply],
    ) -> Reply:
        if self.faults.isolated:
            await abort_with(context, Unavailable(ISOLATED), self._epoch())
        try:
            return await call()
        except Refused as refusal:
            return refused(self._common(refusal.outcome, refusal.message))
        except (MalformedInput, MalformedSummary) as error:
            await abort_with(context, InvalidRequest(str(error), rule="malformed"), self._epoch())
        raise AssertionError("unreachable: context.abort raises")

    def _common(self, outcome: Outcome, message: str = "") -> dict[str, Any]:
        return {
            "epoch": self._epoch(),
            "outcome": OUTCOME_NUMBERS[outcome],
            "message": bounded_message(message),
        }

    async def RangeState(
        self, request: pb.RangeStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.RangeStateResponse:
        async def call() -> pb.RangeStateResponse:
            remaining = context.time_remaining()
            state = await self.node.state(
                ref_from_proto(request.range),
                claim=request.claim,
                lease_ms=request.lease_ms,
                sizes=request.sizes,
                window_ids=request.window_ids,
                window_from=tuple(
                    within(start, f"window_from[{i}]", MAX_HLC)
                    for i, start in enumerate(request.window_from)
                ),
                wait_s=None if remaining is None else max(remaining - ANSWER_S, 0.0),
            )
            return pb.RangeStateResponse(
                **self._common(Outcome.OK),
                hlc=state.hlc,
                fence=state.fence,
                low_bounds=marks_to_proto(state.low_bounds),
                lease_token=state.lease_token,
                lease_idle_ms=-1.0 if state.lease_idle_ms is None else state.lease_idle_ms,
                log_entries=state.log_entries,
                log_bytes=state.log_bytes,
                window_ends=state.window_ends,
                cohorts=[cohort_to_proto(c) for c in state.cohorts],
                unreachable_peers=state.unreachable_peers,
            )

        return await self._serve(context, call, lambda c: pb.RangeStateResponse(**c))

    async def RangeSummary(
        self, request: pb.RangeSummaryRequest, context: grpc.aio.ServicerContext
    ) -> pb.RangeSummaryResponse:
        async def call() -> pb.RangeSummaryResponse:
            cells = request.sketch_cells
            if cells and (cells > EXPLICIT_CELLS or cells % 3):
                raise MalformedInput(f"sketch_cells must be a multiple of 3 up to {EXPLICIT_CELLS}")
            digests, sketch = await self.node.summary(
                ref_from_proto(request.range),
                marks_from_proto(request.low_bounds, "low_bounds"),
                within(request.below, "below", MAX_HLC),
                [(k.node, k.log) for k in request.sketch_logs],
                cells,
            )
            return pb.RangeSummaryResponse(
                **self._common(Outcome.OK),
                summary=digests.encode(),
                sketch=sketch.encode() if sketch is not None else b"",
            )

        return await self._serve(context, call, lambda c: pb.RangeSummaryResponse(**c))

    async def Deliver(
        self, request: pb.DeliverRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeliverResponse:
        async def call() -> pb.DeliverResponse:
            if len(request.ids) > MAX_DELIVERY_IDS:
                raise MalformedInput(f"at most {MAX_DELIVERY_IDS} ids per delivery")
            ids = [id_from_proto(i, "ids") for i in request.ids]
            remaining = context.time_remaining()
            timeout_s = DELIVERY_TIMEOUT_S if remaining is None else max(remaining - 0.5, 0.1)
            delivery = await self.node.deliver(
                ref_from_proto(request.range), request.target, ids, timeout_s
            )
            done = delivery.done
            return pb.DeliverResponse(
                **self._common(delivery.outcome, done.problem),
                delivered=done.delivered,
                bytes=done.bytes,
                absent=done.absent,
            )

        return await self._serve(context, call, lambda c: pb.DeliverResponse(**c))

    async def Fence(
        self, request: pb.FenceRequest, context: grpc.aio.ServicerContext
    ) -> pb.MarkResponse:
        async def call() -> pb.MarkResponse:
            ref = ref_from_proto(request.range)
            fence = within(request.hlc, "hlc", MAX_HLC)
            return self._marked(ref, await self.node.fence(ref, fence))

        return await self._serve(context, call, lambda c: pb.MarkResponse(**c))

    async def AdvanceLowBound(
        self, request: pb.AdvanceLowBoundRequest, context: grpc.aio.ServicerContext
    ) -> pb.MarkResponse:
        async def call() -> pb.MarkResponse:
            ref = ref_from_proto(request.range)
            reply = await self.node.advance(
                ref,
                marks_from_proto(request.old_bounds, "old_bounds"),
                within(request.new_bound, "new_bound", MAX_HLC),
                LogDigests.decode(request.digests),
                cohort_marks_from_proto(request.cohorts, "cohorts"),
            )
            return self._marked(ref, reply)

        return await self._serve(context, call, lambda c: pb.MarkResponse(**c))

    async def FoldCohort(
        self, request: pb.FoldCohortRequest, context: grpc.aio.ServicerContext
    ) -> pb.MarkResponse:
        async def call() -> pb.MarkResponse:
            ref = ref_from_proto(request.range)
            reply = await self.node.fold(
                ref,
                marks_from_proto(request.old_bounds, "old_bounds"),
                within(request.new_bound, "new_bound", MAX_HLC),
                LogDigests.decode(request.digests),
                cohort_from_proto(request.cohort, ref.keyspace, "cohort"),
            )
            return self._marked(ref, reply)

        return await self._serve(context, call, lambda c: pb.MarkResponse(**c))

    async def HoldCohort(
        self, request: pb.HoldCohortRequest, context: grpc.aio.ServicerContext
    ) -> pb.MarkResponse:
        async def call() -> pb.MarkResponse:
            ref = ref_from_proto(request.range)
            cohort = cohort_from_proto(request.cohort, ref.keyspace, "cohort")
            return self._marked(ref, await self.node.hold(ref, cohort))

        return await self._serve(context, call, lambda c: pb.MarkResponse(**c))

    async def DeliverCohort(
        self, request: pb.DeliverCohortRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeliverCohortResponse:
        async def call() -> pb.DeliverCohortResponse:
            ref = ref_from_proto(request.range)
            remaining = context.time_remaining()
            timeout_s = DELIVERY_TIMEOUT_S if remaining is None else max(remaining - 0.5, 0.1)
            sent = await self.node.deliver_cohort(
                ref,
                cohort_from_proto(request.cohort, ref.keyspace, "cohort"),
                request.target,
                timeout_s,
            )
            outcome = Outcome.OVERLOADED if sent.problem else Outcome.OK
            return pb.DeliverCohortResponse(
                **self._common(outcome, sent.problem),
                cells=sent.cells,
                bytes=sent.bytes,
                partitions=sent.partitions,
            )

        return await self._serve(context, call, lambda c: pb.DeliverCohortResponse(**c))

    def _marked(self, ref: RangeRef, reply: PeerReply) -> pb.MarkResponse:
        return pb.MarkResponse(
            epoch=reply.epoch,
            outcome=OUTCOME_NUMBERS[reply.outcome],
            message=bounded_message(reply.message),
            fence=self.node.fence_of(ref),
            collected=reply.examined if reply.outcome is Outcome.OK else 0,
        )
