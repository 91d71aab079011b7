"""The coordinator: a client's write or read, carried out at a consistency level.

Theory of operation
-------------------
Any replica coordinates. It first catches up to the client's epoch, then plans with its own
metadata: the token's write group (for a write) or read group (for a read) at that epoch, and
the consistency level counted over it (``epochal.tcm.consistency``).

Write: the mutation gets an id from this node's log for the token's range (which fixes its
timestamp), goes to every member of the write group, and succeeds once the level's count of
them stored it durably. Read: one replica is asked for data (this node when it is a replica),
as many others as the level needs for a summary (tracked keyspaces) or a digest (untracked);
differences are repaired before the answer (``epochal.replica.read_repair``). A replica that
fails is replaced by a spare from the group when there is one.

Every reply carries the replica's epoch. When one is newer than the plan's, the coordinator
catches up and re-checks the plan against the newer placements before it answers success: the
replicas that answered must still satisfy the level in the newer group, else the request fails
(``StalePlan``) — it never answers success on a plan it knows to be stale. Both counts of such
discoveries are kept (``coordinator_behind_placements``, ``coordinator_behind_schema``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from opentelemetry import trace

from epochal.errors import (
    ClockSkew,
    EpochalError,
    InvalidRequest,
    Overloaded,
    StalePlan,
    TimedOut,
    Unavailable,
)
from epochal.mtrack import MutationId
from epochal.replica.codec import mutation_to_body
from epochal.replica.handles import LocalHandle, PeerFailed, RemoteHandle, ReplicaHandle
from epochal.replica.ids import MutationIds
from epochal.replica.local_replica import (
    LocalReplica,
    Outcome,
    PartitionRead,
    PeerReply,
)
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import ResolvedRow, resolve
from epochal.replica.mutations import (
    BadRequest,
    PreparedRead,
    ReadDraft,
    WriteDraft,
    prepare_read,
    prepare_write,
)
from epochal.replica.read_repair import ReadRepair
from epochal.replica.settings import ReplicaSettings
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata, Table
from epochal.tcm.consistency import Consistency, counted, required, satisfied
from epochal.telemetry import span
from epochal.wire.channels import Channels

Label = TypeVar("Label")


@dataclass(frozen=True, slots=True)
class Hooks:
    """Test-only switches (served only with --enable-test-hooks)."""

    skip_plan_recheck: bool = False


@dataclass(frozen=True, slots=True)
class WriteResult:
    mutation_id: MutationId
    epoch: int
    acknowledged: tuple[str, ...]


@dataclass(slots=True)
class ReadStats:
    replicas: list[str] = field(default_factory=list)
    data_replica: str = ""
    repaired: list[MutationId] = field(default_factory=list)
    digest_mismatch: bool = False
    repaired_cells: int = 0
    # Tracked: rounds of summary comparison (1: they agreed at once), whether the summaries
    # agreed in the first round, and per replica the logs that differed from the data's then.
    summary_rounds: int = 0
    summaries_agreed: bool = False
    differing: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReadResult:
    table: Table
    rows: list[ResolvedRow]
    stats: ReadStats
    epoch: int
    hlc: int


@dataclass(slots=True)
class _Progress:
    """Answers collected so far for one request, and the newest epoch they revealed."""

    plan: ClusterMetadata
    view: ClusterMetadata
    answered: set[str] = field(default_factory=set)
    failures: dict[str, str] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)  # replicas that refused it as such
    newest_epoch: int = 0


class Coordinator:
    def __init__(
        self,
        settings: ReplicaSettings,
        follower: MetadataFollower,
        local: LocalReplica,
        channels: Channels,
        metrics: ReplicaMetrics,
    ) -> None:
        self.settings = settings
        self.follower = follower
        self.local = local
        self.channels = channels
        self.metrics = metrics
        self.node_id = ""
        self.ids: MutationIds | None = None
        self.hooks = Hooks()
        self._handles: dict[str, RemoteHandle] = {}
        self._in_flight = 0
        self._datacenters: tuple[object, Mapping[str, str]] = (None, {})
        self._random = random.Random()
        self.read_repair = ReadRepair(self)

    def attach(self, node_id: str, ids: MutationIds) -> None:
        self.node_id = node_id
        self.ids = ids
        self.close()

    # ------------------------------------------------------------------ shared

    def handle(self, metadata: ClusterMetadata, node_id: str) -> ReplicaHandle:
        if node_id == self.node_id:
            return LocalHandle(node_id, self.local)
        node = metadata.nodes.get(node_id)
        if node is None:
            raise PeerFailed(node_id, f"not in the directory at epoch {metadata.epoch}")
        handle = self._handles.get(node_id)
        if handle is None or handle.address != node.address:
            if handle is not None:
                handle.close()  # the node moved: its old stream goes
            handle = self._handles[node_id] = RemoteHandle(node_id, node.address, self.channels)
        return handle

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    @contextlib.contextmanager
    def _admitted(self, operation: str) -> Any:
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

    def datacenters(self, metadata: ClusterMetadata) -> Mapping[str, str]:
        """Node id -> datacenter at ``metadata`` (computed once per directory)."""
        if self._datacenters[0] is not metadata.nodes:
            by_node = {n.node_id: n.datacenter for n in metadata.nodes.values()}
            self._datacenters = (metadata.nodes, by_node)
        return self._datacenters[1]

    def is_satisfied(
        self,
        level: Consistency,
        metadata: ClusterMetadata,
        group: frozenset[str],
        answered: set[str],
    ) -> bool:
        return satisfied(
            level, group, answered, self.datacenters(metadata), self.settings.datacenter
        )

    def _needed(
        self, level: Consistency, metadata: ClusterMetadata, group: frozenset[str]
    ) -> frozenset[str]:
        """The members whose answers count; raises Unavailable when none can."""
        counting = counted(level, group, self.datacenters(metadata), self.settings.datacenter)
        if required(level, counting) == 0:
            where = f" in {self.settings.datacenter}" if level is Consistency.LOCAL_QUORUM else ""
            raise Unavailable(f"no replica{where} can answer at {level.value}")
        return counting

    async def _recheck(
        self,
        progress: _Progress,
        level: Consistency,
        keyspace: str,
        token: int,
        *,
        write: bool,
        deadline: float,
    ) -> bool:
        """Catch up to the newest epoch a reply revealed (or this node applied meanwhile),
        then: do the answers still satisfy the level under the newer placements? (True also
        when nothing newer was seen.)"""
        progress.newest_epoch = max(progress.newest_epoch, self.follower.epoch)
        if progress.newest_epoch <= progress.view.epoch:
            return self.is_satisfied(
                level,
                progress.view,
                progress.view.replica_group(keyspace, token, write=write),
                progress.answered,
            )
        remaining = deadline - asyncio.get_running_loop().time()
        if not await self.follower.catch_up(progress.newest_epoch, max(remaining, 0.0)):
            raise Unavailable(
                f"a replica answered at epoch {progress.newest_epoch}; {self.node_id} could not "
                f"learn it in time to re-check its plan (made at epoch {progress.plan.epoch})",
                rule="stale_plan",
            )
        newer = self.follower.metadata
        self._count_behind(progress.view, newer, keyspace, token, write=write)
        progress.view = newer
        group = newer.replica_group(keyspace, token, write=write)
        return self.is_satisfied(level, newer, group, progress.answered)

    def _count_behind(
        self, old: ClusterMetadata, new: ClusterMetadata, keyspace: str, token: int, *, write: bool
    ) -> None:
        if old.replica_group(keyspace, token, write=write) != new.replica_group(
            keyspace, token, write=write
        ):
            self.metrics.coordinator_behind_placements.inc()
        if old.keyspaces.get(keyspace) != new.keyspaces.get(keyspace):
            self.metrics.coordinator_behind_schema.inc()

    def note_reply(self, progress: _Progress, node: str, reply: PeerReply) -> bool:
        """Record a replica's answer; True when it counts."""
        progress.newest_epoch = max(progress.newest_epoch, reply.epoch)
        if reply.outcome is Outcome.OK:
            progress.answered.add(node)
            return True
        progress.failures[node] = f"{reply.outcome.value}: {reply.message}"
        if reply.outcome is Outcome.MALFORMED:
            progress.malformed[node] = reply.message
        return False

    # ------------------------------------------------------------------ writes

    async def write(
        self,
        draft: WriteDraft,
        level: Consistency,
        *,
        client_epoch: int,
        session_hlc: int,
        retry_of: MutationId | None,
    ) -> WriteResult:
        with self._admitted("write"):
            started = time.monotonic()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.settings.write_timeout_ms / 1000
            with span("replica.write") as traced:
                traced.set_attribute("consistency", level.value)
                result = await self._write(
                    draft, level, client_epoch, session_hlc, retry_of, deadline, traced
                )
            self.metrics.write_latency_by_level[level].observe(time.monotonic() - started)
            return result

    async def _write(
        self,
        draft: WriteDraft,
        level: Consistency,
        client_epoch: int,
        session_hlc: int,
        retry_of: MutationId | None,
        deadline: float,
        span: trace.Span,
    ) -> WriteResult:
        metadata = await self.metadata_at(client_epoch, deadline)
        try:
            prepared = prepare_write(
                metadata,
                draft,
                max_value_bytes=self.settings.max_value_bytes,
                max_mutation_bytes=self.settings.max_mutation_bytes,
            )
        except BadRequest as error:
            raise InvalidRequest(str(error)) from None
        keyspace = prepared.keyspace.name
        group = metadata.replica_group(keyspace, prepared.token, write=True)
        if not group:
            raise Unavailable(
                f"no replica owns token {prepared.token} of {keyspace} at epoch {metadata.epoch} "
                "(has the ring been formed?)",
            )
        self._needed(level, metadata, group)
        mutation_id = self._mutation_id(metadata, prepared, session_hlc, retry_of)
        mutation = prepared.with_id(mutation_id)
        # Encoded once, for every replica (the local one stores these bytes as the log entry).
        body = mutation_to_body(mutation)
        if span.is_recording():
            span.set_attribute("epoch", metadata.epoch)
            span.set_attribute("mutation_id", str(mutation_id))
            span.set_attribute("replicas", sorted(group))
        progress = _Progress(plan=metadata, view=metadata)
        timeout_s = deadline - asyncio.get_running_loop().time()

        def send(node: str) -> asyncio.Future[PeerReply]:
            return self.handle(metadata, node).apply(
                metadata.epoch, mutation, body, timeout_s=timeout_s
            )

        try:
            done = await self._collect(
                {node: send for node in group},
                progress,
                deadline,
                lambda: self._write_done(progress, level, keyspace, prepared.token, deadline),
            )
        except EpochalError as error:
            # Replicas may hold the mutation already: a retry must reuse its id.
            error.mutation_id = error.mutation_id or mutation_id.pack().hex()
            raise
        if span.is_recording():
            span.set_attribute("acknowledged", sorted(progress.answered))
        if done:
            return WriteResult(mutation_id, self.follower.epoch, tuple(sorted(progress.answered)))
        raise self._write_failure(
            progress, level, keyspace, prepared.token, group, mutation_id, deadline
        )

    def _mutation_id(
        self,
        metadata: ClusterMetadata,
        prepared: Any,
        session_hlc: int,
        retry_of: MutationId | None,
    ) -> MutationId:
        assert self.ids is not None
        if retry_of is not None:
            self._check_issued(metadata, retry_of)
            return retry_of
        self.ids.observe(session_hlc)  # raises ClockSkew (FAILED_PRECONDITION)
        return self.ids.next_id(metadata, prepared.keyspace, prepared.token)

    def _check_issued(self, metadata: ClusterMetadata, retry_of: MutationId) -> None:
        """A client resends only a mutation id a coordinator gave it: refuse one no coordinator
        could have issued (an unknown node, a log or sequence this node never reached, a time
        beyond the allowed skew), before it reaches storage or the clock."""
        assert self.ids is not None
        problem = ""
        if retry_of.hlc == 0:
            problem = "no coordinator issues time 0"
        elif retry_of.node >= metadata.next_node_number:
            problem = f"node {retry_of.node} was never issued"
        elif retry_of.node == self.ids.node and not self.ids.could_have_issued(retry_of):
            problem = f"{self.node_id} never issued it"
        else:
            try:
                self.ids.observe(retry_of.hlc)
            except ClockSkew as error:
                problem = str(error)
        if problem:
            raise InvalidRequest(
                f"the retry's mutation id {retry_of} is not one a coordinator gave out: "
                f"{problem}; resend the write without it",
                rule="unknown_mutation_id",
            )

    async def _write_done(
        self, progress: _Progress, level: Consistency, keyspace: str, token: int, deadline: float
    ) -> bool:
        plan_group = progress.view.replica_group(keyspace, token, write=True)
        if not self.is_satisfied(level, progress.view, plan_group, progress.answered):
            return False
        if self.hooks.skip_plan_recheck:
            return True
        return await self._recheck(progress, level, keyspace, token, write=True, deadline=deadline)

    def _write_failure(
        self,
        progress: _Progress,
        level: Consistency,
        keyspace: str,
        token: int,
        group: frozenset[str],
        mutation_id: MutationId,
        deadline: float,
    ) -> Exception:
        if progress.malformed:
            # A replica held this mutation id with other content (a retry that resent an id
            # with another write): retrying cannot help.
            node, why = sorted(progress.malformed.items())[0]
            return InvalidRequest(
                f"{node} refused {mutation_id}: {why}; a retry must resend the write it was "
                "first sent with, or none",
                rule="malformed",
            )
        view_group = progress.view.replica_group(keyspace, token, write=True)
        failures = "; ".join(f"{n}: {why}" for n, why in sorted(progress.failures.items()))
        detail = (
            f"{level.value} write of token {token} ({mutation_id}): acknowledged by "
            f"{sorted(progress.answered) or 'none'} of the write group {sorted(view_group)} at "
            f"epoch {progress.view.epoch}" + (f"; failed: {failures}" if failures else "")
        )
        if progress.view.epoch > progress.plan.epoch:
            return StalePlan(
                f"the replica group changed after the plan (epoch {progress.plan.epoch}, group "
                f"{sorted(group)}): {detail}; retry with the same mutation id",
                mutation_id=mutation_id.pack().hex(),
            )
        if asyncio.get_running_loop().time() >= deadline:
            return TimedOut(f"timed out: {detail}", mutation_id=mutation_id.pack().hex())
        return Unavailable(f"too few replicas: {detail}", mutation_id=mutation_id.pack().hex())

    async def _collect(
        self,
        calls: dict[str, Callable[[str], asyncio.Future[PeerReply]]],
        progress: _Progress,
        deadline: float,
        done: Callable[[], Awaitable[bool]],
    ) -> bool:
        """Send every call; after each answer ask ``done``; stop at True, when all answered, or
        at the deadline. Calls still out are left to finish on their own."""
        loop = asyncio.get_running_loop()
        arrivals: _Arrivals[str] = _Arrivals()
        # Others first: this node's own write is an fsync on the loop, and the requests to the
        # others should be on their way while it runs.
        for node, call in sorted(calls.items(), key=lambda item: item[0] == self.node_id):
            try:
                arrivals.watch(node, call(node))
            except PeerFailed as error:
                progress.failures[node] = error.reason
        while arrivals.outstanding:
            remaining = deadline - loop.time()
            if remaining <= 0 or not await arrivals.next(remaining):
                return False
            counted_one = False
            for node, future in arrivals.take():
                try:
                    counted_one |= self.note_reply(progress, node, future.result())
                except PeerFailed as error:
                    progress.failures[node] = error.reason
            newer = progress.newest_epoch > progress.view.epoch
            if (counted_one or newer) and await done():
                return True
        return await done()

    # ------------------------------------------------------------------ reads

    async def read(
        self, draft: ReadDraft, level: Consistency, *, client_epoch: int, session_hlc: int
    ) -> ReadResult:
        with self._admitted("read"):
            started = time.monotonic()
            deadline = asyncio.get_running_loop().time() + self.settings.read_timeout_ms / 1000
            with span("replica.read") as traced:
                traced.set_attribute("consistency", level.value)
                result = await self._read(draft, level, client_epoch, session_hlc, deadline)
                traced.set_attribute("epoch", result.epoch)
                traced.set_attribute("replicas", result.stats.replicas)
                traced.set_attribute("repaired_mutations", len(result.stats.repaired))
                traced.set_attribute("repaired_cells", result.stats.repaired_cells)
                if result.stats.summary_rounds:
                    traced.set_attribute("summary_rounds", result.stats.summary_rounds)
                    traced.set_attribute("summaries_agreed", result.stats.summaries_agreed)
                    traced.set_attribute(
                        "differing_logs",
                        [
                            f"{node}:{log_node}/L{log}"
                            for node, logs in sorted(result.stats.differing.items())
                            for log_node, log in logs
                        ],
                    )
            self.metrics.read_latency_by_level[level].observe(time.monotonic() - started)
            return result

    async def _read(
        self,
        draft: ReadDraft,
        level: Consistency,
        client_epoch: int,
        session_hlc: int,
        deadline: float,
    ) -> ReadResult:
        metadata = await self.metadata_at(client_epoch, deadline)
        try:
            prepared = prepare_read(metadata, draft)
        except BadRequest as error:
            raise InvalidRequest(str(error)) from None
        assert self.ids is not None
        self.ids.observe(session_hlc)  # raises ClockSkew (FAILED_PRECONDITION)
        keyspace = prepared.keyspace.name
        group = metadata.replica_group(keyspace, prepared.token, write=False)
        if not group:
            raise Unavailable(
                f"no replica owns token {prepared.token} of {keyspace} at epoch {metadata.epoch}"
            )
        counting = self._needed(level, metadata, group)
        order = self._preference(metadata, [n for n in group if n in counting])
        needed = required(level, counting)
        read = PartitionRead(
            keyspace, prepared.table.id, prepared.token, prepared.partition_key, prepared.bounds
        )
        progress = _Progress(plan=metadata, view=metadata)
        stats = ReadStats()
        replies = await self._gather_reads(
            metadata, read, prepared, order, needed, progress, stats, deadline
        )
        if not self.hooks.skip_plan_recheck and not await self._recheck(
            progress, level, keyspace, prepared.token, write=False, deadline=deadline
        ):
            newer = progress.view.replica_group(keyspace, prepared.token, write=False)
            raise StalePlan(
                f"the read group of token {prepared.token} changed after the plan (epoch "
                f"{metadata.epoch}, group {sorted(group)}): {sorted(progress.answered)} do not "
                f"satisfy {level.value} of {sorted(newer)} at epoch {progress.view.epoch}; retry"
            )
        # The repair's requests carry the newest epoch this read has seen (the re-check's): a
        # replica catches up to it first, so it knows every node whose mutations it may get.
        epoch = progress.view.epoch
        if prepared.tracked:
            cells = await self.read_repair.reconcile(epoch, read, stats, replies, deadline)
        else:
            cells = await self.read_repair.digests(epoch, read, stats, replies, deadline)
        rows = resolve(cells, prepared.bounds, prepared.columns)
        if len(rows) > self.settings.max_rows_per_read:
            raise InvalidRequest(
                f"the read matches {len(rows)} rows; the limit is "
                f"{self.settings.max_rows_per_read} (--max-rows-per-read; there is no paging): "
                "read a narrower clustering slice"
            )
        hlc = max((c.hlc for c in cells), default=0)
        return ReadResult(prepared.table, rows, stats, self.follower.epoch, hlc)

    def _preference(self, metadata: ClusterMetadata, nodes: list[str]) -> list[str]:
        """This node first, then its datacenter, then the rest; random within each tier so
        that summary requests spread over the replicas."""
        shuffled = list(nodes)
        self._random.shuffle(shuffled)

        def rank(node: str) -> int:
            if node == self.node_id:
                return 0
            info = metadata.nodes.get(node)
            return 1 if info is not None and info.datacenter == self.settings.datacenter else 2

        return sorted(shuffled, key=rank)

    async def _gather_reads(
        self,
        metadata: ClusterMetadata,
        read: PartitionRead,
        prepared: PreparedRead,
        order: list[str],
        needed: int,
        progress: _Progress,
        stats: ReadStats,
        deadline: float,
    ) -> dict[str, PeerReply]:
        """Data from one replica and a summary (or digest) from needed - 1 others; a replica
        that fails is replaced by the next one in ``order``."""
        loop = asyncio.get_running_loop()
        tracked = prepared.tracked
        spare = list(order)
        replies: dict[str, PeerReply] = {}
        arrivals: _Arrivals[tuple[str, bool]] = _Arrivals()
        data_node = ""

        def launch(data: bool) -> None:
            """Ask the next replica in ``order`` (skipping any that cannot be reached)."""
            while spare:
                node = spare.pop(0)
                try:
                    future = self.handle(metadata, node).read(
                        metadata.epoch,
                        read,
                        data=data,
                        summary=tracked,
                        digest=not tracked and not data,
                        timeout_s=deadline - loop.time(),
                    )
                except PeerFailed as error:
                    progress.failures[node] = error.reason
                    continue
                stats.replicas.append(node)
                arrivals.watch((node, data), future)
                return

        launch(True)
        for _ in range(needed - 1):
            launch(False)
        while not (data_node and len(replies) >= needed):
            remaining = deadline - loop.time()
            if not arrivals.outstanding or remaining <= 0 or not await arrivals.next(remaining):
                raise self._read_failure(progress, needed, deadline)
            for (node, data), future in arrivals.take():
                try:
                    reply = future.result()
                    ok = self.note_reply(progress, node, reply)
                except PeerFailed as error:
                    progress.failures[node] = error.reason
                    ok = False
                else:
                    if reply.outcome is Outcome.TOO_LARGE:
                        raise InvalidRequest(reply.message, rule="too_large")
                if ok:
                    replies[node] = reply
                    if data:
                        data_node = stats.data_replica = node
                elif spare:
                    launch(data)
                elif data and replies:
                    # No spare: ask one that gave a summary for the data instead.
                    substitute = next(iter(replies))
                    del replies[substitute]
                    progress.answered.discard(substitute)
                    spare.append(substitute)
                    launch(True)
        return {
            node: replies[node] for node in [data_node, *[n for n in replies if n != data_node]]
        }

    def _read_failure(self, progress: _Progress, needed: int, deadline: float) -> Exception:
        failures = "; ".join(f"{n}: {why}" for n, why in sorted(progress.failures.items()))
        detail = f"{needed} replica(s) needed, {len(progress.answered)} answered" + (
            f"; failed: {failures}" if failures else ""
        )
        if asyncio.get_running_loop().time() >= deadline:
            return TimedOut(f"read timed out: {detail}")
        return Unavailable(f"too few replicas for the read: {detail}")


class _Arrivals(Generic[Label]):
    """Answers of one request's calls as they arrive, each with its label, for the one
    coroutine that waits on them (cheaper than ``asyncio.wait``, which re-registers on every
    call each time). An answer nobody takes any more is dropped, its exception retrieved."""

    def __init__(self) -> None:
        self.outstanding = 0
        self._ready: list[tuple[Label, asyncio.Future[PeerReply]]] = []
        self._waiter: asyncio.Future[None] | None = None

    def watch(self, label: Label, future: asyncio.Future[PeerReply]) -> None:
        self.outstanding += 1
        future.add_done_callback(lambda done: self._arrived(label, done))

    def _arrived(self, label: Label, future: asyncio.Future[PeerReply]) -> None:
        if not future.cancelled():
            future.exception()  # retrieved: the answer may be taken by nobody
        self._ready.append((label, future))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self, timeout_s: float) -> bool:
        """Until an answer is ready (True) or ``timeout_s`` passed (False)."""
        if not self._ready:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout_s, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        return bool(self._ready)

    def take(self) -> list[tuple[Label, asyncio.Future[PeerReply]]]:
        ready, self._ready = self._ready, []
        self.outstanding -= len(ready)
        return ready


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
