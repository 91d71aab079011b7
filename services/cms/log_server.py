"""Serving the metadata log: recent entries in memory, FetchLog pages, Watch subscribers.

A caller further behind than the snapshot frequency gets the newest snapshot plus the entries
after it; others get entries, from memory when they are recent, else from storage. Storage reads
run on the member's reader thread; entries not flushed to storage yet are taken from memory.
A page never skips an entry; one that stops short says ``has_more``. Pages and events are rows
as stored (the gRPC layer encodes them: ``epochal.cms.codec``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from epochal.cms.settings import CMSSettings
from epochal.cms.storage import CMSStorage, LogEntryRow, SnapshotRow
from epochal.errors import EpochalError, Overloaded, Unavailable

RECENT_ENTRIES = 4_096


@dataclass(frozen=True, slots=True)
class SnapshotPage:
    row: SnapshotRow
    entry_ids: tuple[tuple[str, int, int], ...]  # (entry id, epoch, digest) up to the snapshot


@dataclass(frozen=True, slots=True)
class FetchResult:
    snapshot: SnapshotPage | None
    entries: list[LogEntryRow]
    latest_epoch: int
    applied_slot: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class LogEvent:
    """Entries newly applied, pushed to every watcher."""

    entries: tuple[LogEntryRow, ...]
    latest_epoch: int


class Subscription:
    """One Watch stream: a bounded queue of events; overflow closes it (the caller resumes)."""

    def __init__(self, limit: int) -> None:
        self.queue: asyncio.Queue[LogEvent | EpochalError] = asyncio.Queue(limit + 1)
        self.limit = limit
        self.closed = False

    def push(self, event: LogEvent) -> None:
        if self.closed:
            return
        if self.queue.qsize() >= self.limit:
            self.close(
                Overloaded("watcher fell behind; resume with Watch(since_epoch=<last epoch seen>)")
            )
            return
        self.queue.put_nowait(event)

    def close(self, reason: EpochalError) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(reason)


class LogServer:
    def __init__(
        self,
        settings: CMSSettings,
        storage: CMSStorage,
        read: Callable[[Callable[[], Any]], Awaitable[Any]],
    ) -> None:
        self.settings = settings
        self.storage = storage
        self._read = read
        self._recent: deque[LogEntryRow] = deque(maxlen=RECENT_ENTRIES)
        self._subscriptions: set[Subscription] = set()

    def remember(self, rows: Iterable[LogEntryRow]) -> None:
        """Entries read from storage at start."""
        self._recent.extend(rows)

    def publish(self, rows: Sequence[LogEntryRow], latest_epoch: int) -> None:
        self._recent.extend(rows)
        if not self._subscriptions:
            return
        event = LogEvent(tuple(rows), latest_epoch)
        for subscription in list(self._subscriptions):
            subscription.push(event)
            if subscription.closed:
                self._subscriptions.discard(subscription)

    def subscribe(self) -> Subscription:
        subscription = Subscription(self.settings.watch_queue_events)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def reset(self, message: str) -> None:
        """Close every watcher with UNAVAILABLE (they resume from their last epoch, here or at
        another member) and forget recent entries."""
        for subscription in list(self._subscriptions):
            subscription.close(Unavailable(message))
        self._subscriptions.clear()
        self._recent.clear()

    async def fetch(
        self,
        since: int,
        max_entries: int,
        *,
        latest: int,
        applied_slot: int,
        entry_ids: list[tuple[str, int, int]],
        entries_only: bool,
    ) -> FetchResult:
        """A page after ``since`` of the log as of ``latest`` (the caller's applied state)."""
        settings = self.settings
        page = min(max_entries or settings.fetch_page_entries, settings.fetch_page_entries)
        if since >= latest:
            return FetchResult(None, [], latest, applied_slot, False)
        far_behind = latest - since > settings.snapshot_frequency
        recent = self._from_recent(since, page)
        if recent is not None and (entries_only or not far_behind):
            return FetchResult(None, recent, latest, applied_slot, recent[-1].epoch < latest)
        with_snapshot = far_behind and not entries_only

        def read() -> tuple[SnapshotRow | None, list[LogEntryRow]]:
            snapshot = self.storage.latest_snapshot() if with_snapshot else None
            if snapshot is not None and not since < snapshot.epoch <= latest:
                snapshot = None
            start = snapshot.epoch if snapshot is not None else since
            return snapshot, self.storage.entries_since(start, page)

        snapshot_row, rows = await self._read(read)
        entries = [r for r in rows if r.epoch <= latest]
        snapshot = None
        if snapshot_row is not None:
            upto = snapshot_row.epoch
            snapshot = SnapshotPage(snapshot_row, tuple(r for r in entry_ids if r[1] <= upto))
        reached = entries[-1].epoch if entries else (snapshot_row.epoch if snapshot_row else since)
        if reached < latest and len(entries) < page:
            # The newest entries may not be flushed to storage yet: they are in memory.
            tail = self._from_recent(reached, page - len(entries)) or []
            entries.extend(e for e in tail if e.epoch <= latest)
            reached = entries[-1].epoch if entries else reached
        has_more = reached < latest
        return FetchResult(snapshot, entries, latest, 0 if has_more else applied_slot, has_more)

    def _from_recent(self, since: int, page: int) -> list[LogEntryRow] | None:
        if not self._recent or self._recent[0].epoch > since + 1:
            return None
        offset = since + 1 - self._recent[0].epoch
        end = min(len(self._recent), offset + page)
        return [self._recent[i] for i in range(offset, end)]
