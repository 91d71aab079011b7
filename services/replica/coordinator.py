"""The coordinator: a client's write or read, carried out at a consistency level.

Theory of operation
-------------------
Any replica coordinates. It admits a bounded number of requests at once
(``--max-in-flight-requests``, then ``Overloaded``), catches up to the client's epoch, and plans
with its own metadata at that epoch. The parts, one idea each:

- ``coordinator_plan``: what a request must reach — the token's write (or read) group, the
  consistency level over it, the preference order of replicas, and the re-check decision.
  Pure.
- ``write_path``: a write's id, its sending to the write group, and its acknowledgements.
- ``read_path``: a read's data and summaries (or digests), then ``read_repair``.
- ``arrivals``: replies as they arrive, and what they add up to.
- ``handles`` (with ``exchange_codec``): how a replica is reached, in-process or over its
  Exchange stream.

This module is the facade callers use (``write``, ``read``) and holds what both paths share:
admission, tracing and timing (``coordinating``), catching up to the client's epoch, the
handles, and the re-check's shell (``recheck``). Every reply carries the replica's epoch; when
one is newer than the plan's, the coordinator catches up and re-checks the plan against the
newer placements before it answers success: the replicas that answered must still satisfy the
level in the newer group, else the request fails (``StalePlan``) — it never answers success on
a plan it knows to be stale. Both counts of such discoveries are kept
(``epochal_coordinator_behind_placements_total``, ``…_schema_total``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from opentelemetry import trace

from epochal.errors import (
    EpochalError,
    InvalidRequest,
    Overloaded,
    StalePlan,
    TimedOut,
    Unavailable,
)
from epochal.replica.arrivals import Progress
from epochal.replica.coordinator_plan import Plan, Planner, Recheck, behind
from epochal.replica.handles import LocalHandle, PeerFailed, RemoteHandle, ReplicaHandle
from epochal.replica.ids import MutationIds
from epochal.replica.local_replica import LocalReplica
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.reachability import PeerReach
from epochal.replica.read_path import ReadPath, ReadResult, ReadStats
from epochal.replica.settings import ReplicaSettings
from epochal.replica.status import code_of
from epochal.replica.write_path import WritePath, WriteResult
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata
from epochal.tcm.consistency import Consistency
from epochal.telemetry import attributes as attr
from epochal.telemetry.context import cancelled, failed, wanted
from epochal.wire.channels import Channels

__all__ = ["Coordinator", "Hooks", "ReadResult", "ReadStats", "WriteResult"]

_tracer = trace.get_tracer("epochal.replica")


@dataclass(frozen=True, slots=True)
class Hooks:
    """Test-only switches (served only with --enable-test-hooks)."""

    skip_plan_recheck: bool = False


@dataclass(eq=False, repr=False)
class Coordinator:
    settings: ReplicaSettings
    follower: MetadataFollower
    local: LocalReplica
    channels: Channels
    metrics: ReplicaMetrics

    def __post_init__(self) -> None:
        self.node_id = ""
        self.ids: MutationIds | None = None
        self.hooks = Hooks()
        self.planner = Planner(self.node_id, self.settings.datacenter)
        self._handles: dict[str, RemoteHandle] = {}
        self.reach = PeerReach()  # which peers this node's calls could not reach lately
        self._in_flight = 0
        # The entry points: each path admits, traces and times its requests (coordinating).
        self.write = WritePath(self).write
        self.read = ReadPath(self).read

    def attach(self, node_id: str, ids: MutationIds) -> None:
        """Start coordinating as ``node_id`` (once registered), with its mutation ids."""
        self.node_id = node_id
        self.ids = ids
        self.planner = Planner(node_id, self.settings.datacenter)
        self.close()

    # ------------------------------------------------------------------ what both paths share

    def handle(self, metadata: ClusterMetadata, node_id: str) -> ReplicaHandle:
        """How to reach ``node_id`` (at its address in ``metadata``); raises PeerFailed for a
        node the directory does not know."""
        if node_id == self.node_id:
            return LocalHandle(node_id, self.local)
        node = metadata.nodes.get(node_id)
        if node is None:
            raise PeerFailed(node_id, f"not in the directory at epoch {metadata.epoch}")
        handle = self._handles.get(node_id)
        if handle is None or handle.address != node.address:
            if handle is not None:
                handle.close()  # the node moved: its old stream goes
            handle = self._handles[node_id] = RemoteHandle(
                node_id, node.address, self.channels, self.reach
            )
        return handle

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    @contextlib.contextmanager
    def coordinating(
        self, operation: str, level: Consistency, timeout_ms: int
    ) -> Iterator[tuple[float, trace.Span]]:
        """Admit one ``operation`` ("write" or "read"), trace it (span ``replica.<operation>``)
        and time it (its latency is observed when it succeeds). Yields its deadline (loop time)
        and its span."""
        with self._admitted(operation):
            latency = (
                self.metrics.write_latency_by_level
                if operation == "write"
                else self.metrics.read_latency_by_level
            )
            started = time.monotonic()
            deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
            with self._span(operation) as traced:
                traced.set_attribute(attr.CONSISTENCY, level.value)
                try:
                    yield deadline, traced
                except Exception as error:
                    if traced.is_recording():
                        code = code_of(error) if isinstance(error, EpochalError) else None
                        failed(traced, error, code)
                    raise
                except asyncio.CancelledError:  # the client went away
                    if traced.is_recording():
                        cancelled(traced)
                    raise
                traced.set_attribute(attr.OUTCOME, attr.OK)
            latency[level].observe(time.monotonic() - started)

    def _span(self, operation: str) -> contextlib.AbstractContextManager[trace.Span]:
        """The coordinator's SERVER span of a client's write or read: a child of the client's
        attempt (the request's trace context, made current by the servicer)."""
        if not wanted():  # the caller's context stays current, as it came
            return contextlib.nullcontext(trace.INVALID_SPAN)
        name = attr.REPLICA_WRITE if operation == "write" else attr.REPLICA_READ
        return _tracer.start_as_current_span(
            name,
            kind=trace.SpanKind.SERVER,
            attributes={attr.NODE_ID: self.node_id},
            record_exception=False,
        )

    @contextlib.contextmanager
    def _admitted(self, operation: str) -> Iterator[None]:
        if self._in_flight >= self.settings.max_in_flight_requests:
            self.metrics.overloaded.labels("coordinator").inc()
            raise Overloaded(
                f"{self.node_id} is coordinating {self._in_flight} requests "
                "(--max-in-flight-requests); back off and retry"
            )
        if self.ids is None:
            raise Unavailable("this replica is not registered yet; try another", rule="not_ready")
        self._in_flight += 1
        try:
            yield
        except (Unavailable, TimedOut, StalePlan) as error:
            self.metrics.request_failures.labels(operation, error.rule).inc()
            raise
        finally:
            self._in_flight -= 1

    async def metadata_at(self, epoch: int, deadline: float) -> ClusterMetadata:
        """This node's metadata, caught up to ``epoch`` first (the client has seen it)."""
        follower = self.follower
        if follower.stopped_reason:
            raise Unavailable(follower.stopped_reason, rule="not_ready")
        if epoch > follower.epoch:
            remaining = deadline - asyncio.get_running_loop().time()
            if not await follower.catch_up(epoch, max(remaining, 0.0)):
                if 0 < follower.cms_epoch < epoch:
                    raise InvalidRequest(
                        f"the request names epoch {epoch}, but the CMS is at epoch "
                        f"{follower.cms_epoch}: an epoch from the future",
                        rule="future_epoch",
                    )
                raise Unavailable(
                    f"{self.node_id} is at epoch {follower.epoch} and could not catch up to the "
                    f"client's epoch {epoch} in time; try another replica",
                    rule="behind",
                )
        return follower.metadata

    async def recheck(self, plan: Plan, progress: Progress, deadline: float) -> bool:
        """Do the answers so far satisfy the plan's level at the newest epoch seen — in a reply,
        or applied here meanwhile? Catches up to that epoch first (once) and makes it the
        progress's view; raises Unavailable (``stale_plan``) when it cannot in time."""
        progress.newest_epoch = max(progress.newest_epoch, self.follower.epoch)
        decision = self.planner.recheck(
            plan, progress.view, progress.newest_epoch, progress.answered
        )
        if decision is Recheck.CATCH_UP:
            remaining = deadline - asyncio.get_running_loop().time()
            if not await self.follower.catch_up(progress.newest_epoch, max(remaining, 0.0)):
                raise Unavailable(
                    f"a replica answered at epoch {progress.newest_epoch}; {self.node_id} could "
                    f"not learn it in time to re-check its plan (made at epoch {plan.epoch})",
                    rule="stale_plan",
                )
            newer = self.follower.metadata
            missed = behind(progress.view, newer, plan)
            if missed.placements:
                self.metrics.coordinator_behind_placements.inc()
            if missed.schema:
                self.metrics.coordinator_behind_schema.inc()
            if missed.placements or missed.schema:
                trace.get_current_span().set_attribute(
                    attr.BEHIND,
                    [
                        w
                        for w, hit in (("schema", missed.schema), ("placements", missed.placements))
                        if hit
                    ],
                )
            progress.view = newer
            decision = self.planner.recheck(plan, newer, newer.epoch, progress.answered)
        assert decision is not Recheck.CATCH_UP, "the view is the newest epoch seen"
        return decision is Recheck.SATISFIED
