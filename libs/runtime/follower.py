"""The metadata follower: this node's view of the metadata log, kept current.

Theory of operation
-------------------
``metadata`` is the immutable ``ClusterMetadata`` of the newest epoch applied here; requests
read it and compare epochs, nothing else. It advances only by applying log entries strictly in
order (or by installing a snapshot of a newer epoch), on the event loop, from three sources:

* the CMS's push stream (``Watch`` on one member, rotating to the next when it breaks);
* a pull on a timer (``FetchLog`` from a CMS member), backing off while the CMS is unreachable;
* on demand: ``catch_up(epoch)`` when a message shows a newer epoch. It is debounced: one fetch
  runs at a time and every caller waiting for an epoch it will reach shares it, so ten requests
  that discover epoch 42 cause one fetch. A fetch asks the CMS members in turn, then any peer
  replica (the log is immutable: any copy of a prefix is the same prefix).

Entries after a gap are not applied (a fetch fills the gap first); an entry this software cannot
decode stops the follower, which says so (log, metric, readiness) and never skips it. Applied
entries are written to local storage lazily (the CMS has them durably) with a snapshot of the
metadata every ``metadata_snapshot_interval`` epochs, so a restart replays only the tail.

Every service that follows the log uses this class; it is given where to store what it applied
(``MetadataStore``), how to reach the log (``epochal.wire.log.LogClient``), and its metrics
(``FollowerMetrics``, registered with the service's own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from epochal.runtime.cms_health import CMSHealth
from epochal.tcm import ClusterMetadata, CMSRole, NodeState, Table
from epochal.telemetry import attributes as attr
from epochal.telemetry import tracer
from epochal.telemetry.context import detached, wanted
from epochal.telemetry.metrics import Metrics, zeroed
from epochal.wire.log import LogClient, LogPage, LogSourceFailed
from epochal.wire.metadata import (
    MetadataEncoder,
    decode_metadata,
    decode_transformation,
)

log = logging.getLogger(__name__)

APPLIED_TIMES_KEPT = 20_000
WATCH_BACKOFF_MAX_S = 1.0
FETCH_ATTEMPT_TIMEOUT_S = 5.0
# A catch-up gives up after this many fetches that found the CMS behind the wanted epoch: the
# epoch does not exist yet (the caller says so: an epoch from the future).
FUTURE_EPOCH_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class FollowerSettings:
    cms: tuple[str, ...]  # CMS members to follow (the log may name more)
    address: str  # this node's own, never asked
    pull_interval_ms: int
    pull_backoff_max_ms: int
    metadata_snapshot_interval: int
    metadata_log_retention: int


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    epoch: int
    entry_id: str
    transformation: bytes


@dataclass(frozen=True, slots=True)
class StoredMetadata:
    snapshot_epoch: int
    snapshot: bytes | None
    entries: list[MetadataEntry]  # after the snapshot, in order


class MetadataStore(Protocol):
    """Where a follower keeps what it applied (lazily: the CMS has it durably)."""

    def stored_metadata(self) -> StoredMetadata: ...

    def save_metadata(
        self,
        entries: Sequence[MetadataEntry],
        *,
        snapshot: tuple[int, bytes] | None,
        forget_below: int | None,
    ) -> None: ...


class FollowerMetrics:
    """The seed's TCM metrics of a node that follows the log, in the service's registry."""

    def __init__(self, m: Metrics) -> None:
        self.current_epoch = m.gauge(
            "epochal_current_epoch", "the newest epoch this node has applied"
        )
        self.epochs_applied = m.counter(
            "epochal_epochs_applied_total", "metadata log entries applied"
        )
        self.epochs_behind = m.gauge(
            "epochal_epochs_behind_cms",
            "the newest epoch a CMS member reported to this node, less the epoch it applied",
        )
        self.fetch_log_latency = m.histogram(
            "epochal_fetch_log_latency_seconds",
            "catch-up fetches of the metadata log that succeeded, by source (cms or peer)",
            ("source",),
        )
        self.fetch_log_entries = m.counter(
            "epochal_fetch_log_entries_total",
            "metadata log entries catch-up fetches brought, by source",
            ("source",),
        )
        self.fetch_log_failures = m.counter(
            "epochal_fetch_log_failures_total",
            "metadata log fetches that failed, by source",
            ("source",),
        )
        for metric in (self.fetch_log_latency, self.fetch_log_entries, self.fetch_log_failures):
            zeroed(metric, FETCH_SOURCES)
        self.catch_ups = m.counter(
            "epochal_catch_ups_total", "on-demand catch-ups a message with a newer epoch asked for"
        )
        self.cms_members = m.gauge(
            "epochal_cms_members",
            "voting CMS members, as the newest metadata this node applied names (before the log "
            "names any: the members it was configured with)",
        )
        self.unreachable_cms_members = m.gauge(
            "epochal_cms_unreachable_members",
            "CMS voters that did not answer their last health check (each is checked every second)",
        )
        self.stopped_applying = m.gauge(
            "epochal_metadata_stopped",
            "1 when a log entry could not be applied and the node stopped",
        )


FETCH_SOURCES = ("cms", "peer")


@dataclass(eq=False, repr=False)
class MetadataFollower:
    settings: FollowerSettings
    store: MetadataStore
    source: LogClient
    metrics: FollowerMetrics
    service: str = field(kw_only=True)  # names the spans: <service>.catch_up, .apply_epoch

    def __post_init__(self) -> None:
        self._tracer = tracer(f"epochal.{self.service}")
        self.metadata = ClusterMetadata.empty()
        self.tables_by_id: dict[str, Table] = {}
        self.node_id = ""
        self.hold_pushes = False  # test hook: a coordinator with a stale view
        self.stopped_reason = ""
        self.start_target = -1  # the CMS's epoch when we first reached it (readiness)
        self.cms_epoch = 0  # the newest epoch a CMS member has reported
        self.on_change: list[Callable[[ClusterMetadata], None]] = []
        self.applied_at: deque[tuple[int, int]] = deque(maxlen=APPLIED_TIMES_KEPT)
        self._fetch_task: asyncio.Task[str] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._snapshot_epoch = 0
        self._encoder = MetadataEncoder()
        self._cms_turn = zlib.crc32(self.settings.address.encode())
        self.cms_health = CMSHealth(self.voters)
        self.metrics.unreachable_cms_members.set_function(lambda: self.cms_health.unreachable)

    def voters(self) -> dict[str, str]:
        """The CMS's voting members, id -> address (before the log names any: the configured
        addresses)."""
        voters = {
            m.member_id: m.address for m in self.metadata.cms_members if m.role is CMSRole.VOTER
        }
        return voters or {address: address for address in self.settings.cms}

    @property
    def epoch(self) -> int:
        return self.metadata.epoch

    @property
    def caught_up(self) -> bool:
        return self.start_target >= 0 and self.epoch >= self.start_target

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """The metadata stored here: its snapshot, then the entries after it."""
        stored = self.store.stored_metadata()
        metadata = ClusterMetadata.empty()
        if stored.snapshot is not None:
            try:
                metadata = decode_metadata(stored.snapshot)
            except (MemoryError, RecursionError):
                raise
            except Exception as error:  # MalformedInput, or a value a domain type refuses
                # What is stored here is a copy of the CMS's log: fetch it again rather than
                # stop on it (a follower never applies what it cannot read: that stops it).
                log.warning("the stored metadata snapshot cannot be read (%s); refetching", error)
                stored = StoredMetadata(0, None, [])
        for entry in stored.entries:
            if entry.epoch != metadata.epoch + 1:
                break  # a lazily written tail may have lost entries: fetch them again
            try:
                metadata = decode_transformation(entry.transformation).execute(metadata)
            except (MemoryError, RecursionError):
                raise
            except Exception as error:  # MalformedInput (another version's kind), or a bug
                log.warning(
                    "stored epoch %d cannot be replayed (%s); it is fetched and applied again "
                    "from the log",
                    entry.epoch,
                    error,
                )
                break
        self._snapshot_epoch = stored.snapshot_epoch
        self._set(metadata, [])
        log.info(
            "metadata at epoch %d from local storage (snapshot at %d, %d entries replayed)",
            metadata.epoch,
            stored.snapshot_epoch,
            len(stored.entries),
        )

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._watch_forever()),
            loop.create_task(self._pull_forever()),
        ]
        self.cms_health.start()

    async def stop(self) -> None:
        await self.cms_health.stop()
        for task in [*self._tasks, self._fetch_task]:
            if task is not None:
                task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ------------------------------------------------------------------ catching up

    async def catch_up(self, epoch: int, timeout_s: float) -> bool:
        """Until this node has applied ``epoch`` (True) or ``timeout_s`` passed (False)."""
        if self.epoch >= epoch:
            return True
        self.metrics.catch_ups.inc()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        span = (
            self._tracer.start_span(
                attr.CATCH_UP,
                attributes={
                    attr.NODE_ID: self.node_id,
                    attr.FROM_EPOCH: self.epoch,
                    attr.TO_EPOCH: epoch,
                },
            )
            if wanted()
            else None
        )
        try:
            short_rounds = 0  # rounds that reached a CMS member which did not have the epoch
            while self.epoch < epoch and not self.stopped_reason:
                remaining = deadline - loop.time()
                if remaining <= 0 or short_rounds >= FUTURE_EPOCH_ROUNDS:
                    return False
                task = self._shared_fetch()
                try:
                    fetched = await asyncio.wait_for(asyncio.shield(task), remaining)
                except TimeoutError:
                    return False
                if self.epoch < epoch:
                    if fetched == "cms" and self.cms_epoch < epoch:
                        short_rounds += 1
                        self._cms_turn += 1  # ask another member next: this one may lag
                    await asyncio.sleep(min(0.05, max(deadline - loop.time(), 0)))
            return self.epoch >= epoch
        finally:
            if span is not None:
                span.set_attribute(attr.REACHED_EPOCH, self.epoch)
                span.end()

    def fetch_now(self) -> None:
        """Start a fetch to the newest epoch (or join the one in flight)."""
        self._shared_fetch()

    def _shared_fetch(self) -> asyncio.Task[str]:
        """The fetch in flight, or a new one: every waiter shares it (the debounce)."""
        if self._fetch_task is None or self._fetch_task.done():
            # Shared by every waiter: part of no one request's trace (its epoch.apply spans
            # are roots, as those of the watch and the pull loops are).
            self._fetch_task = detached(self._fetch_round())
        return self._fetch_task

    async def _fetch_round(self) -> str:
        """Fetch to the newest epoch from a CMS member ("cms"), else from a peer replica that
        has something newer ("peer"); "" when no source answered."""
        for address in self._cms_order():
            if await self._fetch_from(address, "cms"):
                return "cms"
        for address in self._peer_addresses():
            before = self.epoch
            if await self._fetch_from(address, "peer") and self.epoch > before:
                return "peer"
        return ""

    async def _fetch_from(self, address: str, source: str) -> bool:
        started = time.monotonic()
        try:
            while True:
                before = self.epoch
                page = await self.source.fetch(
                    address,
                    from_cms=source == "cms",
                    since_epoch=self.epoch,
                    timeout_s=FETCH_ATTEMPT_TIMEOUT_S,
                )
                if source == "cms":
                    self._reached(address, page.latest_epoch)
                self.metrics.fetch_log_entries.labels(source).inc(len(page.records))
                self.install(page)
                if not page.has_more or self.stopped_reason or self.epoch == before:
                    break  # done, stopped, or a page that moved nothing (asking again would spin)
        except LogSourceFailed as error:
            self.metrics.fetch_log_failures.labels(source).inc()
            log.debug("fetching the log from %s %s failed: %s", source, address, error)
            return False
        self.metrics.fetch_log_latency.labels(source).observe(time.monotonic() - started)
        return True

    def _cms_order(self) -> list[str]:
        addresses = self.cms_addresses()
        start = self._cms_turn % len(addresses)
        return addresses[start:] + addresses[:start]

    def cms_addresses(self) -> list[str]:
        """The configured CMS members, and any other the log names."""
        known = list(self.settings.cms)
        for member in self.metadata.cms_members:
            if member.address not in known:
                known.append(member.address)
        return known

    def _peer_addresses(self) -> list[str]:
        return [
            node.address
            for node in self.metadata.nodes.values()
            if node.node_id != self.node_id
            and node.state is not NodeState.LEFT
            and node.address != self.settings.address
        ]

    def _reached(self, address: str, latest_epoch: int) -> None:
        self.cms_epoch = max(self.cms_epoch, latest_epoch)
        self.metrics.epochs_behind.set(max(self.cms_epoch - self.epoch, 0))
        if self.start_target < 0:
            self.start_target = latest_epoch
            for callback in self.on_change:
                callback(self.metadata)

    # ------------------------------------------------------------------ push and pull

    async def _watch_forever(self) -> None:
        backoff_s = 0.05
        while True:
            addresses = self.cms_addresses()
            address = addresses[self._cms_turn % len(addresses)]
            try:
                async with contextlib.aclosing(self.source.watch(address, self.epoch)) as pages:
                    async for page in pages:
                        backoff_s = 0.05
                        self._reached(address, page.latest_epoch)
                        if not self.hold_pushes:
                            self.install(page)
            except LogSourceFailed as error:
                if error.code == "MALFORMED":
                    log.warning("watch on %s sent something undecodable: %s", address, error)
                else:
                    log.debug("watch on %s ended: %s", address, error.code)
            except Exception:
                log.exception("following the push stream of %s failed; reconnecting", address)
            self._cms_turn += 1
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, WATCH_BACKOFF_MAX_S)

    async def _pull_forever(self) -> None:
        delay_s = 0.0
        interval_s = self.settings.pull_interval_ms / 1000
        while True:
            await asyncio.sleep(delay_s)
            if self.hold_pushes:
                delay_s = interval_s
                continue
            try:
                fetched = await asyncio.shield(self._shared_fetch())
            except Exception:
                log.exception("pulling the metadata log failed")
                fetched = ""
            if fetched:
                delay_s = interval_s
            else:
                delay_s = min(
                    max(delay_s * 2, interval_s), self.settings.pull_backoff_max_ms / 1000
                )

    # ------------------------------------------------------------------ applying

    def install(self, page: LogPage) -> None:
        """Apply a page: its snapshot if newer, then its entries strictly in order."""
        if self.stopped_reason:
            return
        metadata = self.metadata
        snapshot = None
        if page.snapshot is not None and page.snapshot.epoch > metadata.epoch:
            metadata = page.snapshot
            snapshot = (page.snapshot.epoch, page.snapshot_encoded)
        applied: list[MetadataEntry] = []
        for record in page.records:
            if record.epoch <= metadata.epoch:
                continue
            if record.epoch != metadata.epoch + 1:
                # A gap (a push after pushes were missed): fetch it, apply nothing past it.
                self._shared_fetch()
                break
            if record.transformation is None:
                self._stop(record.epoch, record.problem)
                break
            try:
                metadata = record.transformation.execute(metadata)
            except (MemoryError, RecursionError):
                raise  # the process's, not the entry's: stopping for good would be wrong
            except Exception as error:  # a bug, or a log this version reads differently
                log.exception("applying epoch %d failed", record.epoch)
                self._stop(record.epoch, f"applying {record.transformation} failed: {error!r}")
                break
            applied.append(MetadataEntry(record.epoch, record.entry_id, record.encoded))
        if metadata is self.metadata:
            return
        self._persist(metadata, applied, snapshot)
        self._set(metadata, applied)

    def _stop(self, epoch: int, problem: str) -> None:
        self.stopped_reason = (
            f"cannot apply epoch {epoch}: {problem}. This node stays at epoch {self.epoch} and "
            "serves nothing newer; upgrade it to a version that knows this transformation"
        )
        log.critical("%s", self.stopped_reason)
        self.metrics.stopped_applying.set(1)
        for callback in self.on_change:
            callback(self.metadata)

    def _persist(
        self,
        metadata: ClusterMetadata,
        applied: Sequence[MetadataEntry],
        snapshot: tuple[int, bytes] | None,
    ) -> None:
        forget_below = None
        if snapshot is not None:
            forget_below = snapshot[0] + 1  # entries below a snapshot are not contiguous
        elif metadata.epoch - self._snapshot_epoch >= self.settings.metadata_snapshot_interval:
            snapshot = (metadata.epoch, self._encoder.encode(metadata))
        if snapshot is not None:
            self._snapshot_epoch = snapshot[0]
            if forget_below is None:
                forget_below = max(metadata.epoch - self.settings.metadata_log_retention, 0)
        self.store.save_metadata(applied, snapshot=snapshot, forget_below=forget_below)

    def _set(self, metadata: ClusterMetadata, applied: Sequence[MetadataEntry]) -> None:
        previous = self.metadata
        self.metadata = metadata
        if metadata.keyspaces is not previous.keyspaces or not self.tables_by_id:
            self.tables_by_id = {
                table.id: table
                for ks in metadata.keyspaces.values()
                for table in ks.tables.values()
            }
        now_ns = time.time_ns()
        for entry in applied:
            self.applied_at.append((entry.epoch, now_ns))
        if applied:
            self.metrics.epochs_applied.inc(len(applied))
            if wanted():
                for entry in applied:  # at the apply time AppliedEpochs reports, exactly
                    self._tracer.start_span(
                        attr.EPOCH_APPLY,
                        attributes={attr.EPOCH: entry.epoch, attr.NODE_ID: self.node_id},
                        start_time=now_ns,
                    ).end(end_time=now_ns)
        self.metrics.current_epoch.set(metadata.epoch)
        self.metrics.epochs_behind.set(max(self.cms_epoch - metadata.epoch, 0))
        voters = sum(1 for m in metadata.cms_members if m.role is CMSRole.VOTER)
        self.metrics.cms_members.set(voters or len(self.settings.cms))
        for callback in self.on_change:
            callback(metadata)
