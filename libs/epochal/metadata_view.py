"""The cluster metadata a client follows: learnt from a seed replica's ``FetchLog``, brought
forward when an answer shows a newer epoch.

Theory of operation
-------------------
The view starts empty (epoch 0) and asks the seeds in turn for the log after its epoch, page by
page, until one has answered up to its latest epoch (``connect``). A page is a snapshot (taken
when newer than the view) and the entries after it, applied strictly in epoch order: an entry
already applied is skipped, and so is one past a gap (the next fetch starts where the view is).
An entry this SDK cannot decode stops the view with an error that says to upgrade.

Every answer names the epoch of the node that gave it; the view remembers the highest seen (the
client's requests carry it, so the coordinator catches up first) and, when it is ahead of the
view's metadata, fetches from that node in the background, one fetch at a time; a failed one is
tried again by the next answer that shows a newer epoch. ``refresh`` waits for an epoch instead,
asking the known replicas in turn.

``apply_page`` is pure; the fetch itself is given (``Fetch``: the SDK's transport), and fails
with an ``EpochalError`` that carries the status of the answer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence

from epochal.errors import EpochalError, InvalidRequest, Unavailable
from epochal.status import Operation, Retry, code_of, retry_for
from epochal.tcm import ClusterMetadata, NodeState, Table
from epochal.telemetry.context import detached
from epochal.wire.log import LogPage

# The log after an epoch, from the replica at an address.
Fetch = Callable[[str, int], Awaitable[LogPage]]

REFRESH_FETCHES = 50  # at most this many fetches for one refresh
REFRESH_PAUSE_S = 0.05  # between fetches that answered but did not reach the epoch


def apply_page(metadata: ClusterMetadata, page: LogPage) -> ClusterMetadata:
    """``metadata`` brought forward by ``page``: its snapshot when newer, then each entry that
    is the next epoch."""
    if page.snapshot is not None and page.snapshot.epoch > metadata.epoch:
        metadata = page.snapshot
    for record in page.records:
        if record.epoch != metadata.epoch + 1:
            continue
        if record.transformation is None:
            raise EpochalError(
                f"the metadata log has an entry this SDK cannot apply (epoch "
                f"{record.epoch}: {record.problem}); upgrade the SDK"
            )
        metadata = record.transformation.execute(metadata)
    return metadata


def _retryable(error: EpochalError) -> bool:
    """A failed fetch another replica (or a later try) may answer: the retry table's read."""
    return retry_for(Operation.READ, code_of(error)) is not Retry.NO


class MetadataView:
    def __init__(self, seeds: Sequence[str], fetch: Fetch) -> None:
        assert seeds, "a view starts from at least one seed"
        self.seeds = list(seeds)
        self.metadata = ClusterMetadata.empty()
        self.seen_epoch = 0
        self._fetch = fetch
        self._refresh: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        """Learn the metadata from the first seed that answers (one that refuses — not a
        replica, say — is one the next seed may stand in for)."""
        errors = []
        refusal: EpochalError | None = None
        for address in self.seeds:
            try:
                await self.fetch_from(address)
                return
            except EpochalError as error:
                if code_of(error) is None:
                    raise
                if not _retryable(error):
                    refusal = error
                errors.append(f"{address}: {error.status} {error.message}".strip())
        if refusal is not None and len(errors) == 1:
            raise refusal from None
        raise Unavailable(f"no seed answered: {'; '.join(errors)}")

    def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()

    async def fetch_from(self, address: str) -> None:
        """Fetch the log from ``address`` until it has nothing newer to give."""
        while True:
            page = await self._fetch(address, self.metadata.epoch)
            metadata = apply_page(self.metadata, page)
            moved = metadata.epoch > self.metadata.epoch
            self.metadata = metadata
            self.saw(metadata.epoch)
            if not page.has_more or metadata.epoch >= page.latest_epoch or not moved:
                return

    def saw(self, epoch: int) -> None:
        """An epoch the client learnt of: its next requests carry it."""
        self.seen_epoch = max(self.seen_epoch, epoch)

    def observe(self, epoch: int, address: str) -> None:
        """An answer's epoch: one newer than the metadata brings it forward in the background,
        from the node that answered (one refresh at a time)."""
        self.saw(epoch)
        if epoch > self.metadata.epoch and (self._refresh is None or self._refresh.done()):
            self._refresh = detached(self._quiet_refresh(address))  # not the request's work

    async def _quiet_refresh(self, address: str) -> None:
        try:
            await self.fetch_from(address)
        except EpochalError as error:
            if code_of(error) is None:
                raise
            # The node did not answer: the next answer with a newer epoch tries again.

    async def refresh(self, epoch: int | None = None) -> None:
        """Bring the metadata to ``epoch`` (default: the highest seen), asking the known
        replicas in turn."""
        target = self.seen_epoch if epoch is None else epoch
        for address in itertools.islice(itertools.cycle(self.replicas()), REFRESH_FETCHES):
            if self.metadata.epoch >= target:
                return
            try:
                await self.fetch_from(address)
            except EpochalError as error:
                if not _retryable(error):
                    raise
                continue
            if self.metadata.epoch < target:
                await asyncio.sleep(REFRESH_PAUSE_S)
        if self.metadata.epoch < target:
            raise Unavailable(
                f"no replica reached epoch {target} (client at {self.metadata.epoch})"
            )

    def replicas(self) -> list[str]:
        """The replicas the metadata names as joined, else the seeds."""
        known = [n.address for n in self.metadata.nodes.values() if n.state is NodeState.JOINED]
        return known or self.seeds

    async def table_or_refresh(self, keyspace: str, table: str) -> Table:
        """``table``; when the metadata lacks it, after fetching from each known replica once
        (the one the metadata came from may have lagged the CMS; a table that does not exist
        costs each call that one round)."""
        try:
            return self.table(keyspace, table)
        except InvalidRequest:
            pass
        for address in self.replicas():
            try:
                await self.fetch_from(address)
            except EpochalError as error:
                if not _retryable(error):
                    raise
                continue
            found = self.metadata.keyspaces.get(keyspace)
            if found is not None and table in found.tables:
                break
        return self.table(keyspace, table)

    def table(self, keyspace: str, table: str) -> Table:
        found = self.metadata.keyspaces.get(keyspace)
        schema = found.tables.get(table) if found is not None else None
        if schema is None:
            raise InvalidRequest(
                f"table {keyspace}.{table} is not in the client's metadata (epoch "
                f"{self.metadata.epoch}); create it, or refresh() if another client did"
            )
        return schema
