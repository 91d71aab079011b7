"""The reconciler's work: every range of every tracked keyspace, continuously.

Theory of operation
-------------------
Every quarter lease it lists the ranges of the tracked keyspaces at the follower's newest epoch
(``targets``) and takes the leases it may (``leases``); each range it holds runs rounds
(``rounds.Round``) in a loop of its own, one every ``--interval-ms`` (a few ranges' rounds at a
time): every round delivers what is missing, and a round every ``--advance-interval-ms`` also
fences, collects and advances the low bound. A renewal task renews every held lease
each third of a lease, so a long round (a large delivery) does not outlive its lease; a round
checks its lease before every action. A range that no longer exists at the newest epoch (split,
merged, moved) is dropped; its pieces are new ranges, taken again (a grant of the old range still
covers them).

Where each range stands — its low bound, its last round — is kept in the reconciler's database
and reported by ``status``; every round's record is written when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import trace

from epochal.mtrack import physical_ms_of
from epochal.mtrack.leases import HolderLease
from epochal.reconciler.leases import Key, Leases, Target
from epochal.reconciler.metrics import ReconcilerMetrics
from epochal.reconciler.pacing import Pacer, RangePace
from epochal.reconciler.replica_client import ReplicaClient
from epochal.reconciler.rounds import Round, RoundResult
from epochal.reconciler.settings import ReconcilerSettings
from epochal.reconciler.storage import RangeRecord, ReconcilerStorage, RoundRecord
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata
from epochal.tcm.schema import ReplicationType
from epochal.telemetry import attributes as attr
from epochal.telemetry import enabled as tracing_enabled
from epochal.telemetry import tracer

log = logging.getLogger(__name__)

ROUNDS_AT_ONCE = 8
ACQUIRES_AT_ONCE = 8


def targets(metadata: ClusterMetadata) -> list[Target]:
    """Every range of every tracked keyspace, with its replicas (read and write groups, pending
    ones included) and their addresses."""
    found = []
    for name in sorted(metadata.keyspaces):
        keyspace = metadata.keyspaces[name]
        if keyspace.replication_type is not ReplicationType.TRACKED:
            continue
        placement = metadata.placements.get(keyspace.replication)
        if placement is None or not placement.points:
            continue
        for token_range, reads, writes in placement.ranges():
            replicas = {
                node: metadata.nodes[node].address
                for node in sorted(reads | writes)
                if node in metadata.nodes
            }
            if replicas:
                found.append(Target(name, token_range, replicas))
    return found


@dataclass(eq=False, repr=False)
class Worker:
    settings: ReconcilerSettings
    storage: ReconcilerStorage
    follower: MetadataFollower
    leases: Leases
    client: ReplicaClient
    metrics: ReconcilerMetrics
    records: dict[Key, RangeRecord] = field(default_factory=dict)
    # Per range held, its last round's result (who did not answer, the cohorts held).
    last: dict[Key, RoundResult] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pacer = Pacer(self.settings.rate)
        self._tracer = tracer("epochal.reconciler")
        for record in self.storage.ranges():
            self.records[(record.keyspace, record.range)] = record
        self._log_sizes: dict[tuple[Key, str], tuple[int, int]] = {}
        self._cohort_labels: dict[Key, set[tuple[str, ...]]] = {}
        self._loops: dict[Key, asyncio.Task[None]] = {}
        self._gate = asyncio.Semaphore(ROUNDS_AT_ONCE)

    async def run_forever(self) -> None:
        """Take leases every quarter lease (at once at the start); each range held runs its
        rounds in a loop of its own until its lease ends or the range changes."""
        loop = asyncio.get_running_loop()
        renewing = loop.create_task(self._renew_forever())
        try:
            while True:
                try:
                    await self.acquire_pass()
                except Exception:
                    log.exception("taking leases failed; trying again")
                await asyncio.sleep(self.settings.lease_ms / 4000)
        finally:
            renewing.cancel()
            for task in self._loops.values():
                task.cancel()

    async def acquire_pass(self) -> None:
        if not self.follower.caught_up or self.follower.stopped_reason:
            return
        current = targets(self.follower.metadata)
        by_key = {(t.keyspace, t.range): t for t in current}
        for key in [k for k in self.leases.held if k not in by_key]:
            self.leases.drop(key, "the range changed at a newer epoch")
        # Ranges held first: a reconciler keeps what it has before it takes more.
        ordered = sorted(current, key=lambda t: (t.keyspace, t.range) not in self.leases.held)
        gate = asyncio.Semaphore(ACQUIRES_AT_ONCE)

        async def take(target: Target) -> None:
            key = (target.keyspace, target.range)
            running = self._loops.get(key)
            if running is not None and not running.done():
                return
            async with gate:
                lease = await self.leases.acquire(target, len(current))
            if lease is not None:
                self._loops[key] = asyncio.get_running_loop().create_task(self._range_loop(key))

        # A few at a time (an unreachable replica must not make taking N ranges take N calls'
        # timeouts); the ranges already held first.
        await asyncio.gather(*(take(t) for t in ordered))

    async def _range_loop(self, key: Key) -> None:
        interval_s = self.settings.interval_ms / 1000
        pace = RangePace(self.settings.advance_interval_ms / 1000)
        while True:
            lease = self.leases.held.get(key)
            target = next(
                (t for t in targets(self.follower.metadata) if (t.keyspace, t.range) == key),
                None,
            )
            if lease is None or target is None:
                return
            started = time.monotonic()
            advance, sizes = pace.advance_due(started), pace.sizes_due(started)
            try:
                async with self._gate:
                    result = await self.run_round(
                        target,
                        lease,
                        advance=advance,
                        cursor=pace.cursor,
                        sizes=sizes,
                        may_skip=pace.went_well,
                        fold_sides=pace.fold_sides(started, self.settings.cohort_after_ms / 1000),
                        turn=pace.turn,
                    )
            except Exception:
                log.exception("a round of %s in %s failed", key[1], key[0])
                result = None
            pace.after(started, result, advance=advance, sizes=sizes)
            await asyncio.sleep(max(interval_s - (time.monotonic() - started), 0.01))

    async def run_round(
        self,
        target: Target,
        lease: HolderLease,
        *,
        advance: bool = True,
        cursor: int = 0,
        sizes: bool = True,
        may_skip: bool = True,
        fold_sides: frozenset[tuple[str, ...]] = frozenset(),
        turn: int = 0,
    ) -> RoundResult:
        key = (target.keyspace, target.range)
        started_ms = time.time_ns() // 1_000_000
        started = time.monotonic()
        epoch = self.follower.epoch
        round_ = Round(
            self.leases.ref(target, lease.token),
            target.replicas,
            self.client,
            lease,
            self.pacer,
            lambda: self._unchanged(target, epoch),
            self.settings.write_timeout_ms,
            self.settings.slack_ms,
            self.settings.batch,
            self.settings.window_ids,
            self.settings.interval_ms,
            advance=advance,
            cursor=cursor,
            sizes=sizes,
            may_skip=may_skip,
            fold_sides=fold_sides,
            turn=turn,
        )
        span = (
            self._tracer.start_span(
                attr.RECONCILE_ROUND,
                context=otel_context.Context(),  # a root: each round is a trace of its own
                attributes={
                    attr.KEYSPACE: target.keyspace,
                    attr.RANGE: str(target.range),
                    attr.LEASE_TOKEN: lease.token,
                },
            )
            if tracing_enabled()
            else None
        )
        before = self.client.bytes_exchanged
        try:
            if span is None:
                result = await round_.run()
            else:  # the round's calls to replicas are its children
                with trace.use_span(span, end_on_exit=False):
                    result = await round_.run()
        finally:
            if span is not None:
                span.set_attributes(
                    {
                        attr.RECONCILIATION_TIME: round_.result.reconciliation_time,
                        attr.DELIVERED: round_.result.delivered,
                        attr.DELIVERED_BYTES: round_.result.delivered_bytes,
                        attr.COLLECTED: round_.result.collected,
                        attr.OUTCOME: round_.result.outcome,
                        attr.UNREACHABLE: list(round_.result.unreachable),
                        attr.COHORTS: [f"{c.id:x}" for c in round_.result.cohorts],
                        attr.COHORT_DELIVERED_BYTES: round_.result.cohort_bytes,
                    }
                )
                cohort = round_.result.cohort
                if cohort is not None:
                    span.set_attributes(
                        {
                            attr.COHORT_ID: f"{cohort.id:x}",
                            attr.COHORT_MEMBERS: list(cohort.members),
                            attr.COHORT_HIGH: cohort.high,
                            attr.COHORT_FOLDED: round_.result.collected,
                        }
                    )
                span.end()
        self.metrics.summary_bytes.inc(self.client.bytes_exchanged - before)
        previous = self.records.get(key)
        if result.outcome in ("superseded", "lapsed"):
            self.leases.drop(key, result.detail, lease)
        elif result.outcome not in ("advanced", "delivered", "partial", "cohort") and (
            previous is None or previous.last_outcome != result.outcome
        ):  # said once when a range's rounds start failing, not every round
            # A replica that answers but refuses stops the range's rounds (it is not left out
            # as if cut off): an operator has something to look at.
            refused = result.outcome in ("refused", "version_mismatch")
            log.log(
                logging.WARNING if refused else logging.INFO,
                "round of %s in %s: %s %s",
                target.range,
                target.keyspace,
                result.outcome,
                result.detail,
            )
        record = RangeRecord(
            target.keyspace,
            target.range,
            lease.token,
            max(result.low_bound, previous.low_bound if previous else 0),
            (previous.rounds if previous else 0) + 1,
            (previous.delivered if previous else 0) + result.delivered,
            result.outcome,
            time.time_ns() // 1_000_000,
        )
        self.records[key] = record
        self.last[key] = result
        self._account(target, record, result, time.monotonic() - started)
        self.storage.record_round(
            RoundRecord(
                target.keyspace,
                target.range,
                lease.token,
                started_ms,
                record.last_round_unix_ms,
                result.acted_unix_ms,
                result.reconciliation_time,
                result.delivered,
                result.outcome,
            ),
            record,
        )
        return result

    def _unchanged(self, target: Target, epoch: int) -> bool:
        metadata = self.follower.metadata
        if metadata.epoch == epoch:
            return True
        return any(
            t.keyspace == target.keyspace
            and t.range == target.range
            and dict(t.replicas) == dict(target.replicas)
            for t in targets(metadata)
        )

    def _account(
        self, target: Target, record: RangeRecord, result: RoundResult, seconds: float
    ) -> None:
        metrics = self.metrics
        metrics.rounds.labels(result.outcome).inc()
        metrics.round_seconds.observe(seconds)
        metrics.delivered.inc(result.delivered)
        metrics.delivered_bytes.inc(result.delivered_bytes)
        metrics.collected.inc(result.collected)
        if result.outcome == "advanced":
            metrics.fences.inc(len(target.replicas))
        metrics.cohort_delivered_bytes.inc(result.cohort_bytes)
        self._account_cohorts(target, result)
        labels = (target.keyspace, str(target.range))
        if result.missing >= 0:
            metrics.unreconciled.labels(*labels).set(result.missing)
        if record.low_bound:  # the lag grows while rounds fail: from the last bound reached
            lag_ms = time.time_ns() // 1_000_000 - physical_ms_of(record.low_bound)
            metrics.lag_s.labels(*labels).set(lag_ms / 1000)
        key = (target.keyspace, target.range)
        for node, entries in result.log_entries.items():  # as the round found them
            self._log_sizes[(key, node)] = (entries, result.log_bytes.get(node, 0))
        per_replica: dict[str, list[int]] = {}
        for (_, node), (entries, size) in self._log_sizes.items():
            totals = per_replica.setdefault(node, [0, 0])
            totals[0] += max(entries, 0)
            totals[1] += size
        for node, (entries, size) in per_replica.items():
            metrics.log_entries.labels(node).set(entries)
            metrics.log_bytes.labels(node).set(size)

    def _account_cohorts(self, target: Target, result: RoundResult) -> None:
        """Per cohort the replicas reported: what its members folded, and its age; a cohort no
        longer reported (the low bound passed it) is removed."""
        metrics = self.metrics
        key = (target.keyspace, target.range)
        now_ms = time.time_ns() // 1_000_000
        shown = {}
        for cohort in result.cohorts:
            labels = (
                target.keyspace,
                str(target.range),
                f"{cohort.id:x}",
                ",".join(cohort.members),
            )
            shown[labels] = cohort
            metrics.cohort_mutations.labels(*labels).set(cohort.mutations)
            metrics.cohort_bytes.labels(*labels).set(cohort.bytes)
            metrics.cohort_age_s.labels(*labels).set(max(now_ms - cohort.formed_unix_ms, 0) / 1000)
        for labels in self._cohort_labels.get(key, set()) - set(shown):
            for gauge in (metrics.cohort_mutations, metrics.cohort_bytes, metrics.cohort_age_s):
                gauge.remove(*labels)
        self._cohort_labels[key] = set(shown)

    async def _renew_forever(self) -> None:
        """Renew every held lease each third of a lease, a few ranges at a time: each renewal
        waits on its replicas' state calls (``--state-timeout-ms`` at most), and one replica
        that stopped answering must not make a pass take one deadline per range."""
        gate = asyncio.Semaphore(ACQUIRES_AT_ONCE)

        async def renew(key: Key, lease: HolderLease, target: Target | None) -> None:
            if target is None:
                self.leases.drop(key, "the range changed at a newer epoch")
                return
            async with gate:
                try:
                    renewed = await self.leases.renew(target, lease)
                except Exception:
                    log.exception("renewing the lease of %s failed", key)
                    return
            if renewed in ("superseded", "lapsed"):
                self.leases.drop(key, f"a replica refused its lease token ({renewed})", lease)
            elif renewed != "ok" and not lease.may_act(time.monotonic() * 1000):
                self.leases.drop(key, "a majority of its replicas did not renew it", lease)

        while True:
            await asyncio.sleep(self.settings.lease_ms / 3000)
            by_key = {(t.keyspace, t.range): t for t in targets(self.follower.metadata)}
            held = list(self.leases.held.items())
            await asyncio.gather(*(renew(k, lease, by_key.get(k)) for k, lease in held))
