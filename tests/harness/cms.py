"""A CMS of real member processes, for tests: quick elections, the keyspaces the tests commit,
a member's log read from its database or through FetchLog, waiting for the members to agree,
and clients that commit until stopped, keeping every outcome."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from epochal.cms.storage import AcceptedRow, CMSStorage, LogEntryRow
from epochal.cms_client import CMSClient, Committed
from epochal.devcluster.cms import LocalCMS
from epochal.errors import Unavailable
from epochal.tcm import CreateKeyspace, ReplicationParams, ReplicationType, Transformation
from epochal.wire.log import LogRecord
from epochal.wire.paxos import encode_slot_value

from .waiting import until

FAST_ELECTIONS = ("--election-timeout-ms", "400", "--heartbeat-interval-ms", "50")


@contextlib.contextmanager
def local_cms(data_dir: Path, **options: Any) -> Iterator[LocalCMS]:
    """A LocalCMS (three members on SQLite unless ``options`` say otherwise) with quick
    elections, started; every member killed afterwards."""
    cms = LocalCMS(data_dir, **({"extra_args": FAST_ELECTIONS} | options))
    try:
        cms.start()
        yield cms
    finally:
        cms.close()


def keyspace(name: str) -> CreateKeyspace:
    """A small transformation to commit: an untracked keyspace, SimpleStrategy RF 3."""
    return CreateKeyspace(
        name=name,
        replication=ReplicationParams.simple(3),
        replication_type=ReplicationType.UNTRACKED,
    )


def storage_of(cms: LocalCMS, member_id: str) -> CMSStorage:
    url = cms.db_urls.get(member_id) or f"sqlite:///{cms.data_dir}/{member_id}/cms.db"
    return CMSStorage(url, schema=cms.db_schemas.get(member_id))


def read_log(cms: LocalCMS, member_id: str) -> list[LogEntryRow]:
    """The member's whole log, from its database (stop the member first: it writes lazily)."""
    storage = storage_of(cms, member_id)
    try:
        rows: list[LogEntryRow] = []
        while True:
            page = storage.entries_since(rows[-1].epoch if rows else 0, 5000)
            if not page:
                return rows
            rows.extend(page)
    finally:
        storage.close()


async def log_entries(
    cms: LocalCMS, since_epoch: int = 0, member: int | None = None
) -> list[LogRecord]:
    """Every entry of the metadata log after ``since_epoch``, through FetchLog page by page
    (entries, never a snapshot in their place), from ``member`` (an index) or from whichever
    member answers."""
    entries: list[LogRecord] = []
    async with CMSClient(cms.addresses) as client:
        while True:
            since = entries[-1].epoch if entries else since_epoch
            page = await client.fetch_log(since, member=member, entries_only=True)
            entries.extend(page.records)
            if not page.has_more:
                return entries


def plant_accepted_slot(cms: LocalCMS, values: tuple[bytes, ...]) -> None:
    """On every (stopped) member's disk, ``values`` accepted for the slot after its applied one,
    at the ballot it promised (as if a leader had them accepted there, then every member
    stopped): what the members choose and apply when they start again."""
    for member_id in cms.members:
        storage = storage_of(cms, member_id)
        try:
            state = storage.load()
            ballot = state.promised or (1, "cms1")
            row = AcceptedRow(state.applied_slot + 1, *ballot, encode_slot_value(values))
            storage.save_acceptor(state.promised, [row])
        finally:
            storage.close()


async def commit_then_stop(cms: LocalCMS, commits: dict[str, Transformation]) -> int:
    """Commit ``commits`` (entry id -> transformation), wait for every member to hold them,
    then stop the members gracefully (each writes what it applied); the epoch they reached."""
    await cms.wait_serving()
    async with CMSClient(cms.addresses) as client:
        for entry_id, transformation in commits.items():
            await client.commit(transformation, entry_id=entry_id)
    epoch = await converge(cms)
    cms.stop()
    return epoch


async def converge(cms: LocalCMS, timeout_s: float = 30.0, members: tuple[str, ...] = ()) -> int:
    """Until every member (or those named) is at one epoch and holds the whole log up to it;
    that epoch."""
    epochs: set[int] = set()

    async def at_one_epoch() -> bool:
        described = [await cms.describe(m) for m in members or tuple(cms.members)]
        epochs.clear()
        epochs.update(d.epoch for d in described)
        return len(epochs) == 1 and all(d.log_complete for d in described)

    def what() -> str:
        return f"members at one epoch with the whole log (they are at {sorted(epochs)})"

    await until(what, at_one_epoch, timeout_s, interval_s=0.1)
    return epochs.pop()


@dataclass
class Committers:
    """``count`` clients committing one keyspace after another through CMSClient (each
    starting at a different member) until stopped. A commit that runs out of retries
    (Unavailable) is recorded and sent again with the same entry id, which must be answered
    at most once; any other error ends its client, and ``stop`` raises it."""

    addresses: list[str]
    count: int = 6
    attempt_timeout_s: float = 3.0
    total_timeout_s: float = 60.0
    acknowledged: dict[str, Committed] = field(default_factory=dict)  # entry id -> answer
    failures: list[str] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._commit(i)) for i in range(self.count)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _commit(self, index: int) -> None:
        async with CMSClient(
            self.addresses,
            first_member=index,
            attempt_timeout_s=self.attempt_timeout_s,
            total_timeout_s=self.total_timeout_s,
        ) as client:
            step = 0
            while not self._stop.is_set():
                entry_id = f"committer{index}-{step}"
                try:
                    committed = await client.commit(keyspace(f"k{index}_{step}"), entry_id)
                except Unavailable as error:
                    self.failures.append(f"{entry_id}: {error!r}")
                    continue
                self.acknowledged[entry_id] = committed
                step += 1

    async def progress(self, commits: int, timeout_s: float = 60.0) -> None:
        """Until ``commits`` more commits are acknowledged."""
        target = len(self.acknowledged) + commits
        await until(f"{commits} more commits", lambda: len(self.acknowledged) >= target, timeout_s)

    def failed_attempts(self) -> Counter[grpc.StatusCode]:
        """How often each status failed an attempt of a commit that was then acknowledged."""
        return Counter(code for c in self.acknowledged.values() for code in c.failed_attempts)
