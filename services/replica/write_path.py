"""The write path: a client's write of one partition, coordinated at a consistency level.

Theory of operation
-------------------
In this order (DESIGN.md "Write path"):

1. Catch up to the client's epoch; check the write against the schema at this node's epoch
   (``prepare_write``; a bad one is ``InvalidRequest``).
2. Plan it (``coordinator_plan``): the token's write group and the level over it. A write no
   answers could satisfy is refused here, before an id is spent.
3. Give it its mutation id from this node's log for the token's range (which fixes its
   timestamp), or reuse the id of the write it retries — only one a coordinator could have
   issued. Encode it once, as the bytes every replica stores.
4. Send it to the whole write group — the others first, this node's own fsync last — and wait
   (``arrivals.collect``) until the level's count of durable acknowledgements is in and the plan
   re-check passes (``Coordinator.recheck``), or the deadline.
5. Answer the id and who acknowledged; or fail with the replicas' outcome (``replicas`` of the
   error, and its message): who acknowledged, who refused and why, who did not answer and why
   (a replica still silent at the deadline included). Every failure after step 3 carries the
   mutation id: replicas may hold the mutation already, and a retry must reuse it so that it
   is stored once (a replica that holds it answers a retry OK, even past its fence).

A write refused for want of acknowledgements because replicas fenced its id (``FENCED``: it is
below a reconciliation fence, as a client's retry of an old write can be) is sent again under a
fresh id past the fence, its cells keeping the first attempt's time (``Mutation.timestamp``), up
to ``FENCED_RETRIES`` times within the deadline; the client sees success and the new id. Replicas
that stored the first attempt before their fence keep it: one write under two ids, with the same
cells at the same time, so a read or a reconciliation of both gives what either gives; and the
first time, not the retry's, decides last-write-wins, so a retry never overwrites a write
acknowledged in between.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from opentelemetry import trace

from epochal.errors import (
    ClockSkew,
    EpochalError,
    InvalidRequest,
    StalePlan,
    TimedOut,
    Unavailable,
)
from epochal.mtrack import MutationId
from epochal.replica.arrivals import Progress, collect
from epochal.replica.codec import mutation_to_body
from epochal.replica.coordinator_plan import Plan
from epochal.replica.local_replica import PeerReply
from epochal.replica.model import Mutation
from epochal.replica.mutations import BadRequest, PreparedWrite, WriteDraft, prepare_write
from epochal.tcm import ClusterMetadata
from epochal.tcm.consistency import Consistency
from epochal.telemetry import attributes as attr

if TYPE_CHECKING:
    from epochal.replica.coordinator import Coordinator


FENCED_RETRIES = 3  # fresh ids past a reconciliation fence, before the write fails


class _Fenced(Exception):
    """Replicas refused the attempt's id below a reconciliation fence: retry past it."""

    def __init__(self, fence: int) -> None:
        super().__init__(f"below the reconciliation fence {fence}")
        self.fence = fence


@dataclass(frozen=True, slots=True)
class WriteResult:
    mutation_id: MutationId
    epoch: int
    acknowledged: tuple[str, ...]


class WritePath:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    async def write(
        self,
        draft: WriteDraft,
        level: Consistency,
        *,
        client_epoch: int,
        session_hlc: int,
        retry_of: MutationId | None,
    ) -> WriteResult:
        coordinator = self.coordinator
        settings = coordinator.settings
        timeout_ms = settings.write_timeout_ms
        with coordinator.coordinating("write", level, timeout_ms) as (deadline, traced):
            metadata = await coordinator.metadata_at(client_epoch, deadline)
            try:
                prepared = prepare_write(
                    metadata,
                    draft,
                    max_value_bytes=settings.max_value_bytes,
                    max_mutation_bytes=settings.max_mutation_bytes,
                )
            except BadRequest as error:
                raise InvalidRequest(str(error)) from None
            plan = coordinator.planner.plan(
                metadata, level, prepared.keyspace.name, prepared.token, write=True
            )
            mutation = prepared.with_id(
                self._mutation_id(metadata, prepared, session_hlc, retry_of)
            )
            if traced.is_recording():
                traced.set_attributes(
                    {
                        attr.EPOCH: metadata.epoch,
                        attr.KEYSPACE: prepared.keyspace.name,
                        attr.TABLE: prepared.table.name,
                        attr.TOKEN: prepared.token,
                        attr.REQUEST_BYTES: prepared.size_bytes,
                        attr.ROWS: len(prepared.rows),
                        attr.MUTATION_ID: str(mutation.id),
                        attr.REPLICAS_CONTACTED: sorted(plan.group),
                    }
                )
            for attempt in range(FENCED_RETRIES + 1):
                try:
                    return await self._send(
                        metadata, plan, mutation, deadline, traced, attempt < FENCED_RETRIES
                    )
                except _Fenced as fenced:
                    mutation = self._past_fence(metadata, prepared, mutation, fenced.fence)
                    coordinator.metrics.writes_fenced.inc()
                    if traced.is_recording():
                        traced.add_event(
                            "fenced", {"fence": fenced.fence, "retry": str(mutation.id)}
                        )
            raise AssertionError("unreachable: the last attempt does not raise _Fenced")

    def _past_fence(
        self, metadata: ClusterMetadata, prepared: PreparedWrite, mutation: Mutation, fence: int
    ) -> Mutation:
        """The write again under a fresh id past ``fence``, its cells keeping the first
        attempt's time: a retry never overwrites a write acknowledged in between. Replicas that
        stored the first attempt before their fence keep it too — one write under two ids, the
        same cells at the same time: reading or reconciling both gives what either gives."""
        ids = self.coordinator.ids
        assert ids is not None, "admitted only once registered"
        ids.observe(fence)  # the next id is past it (a fence is behind every replica's clock)
        fresh = ids.next_id(metadata, prepared.keyspace, prepared.token)
        return replace(mutation, id=fresh, timestamp=mutation.timestamp or mutation.id.hlc)

    async def _send(
        self,
        metadata: ClusterMetadata,
        plan: Plan,
        mutation: Mutation,
        deadline: float,
        traced: trace.Span,
        past_fence: bool = False,
    ) -> WriteResult:
        """Send the mutation to the whole write group; wait for the level and the re-check.
        ``past_fence``: a failure because replicas fenced its id raises _Fenced instead."""
        coordinator = self.coordinator
        # Encoded once, for every replica (the local one stores these bytes as the log entry).
        body = mutation_to_body(mutation)
        progress = Progress(view=metadata)
        timeout_s = deadline - asyncio.get_running_loop().time()

        def send(node: str) -> asyncio.Future[PeerReply]:
            handle = coordinator.handle(metadata, node)
            return handle.apply(metadata.epoch, mutation, body, timeout_s=timeout_s)

        # Others first: this node's own write is an fsync on the loop, and the requests to the
        # others should be on their way while it runs.
        nodes = sorted(plan.group, key=lambda node: node == coordinator.node_id)
        try:
            done = await collect(
                nodes, send, progress, deadline, lambda: self._done(plan, progress, deadline)
            )
        except EpochalError as error:
            # Replicas may hold the mutation already: a retry must reuse its id.
            error.mutation_id = error.mutation_id or mutation.id.pack().hex()
            raise
        finally:  # also when the write failed: who acknowledged it
            if traced.is_recording():
                traced.set_attribute(attr.REPLICAS_ANSWERED, sorted(progress.answered))
        if done:
            acknowledged = tuple(sorted(progress.answered))
            return WriteResult(mutation.id, coordinator.follower.epoch, acknowledged)
        in_time = asyncio.get_running_loop().time() < deadline
        if past_fence and progress.fence and not progress.malformed and in_time:
            raise _Fenced(progress.fence)
        raise self._failure(plan, progress, mutation.id, deadline)

    def _mutation_id(
        self,
        metadata: ClusterMetadata,
        prepared: PreparedWrite,
        session_hlc: int,
        retry_of: MutationId | None,
    ) -> MutationId:
        ids = self.coordinator.ids
        assert ids is not None, "admitted only once registered"
        if retry_of is not None:
            self._check_issued(metadata, retry_of)
            return retry_of
        ids.observe(session_hlc)  # raises ClockSkew (FAILED_PRECONDITION)
        return ids.next_id(metadata, prepared.keyspace, prepared.token)

    def _check_issued(self, metadata: ClusterMetadata, retry_of: MutationId) -> None:
        """A client resends only a mutation id a coordinator gave it: refuse one no coordinator
        could have issued (an unknown node, a log or sequence this node never reached, a time
        beyond the allowed skew), before it reaches storage or the clock."""
        ids = self.coordinator.ids
        assert ids is not None, "admitted only once registered"
        problem = ""
        if retry_of.hlc == 0:
            problem = "no coordinator issues time 0"
        elif retry_of.node >= metadata.next_node_number:
            problem = f"node {retry_of.node} was never issued"
        elif retry_of.node == ids.node and not ids.could_have_issued(retry_of):
            problem = f"{self.coordinator.node_id} never issued it"
        else:
            try:
                ids.observe(retry_of.hlc)
            except ClockSkew as error:
                problem = str(error)
        if problem:
            raise InvalidRequest(
                f"the retry's mutation id {retry_of} is not one a coordinator gave out: "
                f"{problem}; resend the write without it",
                rule="unknown_mutation_id",
            )

    async def _done(self, plan: Plan, progress: Progress, deadline: float) -> bool:
        """Enough acknowledgements for the level, under the plan re-checked?"""
        coordinator = self.coordinator
        if not coordinator.planner.satisfied(progress.view, plan, progress.answered):
            return False
        if coordinator.hooks.skip_plan_recheck:
            return True
        return await coordinator.recheck(plan, progress, deadline)

    def _failure(
        self, plan: Plan, progress: Progress, mutation_id: MutationId, deadline: float
    ) -> Exception:
        """Why the write did not succeed, most telling first: a replica refused it as
        malformed; the group changed after the plan; the deadline; too few replicas."""
        if progress.malformed:
            # A replica held this mutation id with other content (a retry that resent an id
            # with another write): retrying cannot help.
            node, why = sorted(progress.malformed.items())[0]
            return InvalidRequest(
                f"{node} refused {mutation_id}: {why}; a retry must resend the write it was "
                "first sent with, or none",
                rule="malformed",
            )
        packed = mutation_id.pack().hex()
        view = progress.view
        timed_out = asyncio.get_running_loop().time() >= deadline
        timeout_ms = self.coordinator.settings.write_timeout_ms
        replicas = progress.outcome(
            plan,
            needed=self.coordinator.planner.needed(view, plan),
            timeout_ms=timeout_ms,
            timed_out=timed_out,
        )
        write = f"{plan.level.value} write of token {plan.token} (mutation {mutation_id})"
        retry = "retry with the same mutation id"
        if view.epoch > plan.epoch:
            return StalePlan(
                f"{write}: the replica group changed after the plan (epoch {plan.epoch}, group "
                f"{', '.join(sorted(plan.group))}); at epoch {view.epoch} {replicas.describe()}; "
                f"{retry}",
                mutation_id=packed,
                replicas=replicas,
            )
        if timed_out:
            return TimedOut(
                f"{write} timed out after {timeout_ms} ms: {replicas.describe()}; {retry}",
                mutation_id=packed,
                replicas=replicas,
            )
        return Unavailable(
            f"{write} got too few replicas: {replicas.describe()}; {retry}",
            mutation_id=packed,
            replicas=replicas,
        )
