"""Replica clusters for tests: a ring of some of the replicas, the ``events`` tables the
topology tests write, what the CMS says (metadata, sequence steps), a replica's database, QUORUM
writers that keep what was acknowledged, and the check that every quorum of a final read group
reads every acknowledged write."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import sqlite3
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from epochal.client import AsyncClient, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
)
from epochal.tcm.keys import partition_columns, partition_token

from .cms import log_entries
from .waiting import until

EVENTS = {"id": "text", "seq": "int", "payload": "text"}
HOLD_MS = 600_000  # a stream delay (test hook) that holds streams until the test sets 0 again
PREPARED = {
    PrepareJoin: "prepare_join",
    PrepareLeave: "prepare_leave",
    PrepareReplace: "prepare_replace",
    PrepareMove: "prepare_move",
}


async def start_ring(
    cluster: LocalCluster,
    founders: Sequence[str] = (),
    *,
    tokens: Mapping[str, Sequence[int]] | None = None,
    num_tokens: int | None = None,
) -> int:
    """Start the CMS and the replicas ``founders`` (all of them if none are named), which join a
    new ring by themselves (explicit ``tokens`` by name, else ``num_tokens`` each); the
    cluster's other replicas get the join setting off, for the test to start and drive their
    operations. Returns the epoch every founder has applied once all have joined."""
    founders = list(founders or cluster.nodes)
    if num_tokens is not None:
        cluster.num_tokens = num_tokens
    for name, replica in cluster.nodes.items():
        replica.auto_join = name in founders
        replica.tokens = tuple((tokens or {}).get(name, ()))
    cluster.cms.start()
    for name in founders:
        cluster.start_replica(name)
    await cluster.wait_ready(founders)
    return await cluster.wait_joined(founders)


async def create_events(client: AsyncClient, keyspace: str) -> int:
    """The table ``events`` of ``keyspace`` (partition key ``id``, clustering key ``seq``);
    the epoch that created it."""
    return await client.create_table(
        keyspace, "events", EVENTS, partition_key=["id"], clustering_key=["seq"]
    )


async def latest(cluster: LocalCluster, client: AsyncClient) -> ClusterMetadata:
    """The client's metadata, brought to the CMS's current epoch."""
    async with CMSClient(cluster.cms.addresses) as cms:
        epoch = (await cms.describe()).epoch
    await client.refresh(epoch)
    return client.metadata


async def read_seqs(
    client: AsyncClient,
    keyspace: str,
    key: str,
    consistency: Consistency,
    coordinator: str | None = None,
) -> list[int]:
    """The ``seq`` of each row of partition ``key`` of ``keyspace``'s ``events``, read at
    ``consistency`` through ``coordinator`` (else the one the client picks)."""
    result = await client.read(
        keyspace, "events", {"id": key}, consistency=consistency, coordinator=coordinator
    )
    return [row["seq"] for row in result.rows]


async def _reads(client: AsyncClient, keyspace: str, key: str, coordinator: str) -> bool:
    """Whether a QUORUM read of ``key`` through ``coordinator`` succeeds now."""
    try:
        await read_seqs(client, keyspace, key, Consistency.QUORUM, coordinator)
    except EpochalError:
        return False
    return True


def key_token(client: AsyncClient, keyspace: str, key: str) -> int:
    """The token of partition ``key`` of ``keyspace``'s ``events``."""
    return partition_token(partition_columns(client.table(keyspace, "events")), (key,))


def read_group(
    metadata: ClusterMetadata, client: AsyncClient, keyspace: str, key: str
) -> frozenset[str]:
    """The node ids that ``metadata`` reads partition ``key`` of ``keyspace``'s ``events`` from."""
    return metadata.replica_group(keyspace, key_token(client, keyspace, key), write=False)


async def steps_since(cluster: LocalCluster, epoch: int) -> list[tuple[str, str]]:
    """(node id, step) of every topology transformation committed after ``epoch``, in order:
    ``prepare_join`` (or leave, replace, move), ``start``, ``mid``, ``finish``, ``cancel``."""
    steps = []
    for entry in await log_entries(cluster.cms, epoch):
        transformation = entry.transformation
        if isinstance(transformation, AdvanceSequence):
            steps.append((transformation.node_id, transformation.step.value))
        elif type(transformation) in PREPARED:
            steps.append((transformation.node_id, PREPARED[type(transformation)]))
        elif isinstance(transformation, CancelSequence):
            steps.append((transformation.node_id, "cancel"))
    return steps


async def steps_of(cluster: LocalCluster, node_id: str) -> list[str]:
    """The steps of ``node_id``'s sequences in the whole log, in order."""
    return [step for node, step in await steps_since(cluster, 0) if node == node_id]


@contextlib.contextmanager
def replica_db(cluster: LocalCluster, name: str) -> Iterator[sqlite3.Connection]:
    """The replica's database, opened read-only."""
    path = cluster.data_dir / name / "replica.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        yield db


def low_bounds_everywhere(cluster: LocalCluster, keyspace: str) -> bool:
    """Has every replica of ``cluster`` a low bound of ``keyspace`` (a reconciliation round of
    its ranges went through)?"""
    sql = (
        f"SELECT count(*) FROM reconcile_marks WHERE keyspace = '{keyspace}' AND kind = 'low_bound'"
    )
    return all(replica_rows(cluster, name, sql)[0][0] for name in cluster.nodes)


def replica_rows(cluster: LocalCluster, name: str, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    """The rows ``sql`` selects from the replica's database (opened read-only)."""
    with replica_db(cluster, name) as db:
        return db.execute(sql).fetchall()


@dataclass
class QuorumWriters:
    """One writer a keyspace, each writing new partitions of its ``events`` at QUORUM (``w0``,
    ``w1``, ...: one row at ``seq``), one after another until stopped. An acknowledged write is
    kept, in order; a failed one was not promised, and its writer goes on with the next."""

    client: AsyncClient
    keyspaces: Sequence[str]
    seq: int = 0
    acknowledged: list[tuple[str, str]] = field(default_factory=list)  # (keyspace, key)
    _counts: Counter[str] = field(default_factory=Counter)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _failed: int = 0  # writes refused or failed, for the message of a wait that timed out
    _last_error: EpochalError | None = None

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._write(k)) for k in self.keyspaces]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def more(self, writes: int, timeout_s: float = 60.0) -> None:
        """Until ``writes`` more writes are acknowledged in each keyspace."""
        target = {keyspace: self._counts[keyspace] + writes for keyspace in self.keyspaces}
        await until(
            lambda: (
                f"{writes} more acknowledged writes in each of {', '.join(self.keyspaces)} "
                f"(acknowledged {dict(self._counts)}, target {target}; {self._failed} failed, "
                f"the last: {self._last_error!r}; writers done: "
                f"{[t.done() for t in self._tasks]})"
            ),
            lambda: all(self._counts[k] >= count for k, count in target.items()),
            timeout_s,
        )

    async def _write(self, keyspace: str) -> None:
        for n in itertools.count():
            if self._stop.is_set():
                return
            key = f"w{n}"
            row = {"id": key, "seq": self.seq, "payload": f"written {n}"}
            try:
                await self.client.write(keyspace, "events", row, consistency=Consistency.QUORUM)
            except EpochalError as error:
                self._failed += 1
                self._last_error = error
                await asyncio.sleep(0.01)  # paces a writer while writes are refused
                continue
            self.acknowledged.append((keyspace, key))
            self._counts[keyspace] += 1


async def assert_every_quorum_reads_every_write(
    cluster: LocalCluster,
    client: AsyncClient,
    metadata: ClusterMetadata,
    final: Sequence[str],
    acked: Mapping[tuple[str, str], int],
) -> None:
    """Every acknowledged write (``acked``: (keyspace, key) -> the seq of its last row) is read
    through every quorum (two of three) of its read group in ``metadata``, whose nodes are among
    the replicas ``final``: for each pair of them, the other ones are stopped while every write
    whose group holds the pair is read at QUORUM through it; then they are started again."""
    names = {cluster.nodes[name].node_id: name for name in final}
    for pair in itertools.combinations(sorted(names), 2):
        others = [names[n] for n in names if n not in pair]
        for name in others:
            cluster.stop_replica(name)
        coordinator = cluster.nodes[names[pair[0]]].address
        readable = [
            (keyspace, key)
            for (keyspace, key) in sorted(acked)
            if set(pair) <= read_group(metadata, client, keyspace, key)
        ]
        # The coordinator's channel to the other of the pair may still be backing off from that
        # node's own stop in an earlier pair (up to grpc.max_reconnect_backoff_ms after it
        # serves again): the pair is a quorum once the coordinator reaches it.
        if readable:
            await until(
                f"{names[pair[0]]} reaching {names[pair[1]]} again",
                functools.partial(_reads, client, *readable[0], coordinator),
                timeout_s=30.0,
            )
        checked = 0
        for (keyspace, key), seq in sorted(acked.items()):
            if not set(pair) <= read_group(metadata, client, keyspace, key):
                continue
            seqs = await read_seqs(client, keyspace, key, Consistency.QUORUM, coordinator)
            assert seq in seqs, (keyspace, key, pair, seqs)
            checked += 1
        assert checked > 0, pair
        for name in others:
            cluster.start_replica(name)
        await cluster.wait_ready(others)
