"""The read path: a client's read of one partition (or clustering slice), coordinated at a
consistency level.

Theory of operation
-------------------
In this order (DESIGN.md "Read path (tracked)"):

1. Catch up to the client's epoch; check the read against the schema at this node's epoch
   (``prepare_read``); take the session's HLC into this node's clock.
2. Plan it (``coordinator_plan``): the token's read group, the members the level counts and
   how many must answer, in preference order (this node, its datacenter, the rest; shuffled
   within each tier so that the load spreads).
3. Gather (``_gather``): data from the first, a summary (tracked keyspaces) or a digest
   (untracked) from the next ``needed - 1``. A replica that fails is replaced by the next in
   order; when the data replica fails and no spare is left, one that sent a summary is asked
   for the data instead. Too few answers fail the read (``TimedOut`` at the deadline, else
   ``Unavailable``) with the replicas' outcome: who answered, refused or did not (a spare
   never needed is "not asked").
4. Re-check the plan against any newer epoch a reply revealed (``Coordinator.recheck``); if the
   replicas that answered no longer satisfy the level, fail (``StalePlan``).
5. Reconcile (``epochal.replica.read_repair``): tracked, mutation by mutation, so a write is
   never seen torn; untracked, cell by cell. The repair's requests carry the newest epoch the
   read has seen, so a replica catches up to it first and knows every node whose mutations it
   may get.
6. Resolve the cells into rows (at most ``--max-rows-per-read``) and answer them, with
   ``ReadStats``: who was asked, who sent the data, what the summaries showed, what was
   repaired.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry import trace

from epochal.errors import InvalidRequest, ReplicaOutcome, StalePlan, TimedOut, Unavailable
from epochal.mtrack import MutationId
from epochal.replica.arrivals import Arrivals, Progress
from epochal.replica.coordinator_plan import Plan
from epochal.replica.handles import PeerFailed
from epochal.replica.local_replica import Outcome, PartitionRead, PeerReply
from epochal.replica.model import ResolvedRow, resolve
from epochal.replica.mutations import BadRequest, PreparedRead, ReadDraft, prepare_read
from epochal.replica.read_repair import ReadRepair
from epochal.tcm import ClusterMetadata, Table
from epochal.tcm.consistency import Consistency
from epochal.telemetry import attributes as attr

if TYPE_CHECKING:
    from epochal.replica.coordinator import Coordinator


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


class ReadPath:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.repair = ReadRepair(coordinator)
        self._random = random.Random()

    async def read(
        self, draft: ReadDraft, level: Consistency, *, client_epoch: int, session_hlc: int
    ) -> ReadResult:
        coordinator = self.coordinator
        timeout_ms = coordinator.settings.read_timeout_ms
        with coordinator.coordinating("read", level, timeout_ms) as (deadline, traced):
            metadata = await coordinator.metadata_at(client_epoch, deadline)
            try:
                prepared = prepare_read(metadata, draft)
            except BadRequest as error:
                raise InvalidRequest(str(error)) from None
            assert coordinator.ids is not None, "admitted only once registered"
            coordinator.ids.observe(session_hlc)  # raises ClockSkew (FAILED_PRECONDITION)
            plan = coordinator.planner.plan(
                metadata, level, prepared.keyspace.name, prepared.token, write=False
            )
            candidates = list(plan.counting)
            self._random.shuffle(candidates)
            order = coordinator.planner.preference(metadata, candidates)
            read = PartitionRead(
                plan.keyspace,
                prepared.table.id,
                plan.token,
                prepared.partition_key,
                prepared.bounds,
            )
            progress = Progress(view=metadata)
            stats = ReadStats()
            if traced.is_recording():
                traced.set_attributes(
                    {
                        attr.EPOCH: metadata.epoch,
                        attr.KEYSPACE: plan.keyspace,
                        attr.TABLE: prepared.table.name,
                        attr.TOKEN: plan.token,
                    }
                )
            try:
                replies = await self._gather(
                    metadata, read, prepared.tracked, order, plan, progress, stats, deadline
                )
                result = await self._answer(
                    plan, prepared, read, progress, stats, replies, deadline
                )
            finally:  # also when the read failed: who answered it
                if traced.is_recording():
                    traced.set_attribute(attr.REPLICAS_ANSWERED, sorted(progress.answered))
            if traced.is_recording():
                traced.set_attribute(attr.ROWS, len(result.rows))
                _trace(traced, result)
            return result

    async def _answer(
        self,
        plan: Plan,
        prepared: PreparedRead,
        read: PartitionRead,
        progress: Progress,
        stats: ReadStats,
        replies: dict[str, PeerReply],
        deadline: float,
    ) -> ReadResult:
        """Re-check the plan, reconcile the replies, and resolve the rows."""
        coordinator = self.coordinator
        if not coordinator.hooks.skip_plan_recheck and not await coordinator.recheck(
            plan, progress, deadline
        ):
            replicas = self._outcome(plan, progress, deadline)
            raise StalePlan(
                f"{plan.level.value} read of token {plan.token}: the read group changed after "
                f"the plan (epoch {plan.epoch}, group {', '.join(sorted(plan.group))}); at "
                f"epoch {progress.view.epoch} {replicas.describe()}; retry",
                replicas=replicas,
            )
        epoch = progress.view.epoch
        if prepared.tracked:
            cells = await self.repair.reconcile(epoch, read, stats, replies, deadline)
        else:
            cells = await self.repair.digests(epoch, read, stats, replies, deadline)
        rows = resolve(cells, prepared.bounds, prepared.columns)
        limit = coordinator.settings.max_rows_per_read
        if len(rows) > limit:
            raise InvalidRequest(
                f"the read matches {len(rows)} rows; the limit is {limit} "
                "(--max-rows-per-read; there is no paging): read a narrower clustering slice"
            )
        hlc = max((c.hlc for c in cells), default=0)
        return ReadResult(prepared.table, rows, stats, coordinator.follower.epoch, hlc)

    async def _gather(
        self,
        metadata: ClusterMetadata,
        read: PartitionRead,
        tracked: bool,
        order: Sequence[str],
        plan: Plan,
        progress: Progress,
        stats: ReadStats,
        deadline: float,
    ) -> dict[str, PeerReply]:
        """Data from one replica and a summary (or digest) from ``plan.needed - 1`` others, the
        data replica's reply first; a replica that fails is replaced by the next in ``order``."""
        loop = asyncio.get_running_loop()
        spare = list(order)
        replies: dict[str, PeerReply] = {}
        arrivals: Arrivals[tuple[str, bool]] = Arrivals()
        data_node = ""

        def launch(data: bool) -> None:
            """Ask the next replica in ``order`` (skipping any that cannot be reached)."""
            while spare:
                node = spare.pop(0)
                try:
                    future = self.coordinator.handle(metadata, node).read(
                        metadata.epoch,
                        read,
                        data=data,
                        summary=tracked,
                        digest=not tracked and not data,
                        timeout_s=deadline - loop.time(),
                    )
                except PeerFailed as failed:
                    progress.note_failure(node, failed.reason)
                    continue
                progress.note_asked(node)
                stats.replicas.append(node)
                arrivals.watch((node, data), future)
                return

        launch(True)
        for _ in range(plan.needed - 1):
            launch(False)
        while not (data_node and len(replies) >= plan.needed):
            remaining = deadline - loop.time()
            if not arrivals.outstanding or remaining <= 0 or not await arrivals.next(remaining):
                raise self._failure(plan, progress, deadline)
            for (node, data), future in arrivals.take():
                try:
                    reply = future.result()
                    ok = progress.note_reply(node, reply)
                except PeerFailed as failed:
                    progress.note_failure(node, failed.reason)
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
        others = [node for node in replies if node != data_node]
        return {node: replies[node] for node in [data_node, *others]}

    def _outcome(self, plan: Plan, progress: Progress, deadline: float) -> ReplicaOutcome:
        return progress.outcome(
            plan,
            needed=self.coordinator.planner.needed(progress.view, plan),
            timeout_ms=self.coordinator.settings.read_timeout_ms,
            timed_out=asyncio.get_running_loop().time() >= deadline,
        )

    def _failure(self, plan: Plan, progress: Progress, deadline: float) -> Exception:
        """Too few replicas answered: by the deadline (TimedOut), or all that could be asked
        did (Unavailable); either names what each replica did."""
        replicas = self._outcome(plan, progress, deadline)
        read = f"{plan.level.value} read of token {plan.token}"
        if asyncio.get_running_loop().time() >= deadline:
            return TimedOut(
                f"{read} timed out after {self.coordinator.settings.read_timeout_ms} ms: "
                f"{replicas.describe()}; retry",
                replicas=replicas,
            )
        return Unavailable(
            f"{read} got too few replicas: {replicas.describe()}; retry", replicas=replicas
        )


def _trace(traced: trace.Span, result: ReadResult) -> None:
    stats = result.stats
    traced.set_attribute(attr.EPOCH, result.epoch)
    traced.set_attribute(attr.REPLICAS_CONTACTED, stats.replicas)
    traced.set_attribute(attr.REPAIRED_MUTATIONS, len(stats.repaired))
    traced.set_attribute(attr.REPAIRED_CELLS, stats.repaired_cells)
    if stats.summary_rounds:
        traced.set_attribute(attr.SUMMARY_ROUNDS, stats.summary_rounds)
        traced.set_attribute(attr.SUMMARIES_AGREED, stats.summaries_agreed)
        traced.set_attribute(
            attr.DIFFERING_LOGS,
            [
                f"{node}:{log_node}/L{log}"
                for node, logs in sorted(stats.differing.items())
                for log_node, log in logs
            ],
        )
