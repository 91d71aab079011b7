"""This node as a replica: what it does for a coordinator (a peer's, or its own in-process).

Theory of operation
-------------------
Every request names the coordinator's epoch. A replica behind it catches up first (bounded by
``--catch-up-timeout-ms``; else it answers BEHIND). Then it checks the request against its own
epoch, which may be newer: a write or repair is accepted only if this node is in the token's
write group, a read only if it is in the read group; otherwise it refuses with NOT_A_REPLICA,
and the epoch in every answer lets the coordinator catch up and re-check its plan.

Writes are group-committed: everything submitted during one pass of the event loop is stored
in one durable transaction, each mutation whole, and each is acknowledged only after it is
durable. The queue is bounded (``--max-pending-applies``): past it the replica answers
OVERLOADED. A partition's row data and its summary are read with no await between them, and
every write runs on this loop, so they describe the same state (one snapshot).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from epochal.mtrack import LogDigests, MutationId, Sketch, make_hlc, physical_ms_of
from epochal.mtrack.cohorts import CohortMark
from epochal.replica.data_store import CellRepair, Stored
from epochal.replica.ids import wall_ms
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.model import Cell, Mutation, digest
from epochal.replica.mutations import BadRequest, check_repaired_cells, check_stored
from epochal.replica.reconcile_ops import DROP, HELD, Admission, MarkOp, Refusal, malformed
from epochal.replica.reconcile_store import MarkKind
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.follower import MetadataFollower
from epochal.runtime.service import fatal
from epochal.tcm.keys import EVERYTHING, KeyBounds
from epochal.wire.multiplex import MAX_REQUEST_BYTES

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    OK = "ok"
    NOT_A_REPLICA = "not_a_replica"
    UNKNOWN_TABLE = "unknown_table"
    BEHIND = "behind"
    OVERLOADED = "overloaded"
    CLOCK_SKEW = "clock_skew"
    TOO_LARGE = "too_large"
    MALFORMED = "malformed"  # no coordinator could have sent it; never stored
    FENCED = "fenced"  # below the reconciliation fence of its range: retry with a fresh id
    SUPERSEDED = "superseded"  # a reconciler lease token below the highest seen
    MISMATCH = "mismatch"  # own ids differ from a low bound's agreed digests
    LAPSED = "lapsed"  # a reconciler lease token not claimed or renewed here within its lease


# What another node may send: its coordinator applied its own --max-value-bytes and
# --max-mutation-bytes, which may differ from this node's; the stream's request limit bounds it.
PEER_LIMITS = {"max_value_bytes": MAX_REQUEST_BYTES, "max_mutation_bytes": MAX_REQUEST_BYTES}
# Answers stay well under the channels' message limit (epochal.wire.channels).
MAX_REPLY_BYTES = 32 << 20
FETCH_REPLY_BYTES = 8 << 20
UNSTORED = {DROP: "mutations_below_low_bound", HELD: "mutations_duplicate"}  # acknowledged: counted


@dataclass(frozen=True, slots=True)
class PeerReply:
    """A replica's answer to a coordinator; ``epoch`` is the replica's."""

    epoch: int
    outcome: Outcome
    message: str = ""
    cells: tuple[Cell, ...] = ()
    summary: LogDigests | None = None
    digest: bytes = b""
    sketch: Sketch | None = None
    bodies: tuple[bytes, ...] = ()  # fetched mutations, encoded
    examined: int = 0  # how many of the ids asked for a fetch looked up
    fence: int = 0  # FENCED: the reconciliation fence the write's id was below
    held: tuple[MutationId, ...] = ()  # fetched ids below the low bound: collected, held
    cohorts: tuple[CohortMark, ...] = ()  # with a summary: the cohorts held at the token


@dataclass(frozen=True, slots=True)
class PartitionRead:
    keyspace: str
    table_id: str
    token: int
    partition_key: bytes
    bounds: KeyBounds = EVERYTHING
    low_bound: int = 0  # tracked: summarize ids at or above this and this replica's own bound


@dataclass(eq=False, repr=False)
class LocalReplica:
    settings: ReplicaSettings
    storage: ReplicaStorage
    follower: MetadataFollower
    metrics: ReplicaMetrics

    def __post_init__(self) -> None:
        self.node_id = ""
        self._mutations: list[tuple[Mutation, bytes, bool, asyncio.Future[PeerReply]]] = []
        self._repairs: list[tuple[CellRepair, asyncio.Future[PeerReply]]] = []
        # The reconciler's operations, each with the number of writes queued before it.
        self._ops: list[tuple[int, MarkOp, asyncio.Future[PeerReply]]] = []
        self.admission = Admission(self.storage.reconcile, self.storage.data)
        self._flush_scheduled = False

    def write_floor(self) -> int:
        """The oldest id a new write may carry here: the write timeout ago (``reconcile_ops``)."""
        return make_hlc(max(wall_ms() - self.settings.write_timeout_ms, 0))

    # ------------------------------------------------------------------ the epoch gate

    async def _gate(
        self, epoch: int, keyspace: str, table_id: str, token: int, *, write: bool
    ) -> PeerReply | None:
        """None when this node may serve the request at its epoch; else the refusal."""
        follower = self.follower
        if epoch > follower.epoch and not await follower.catch_up(
            epoch, self.settings.catch_up_timeout_ms / 1000
        ):
            return self._refuse(
                Outcome.BEHIND,
                f"{self.node_id} could not catch up from epoch {follower.epoch} to {epoch} in time",
            )
        return self._gate_now(keyspace, table_id, token, write=write)

    def _gate_now(
        self, keyspace: str, table_id: str, token: int, *, write: bool
    ) -> PeerReply | None:
        """The gate at this node's epoch (the request's is not newer)."""
        if self.follower.stopped_reason:
            return self._refuse(Outcome.BEHIND, self.follower.stopped_reason)
        metadata = self.follower.metadata
        table = self.follower.tables_by_id.get(table_id)
        if table is None or table.keyspace != keyspace:
            return self._refuse(
                Outcome.UNKNOWN_TABLE,
                f"table {table_id} of keyspace {keyspace!r} does not exist at epoch "
                f"{metadata.epoch} on {self.node_id}",
            )
        if self.node_id not in metadata.replica_group(keyspace, token, write=write):
            what = "write" if write else "read"
            return self._refuse(
                Outcome.NOT_A_REPLICA,
                f"{self.node_id} is not in the {what} group of token {token} at epoch "
                f"{metadata.epoch}",
            )
        return None

    def _refuse(self, outcome: Outcome, message: str) -> PeerReply:
        self.metrics.refused.labels(outcome.value).inc()
        return PeerReply(self.follower.epoch, outcome, message)

    def _ok(self, **fields: object) -> PeerReply:
        return PeerReply(self.follower.epoch, Outcome.OK, **fields)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ writes

    def apply_soon(
        self, epoch: int, mutation: Mutation, body: bytes, *, repair: bool, prepared: bool = False
    ) -> asyncio.Future[PeerReply]:
        """Store ``mutation``; the future answers once it is durable (or refused). Unless a
        catch-up must be waited for, no task is created: the group commit settles the future.
        ``prepared``: this node's coordinator made it (else it is checked first)."""
        loop = asyncio.get_running_loop()
        if epoch > self.follower.epoch:
            return loop.create_task(
                self.apply(epoch, mutation, body, repair=repair, prepared=prepared)
            )
        future: asyncio.Future[PeerReply] = loop.create_future()
        refusal = self._gate_now(mutation.keyspace, mutation.table_id, mutation.token, write=True)
        if refusal is None:
            refusal = self._enqueue_mutation(mutation, body, repair, future, prepared)
        if refusal is not None:
            future.set_result(refusal)
        return future

    async def apply(
        self, epoch: int, mutation: Mutation, body: bytes, *, repair: bool, prepared: bool = False
    ) -> PeerReply:
        refusal = await self._gate(
            epoch, mutation.keyspace, mutation.table_id, mutation.token, write=True
        )
        if refusal is not None:
            return refusal
        future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
        refusal = self._enqueue_mutation(mutation, body, repair, future, prepared)
        return refusal if refusal is not None else await future

    async def deliver(self, epoch: int, mutations: Sequence[tuple[Mutation, bytes]]) -> PeerReply:
        """A reconciliation delivery: each mutation stored as a repair, all in the same group
        commit; OK with ``examined`` = how many are durable here, else the first refusal."""
        if epoch > self.follower.epoch:
            await self.follower.catch_up(epoch, self.settings.catch_up_timeout_ms / 1000)
        futures = [
            self.apply_soon(self.follower.epoch, mutation, body, repair=True)
            for mutation, body in mutations
        ]
        replies = await asyncio.gather(*futures)
        refused = [r for r in replies if r.outcome is not Outcome.OK]
        stored = len(replies) - len(refused)
        if refused:
            return replace(refused[0], examined=stored)
        return self._ok(examined=stored)

    def _enqueue_mutation(
        self,
        mutation: Mutation,
        body: bytes,
        repair: bool,
        future: asyncio.Future[PeerReply],
        prepared: bool,
    ) -> PeerReply | None:
        if not prepared:
            refusal = self._check(mutation)
            if refusal is not None:
                return refusal
        if self._pending() >= self.settings.max_pending_applies:
            return self._overloaded()
        self._mutations.append((mutation, body, repair, future))
        self._schedule_flush()
        return None

    def _check(self, mutation: Mutation) -> PeerReply | None:
        """The refusal of a mutation from another node that no coordinator could have
        prepared (the gate has checked its table exists here), or whose time is further
        ahead of this node's clock than the allowed skew (it would win every later write)."""
        metadata = self.follower.metadata
        if mutation.id.node >= metadata.next_node_number:
            return self._refuse(
                Outcome.BEHIND,
                f"{self.node_id} knows no node number {mutation.id.node} at epoch {metadata.epoch}",
            )
        try:
            check_stored(
                metadata.keyspaces[mutation.keyspace],
                self.follower.tables_by_id[mutation.table_id],
                mutation,
                issued_nodes=metadata.next_node_number,
                **PEER_LIMITS,
            )
        except BadRequest as error:
            return self._refuse(Outcome.MALFORMED, f"{self.node_id} refused: {error}")
        return self._ahead(mutation.id.hlc, f"mutation {mutation.id}")

    def _ahead(self, hlc: int, what: str) -> PeerReply | None:
        """The refusal of a time further ahead of this node's clock than the allowed skew."""
        ahead_ms = physical_ms_of(hlc) - wall_ms()
        if ahead_ms <= self.settings.max_skew_ms:
            return None
        return self._refuse(
            Outcome.CLOCK_SKEW,
            f"{what} is {ahead_ms} ms ahead of {self.node_id}'s clock "
            f"(--max-skew-ms {self.settings.max_skew_ms})",
        )

    async def apply_cells(self, epoch: int, repair: CellRepair, keyspace: str) -> PeerReply:
        refusal = await self._gate(epoch, keyspace, repair.table_id, repair.token, write=True)
        if refusal is not None:
            return refusal
        try:
            check_repaired_cells(
                self.follower.tables_by_id[repair.table_id],
                repair.token,
                repair.partition_key,
                repair.cells,
                issued_nodes=self.follower.metadata.next_node_number,
                max_value_bytes=PEER_LIMITS["max_value_bytes"],
            )
        except BadRequest as error:
            return self._refuse(Outcome.MALFORMED, f"{self.node_id} refused: {error}")
        refusal = self._ahead(max((c.hlc for c in repair.cells), default=0), "a repaired cell")
        if refusal is not None:
            return refusal
        if self._pending() >= self.settings.max_pending_applies:
            return self._overloaded()
        future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
        self._repairs.append((repair, future))
        self._schedule_flush()
        return await future

    def _pending(self) -> int:
        return len(self._mutations) + len(self._repairs) + len(self._ops)

    async def perform(self, epoch: int, op: MarkOp) -> PeerReply:
        """A reconciler's fence or low bound (``reconcile_ops``), in order with the writes:
        answered once it is durable, after every write queued before it."""
        problem = malformed(op)
        if problem:
            return self._refuse(Outcome.MALFORMED, f"{self.node_id} refused: {problem}")
        if epoch > self.follower.epoch:
            await self.follower.catch_up(epoch, self.settings.catch_up_timeout_ms / 1000)
        right = op.range.right
        metadata = self.follower.metadata
        replicas = metadata.replica_group(op.keyspace, right, write=True) | (
            metadata.replica_group(op.keyspace, right, write=False)
        )
        if self.node_id not in replicas:
            return self._refuse(
                Outcome.NOT_A_REPLICA,
                f"{self.node_id} does not replicate {op.range} of {op.keyspace!r} at epoch "
                f"{metadata.epoch}",
            )
        if self._pending() >= self.settings.max_pending_applies:
            return self._overloaded()
        future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
        self._ops.append((len(self._mutations), op, future))
        self._schedule_flush()
        return await future

    def _overloaded(self) -> PeerReply:
        self.metrics.overloaded.labels("replica").inc()
        return PeerReply(
            self.follower.epoch,
            Outcome.OVERLOADED,
            f"{self.node_id} has {self._pending()} writes queued for storage "
            "(--max-pending-applies)",
        )

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """One durable transaction for everything queued during this loop pass."""
        self._flush_scheduled = False
        queued, self._mutations = self._mutations, []
        repairs, self._repairs = self._repairs, []
        ops, self._ops = self._ops, []
        if not queued and not repairs and not ops:
            return
        verdicts = self.admission.judge(
            self.follower.metadata,
            [(m, body, repair) for m, body, repair, _ in queued],
            [(position, op) for position, op, _ in ops],
            floor=self.write_floor(),
        )
        mutations = []
        for entry, verdict in zip(queued, verdicts, strict=True):
            if verdict is None:
                mutations.append(entry)
                continue
            if isinstance(verdict, Refusal):
                reply = replace(
                    self._refuse(Outcome(verdict.outcome), verdict.message), fence=verdict.fence
                )
            else:  # DROP: a delivery below the low bound; HELD: a retry of one held here
                getattr(self.metrics, UNSTORED[verdict]).inc()
                reply = self._ok()
            if not entry[3].done():
                entry[3].set_result(reply)
        if mutations or repairs:
            try:
                fresh = self.storage.data.write(
                    [(m, body) for m, body, _, _ in mutations], [r for r, _ in repairs]
                )
            except Exception as error:
                fatal(f"writing {len(mutations) + len(repairs)} mutation(s) failed: {error!r}")
                raise
            self.metrics.storage_transactions.inc()
            self._settle_writes(mutations, fresh, repairs)
        for _, op, future in ops:
            self._settle_op(op, future)

    def _settle_op(self, op: MarkOp, future: asyncio.Future[PeerReply]) -> None:
        try:
            done = self.admission.perform(op)
        except Exception as error:
            fatal(f"storing a reconciliation mark failed: {error!r}")
            raise
        if isinstance(done, Refusal):
            reply = self._refuse(Outcome(done.outcome), done.message)
        else:
            self.metrics.log_entries_collected.inc(done)
            reply = self._ok(examined=done)
        if not future.done():
            future.set_result(reply)

    def _settle_writes(
        self,
        mutations: list[tuple[Mutation, bytes, bool, asyncio.Future[PeerReply]]],
        fresh: list[Stored],
        repairs: list[tuple[CellRepair, asyncio.Future[PeerReply]]],
    ) -> None:
        done = self._ok()
        for (mutation, _, repair, future), stored in zip(mutations, fresh, strict=True):
            reply = done
            if stored is Stored.NEW:
                self.metrics.stored_by_origin[repair].inc()
            elif stored is Stored.HELD:
                self.metrics.mutations_duplicate.inc()
            else:
                reply = self._refuse(
                    Outcome.MALFORMED,
                    f"{self.node_id} holds mutation {mutation.id} with other content: one id "
                    "names one mutation",
                )
            if not future.done():
                future.set_result(reply)
        for _, future in repairs:
            if not future.done():
                future.set_result(done)

    # ------------------------------------------------------------------ reads

    async def read(
        self,
        epoch: int,
        read: PartitionRead,
        *,
        data: bool,
        summary: bool,
        want_digest: bool,
        sketch_logs: Sequence[tuple[int, int]] = (),
        sketch_cells: int = 0,
    ) -> PeerReply:
        """The partition's cells (``data``), its summary, a digest of its cells, and a sketch of
        its ids in ``sketch_logs`` (when ``sketch_cells``), as asked: all of one state."""
        refusal = await self._gate(epoch, read.keyspace, read.table_id, read.token, write=False)
        if refusal is not None:
            return refusal
        # No await from here on: the data, the summary and the sketch describe one state.
        cells: list[Cell] = []
        if data or want_digest:
            cells = self.storage.data.read_cells(
                read.table_id, read.token, read.partition_key, read.bounds
            )
        digests = sketch = None
        cohorts: tuple[CohortMark, ...] = ()
        if summary or sketch_cells:
            own = self.storage.reconcile.marks(read.keyspace, MarkKind.LOW_BOUND).at(read.token)
            bound = max(read.low_bound, own)
            # (a cohort the bound passed is finished: every replica held it then)
            marks = self.storage.reconcile.cohort_marks_at(read.keyspace, read.token)
            cohorts = tuple(m for m in marks if m.high > bound)
            ids = self._partition_ids(read, bound)
            digests = LogDigests.of(ids, low_bound=bound)
            self.metrics.summary_reads.inc()
            if sketch_cells:
                wanted = frozenset(sketch_logs)
                sketch = Sketch.of([i for i in ids if (i.node, i.log) in wanted], sketch_cells)
        if data:
            size = sum(len(c.clustering) + len(c.value or b"") for c in cells)
            if size > MAX_REPLY_BYTES:
                return self._refuse(
                    Outcome.TOO_LARGE,
                    f"the partition holds {size} bytes in the slice read, more than one answer "
                    f"may carry ({MAX_REPLY_BYTES}); read a narrower clustering slice",
                )
            self.metrics.row_data_reads.inc()
            return self._ok(cells=tuple(cells), summary=digests, sketch=sketch, cohorts=cohorts)
        return self._ok(
            summary=digests,
            sketch=sketch,
            digest=digest(cells) if want_digest else b"",
            cohorts=cohorts,
        )

    def _partition_ids(self, read: PartitionRead, low_bound: int) -> list[MutationId]:
        return self.storage.data.partition_ids(
            read.keyspace, read.table_id, read.token, read.partition_key, low_bound
        )

    async def fetch(
        self, epoch: int, ids: Sequence[MutationId], *, keyspace: str = "", token: int = 0
    ) -> PeerReply:
        """The bodies of those of ``ids`` held here, in order, up to a size budget; ``examined``
        says how many of the ids were looked up (the caller asks again for the rest). With the
        partition's ``keyspace`` and ``token``, an id not in the log because it is below the
        low bound there is answered as ``held``."""
        if epoch > self.follower.epoch:
            await self.follower.catch_up(epoch, self.settings.catch_up_timeout_ms / 1000)
        bound = (
            self.storage.reconcile.marks(keyspace, MarkKind.LOW_BOUND).at(token) if keyspace else 0
        )
        bodies: list[bytes] = []
        held: list[MutationId] = []
        size = 0
        examined = 0
        for mutation_id in ids:
            if bodies and size >= FETCH_REPLY_BYTES:
                break
            examined += 1
            found = self.storage.data.mutation_bodies([mutation_id])
            for body in found:
                bodies.append(body)
                size += len(body)
            if not found and mutation_id.hlc < bound:
                held.append(mutation_id)
        return self._ok(bodies=tuple(bodies), examined=examined, held=tuple(held))
