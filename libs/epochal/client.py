"""The Epochal client SDK: connect to any replicas, learn the metadata, read and write.

    async with Client(["127.0.0.1:9001"]) as client:
        await client.create_keyspace("shop", replication_factor=3, tracked=True)
        await client.create_table(
            "shop", "carts", {"user": "text", "item": "text", "qty": "int"},
            partition_key=["user"], clustering_key=["item"],
        )
        await client.write("shop", "carts", {"user": "ann", "item": "tea", "qty": 2})
        rows = (await client.read("shop", "carts", {"user": "ann"})).rows

Theory of operation
-------------------
``Client`` is the facade over the SDK's parts, each a module of its own:

- ``epochal.metadata_view``: the client's copy of the cluster metadata, learnt from a seed
  replica's ``FetchLog`` and brought forward whenever an answer shows a newer epoch;
- ``epochal.routing``: the token-aware choice of coordinators, replicas of the partition in turn;
- ``epochal.encoding``: Python values <-> the wire (checked against the table's schema);
- ``epochal.sessions``: one ``Session`` stream per replica, requests multiplexed by id;
- ``epochal.retry``: the retry policy the CMS client follows too;
- ``epochal.cms_client``: DDL goes to the CMS, whose members the metadata names.

Every request carries the highest epoch the client has seen (the coordinator catches up to it
first: a table created a moment ago is known) and the session's highest HLC (a later write of
this session always gets a later timestamp than an earlier one).

Retries follow the retry table (``epochal.status.RETRIES``, README "Errors and retries"): a
failed write or read is tried again on the next replica unless the server decided no (bad
input, a refusal). A write's retry reuses the mutation id the coordinator assigned (it comes
back in the error), so it is stored once. A write whose coordinator vanished before answering
has no id to reuse; its retry is a new mutation with the same content (idempotent cells,
another id).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from epochal import encoding, retry
from epochal.cms_client import CMSClient
from epochal.encoding import ColumnTypes, Encoded, Slice
from epochal.errors import EpochalError, InvalidRequest, Unavailable
from epochal.metadata_view import MetadataView
from epochal.results import ReadResult, ReadStats, WriteResult
from epochal.routing import Router
from epochal.sessions import Sessions
from epochal.status import Operation
from epochal.tcm import (
    AlterTable,
    ClusterMetadata,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    ReplicationParams,
    ReplicationType,
    Table,
    Transformation,
)
from epochal.tcm.consistency import Consistency
from epochal.tcm.schema import gc_grace_seconds

__all__ = [
    "Client",
    "Consistency",
    "ReadResult",
    "ReadStats",
    "WriteResult",
]


def retry_policy(operation: Operation, *, timeout_s: float, retries: int) -> retry.RetryPolicy:
    """How the SDK retries a write or a read (README "Errors and retries"): on the next replica,
    up to ``retries`` times, backing off from 0.1 s to 1 s; each attempt waits ``timeout_s``."""
    return retry.RetryPolicy(
        operation,
        attempt_timeout_s=timeout_s,
        max_attempts=max(retries, 0) + 1,
        first_backoff_s=0.1,
        max_backoff_s=1.0,
    )


class Client:
    def __init__(
        self,
        seeds: Sequence[str],
        *,
        consistency: Consistency | str = Consistency.QUORUM,
        timeout_s: float = 10.0,
        retries: int = 3,
    ) -> None:
        if not seeds:
            raise ValueError("Client needs at least one replica address to start from")
        self.consistency = Consistency.of(consistency)
        self.timeout_s = timeout_s
        self.retries = retries
        self.session_hlc = 0
        self._sessions = Sessions()
        self._view = MetadataView(
            seeds, lambda address, since: self._sessions.fetch_log(address, since, self.timeout_s)
        )
        self._router = Router()
        self._types = ColumnTypes()
        self._cms: CMSClient | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> Client:
        """Learn the metadata from the first seed that answers (one that refuses — not a
        replica, say — is one the next seed may stand in for)."""
        await self._view.connect()
        return self

    async def close(self) -> None:
        self._view.close()
        if self._cms is not None:
            await self._cms.close()
        await self._sessions.close()

    # ------------------------------------------------------------------ metadata

    @property
    def seeds(self) -> list[str]:
        return self._view.seeds

    @property
    def metadata(self) -> ClusterMetadata:
        return self._view.metadata

    @property
    def epoch(self) -> int:
        return self._view.metadata.epoch

    @property
    def seen_epoch(self) -> int:
        return self._view.seen_epoch

    async def refresh(self, epoch: int | None = None) -> None:
        """Bring the client's metadata to ``epoch`` (default: what it has seen)."""
        await self._view.refresh(epoch)

    def table(self, keyspace: str, table: str) -> Table:
        return self._view.table(keyspace, table)

    def _observe(self, epoch: int, address: str, hlc: int = 0) -> None:
        """An answer's epoch and HLC: the next requests carry them (and a newer epoch brings
        the metadata forward in the background)."""
        self.session_hlc = max(self.session_hlc, hlc)
        self._view.observe(epoch, address)

    # ------------------------------------------------------------------ DDL

    async def commit(self, transformation: Transformation) -> int:
        """Commit a metadata transformation through the CMS; returns its epoch, which the
        client's next requests carry (so every coordinator knows the change)."""
        if self._cms is None:
            addresses = [m.address for m in self.metadata.cms_members]
            if not addresses:
                raise Unavailable("the metadata names no CMS member yet")
            self._cms = CMSClient(addresses)
        committed = await self._cms.commit(transformation, entry_id=uuid.uuid4().hex)
        self._view.saw(committed.epoch)
        await self.refresh(committed.epoch)
        return committed.epoch

    async def create_keyspace(
        self,
        name: str,
        *,
        replication_factor: int = 3,
        replication: ReplicationParams | None = None,
        tracked: bool = False,
    ) -> int:
        return await self.commit(
            CreateKeyspace(
                name=name,
                replication=replication or ReplicationParams.simple(replication_factor),
                replication_type=ReplicationType.TRACKED if tracked else ReplicationType.UNTRACKED,
            )
        )

    async def create_table(
        self,
        keyspace: str,
        name: str,
        columns: Mapping[str, ColumnType | str],
        *,
        partition_key: Sequence[str],
        clustering_key: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
    ) -> int:
        """``options`` as Cassandra's table options, e.g. ``gc_grace_seconds`` (how long
        tombstones are kept at least; default ten days)."""
        options = dict(options or {})
        try:
            gc_grace_seconds(options)
        except ValueError as error:
            raise InvalidRequest(str(error), rule="bad_option") from None
        return await self.commit(
            CreateTable(
                keyspace=keyspace,
                name=name,
                columns=tuple(Column(c, ColumnType(t)) for c, t in columns.items()),
                partition_key=tuple(partition_key),
                clustering_key=tuple(clustering_key),
                options=tuple(sorted(options.items())),
            )
        )

    async def add_columns(
        self, keyspace: str, table: str, columns: Mapping[str, ColumnType | str]
    ) -> int:
        added = tuple(Column(c, ColumnType(t)) for c, t in columns.items())
        return await self.commit(AlterTable(keyspace=keyspace, name=table, add_columns=added))

    async def drop_table(self, keyspace: str, table: str) -> int:
        return await self.commit(DropTable(keyspace=keyspace, name=table))

    async def drop_keyspace(self, keyspace: str) -> int:
        return await self.commit(DropKeyspace(name=keyspace))

    # ------------------------------------------------------------------ writes

    async def write(
        self,
        keyspace: str,
        table: str,
        row: Mapping[str, Any],
        *,
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
    ) -> WriteResult:
        """Upsert one row (its key columns and the values to set; ``None`` deletes a cell)."""
        return await self.write_rows(
            keyspace, table, [row], consistency=consistency, coordinator=coordinator
        )

    async def write_rows(
        self,
        keyspace: str,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
    ) -> WriteResult:
        """Upsert rows of one partition as one mutation: replicas store it whole or not at all."""
        schema = self.table(keyspace, table)
        level = self._level(consistency)
        encoded = encoding.write_rows(schema, self._types.of(schema), rows, level)
        return await self._write(encoded, coordinator)

    async def delete(
        self,
        keyspace: str,
        table: str,
        key: Mapping[str, Any],
        *,
        columns: Sequence[str] = (),
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
    ) -> WriteResult:
        """Delete ``columns`` of a row, a whole row (``key`` names its clustering key), or the
        whole partition (``key`` names only the partition key)."""
        schema = self.table(keyspace, table)
        level = self._level(consistency)
        encoded = encoding.delete(schema, self._types.of(schema), key, columns, level)
        return await self._write(encoded, coordinator)

    async def _write(self, encoded: Encoded, coordinator: str | None) -> WriteResult:
        reply, address, attempts = await self._send(encoded, coordinator)
        result = encoding.write_result(reply, address, attempts)
        self._observe(result.epoch, address, result.mutation_id.hlc)
        return result

    # ------------------------------------------------------------------ reads

    async def read(
        self,
        keyspace: str,
        table: str,
        partition_key: Mapping[str, Any],
        *,
        start: Mapping[str, Any] | None = None,
        end: Mapping[str, Any] | None = None,
        start_exclusive: bool = False,
        end_exclusive: bool = False,
        columns: Sequence[str] = (),
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
    ) -> ReadResult:
        """The rows of one partition (or of a clustering slice: ``start``/``end`` name a prefix
        of the clustering key), each a dict of its key columns and live cells."""
        schema = self.table(keyspace, table)
        bounds = Slice(start, end, start_exclusive, end_exclusive)
        encoded = encoding.read(
            schema,
            self._types.of(schema),
            partition_key,
            bounds,
            columns,
            self._level(consistency),
        )
        reply, address, _ = await self._send(encoded, coordinator)
        result, hlc = encoding.read_result(schema, partition_key, reply, address)
        self._observe(result.epoch, address, hlc)
        return result

    def endpoints(
        self, keyspace: str, table: str, partition_key: Mapping[str, Any], *, write: bool = False
    ) -> list[str]:
        """The replicas the SDK routes a read (``write``: a write) of the partition to, by
        address, sorted: the read (write) group of its token in the client's metadata."""
        _, token = self._partition(self.table(keyspace, table), partition_key)
        return self._router.replicas(self.metadata, keyspace, token, write=write)

    def _level(self, consistency: Consistency | str | None) -> Consistency:
        """A call's level: the one it names (the enum or its name, any case), else the
        client's."""
        return self.consistency if consistency is None else Consistency.of(consistency)

    # ------------------------------------------------------------------ sending

    def _partition(self, schema: Table, values: Mapping[str, Any]) -> tuple[list[Any], int]:
        """The partition key's wire values and the token the SDK routes by
        (``encoding.partition``; tests/unit/test_replica_mutations.py holds it to the
        replica's)."""
        return encoding.partition(schema, values)

    async def _send(self, encoded: Encoded, coordinator: str | None) -> tuple[Any, str, int]:
        """Send ``encoded`` to the partition's replicas in turn, as the retry policy says
        (``coordinator``: to that one only). Returns the reply, who answered, and the attempts
        made."""
        candidates = self._router.candidates(
            self.metadata,
            encoded.keyspace,
            encoded.token,
            write=encoded.operation is Operation.WRITE,
            fallback=self._view.replicas(),
            pinned=coordinator,
        )
        policy = retry_policy(encoded.operation, timeout_s=self.timeout_s, retries=self.retries)

        async def attempt(current: retry.Attempt) -> tuple[Any, str, int]:
            address = candidates[(current.number - 1) % len(candidates)]
            request = encoding.session_request(
                encoded,
                epoch=self.seen_epoch,
                session_hlc=self.session_hlc,
                mutation_id=current.carry_id,
            )
            try:
                reply = await self._sessions.call(
                    address, coordinator is not None, request, current.timeout_s
                )
            except EpochalError as error:
                self._observe(error.epoch, address)
                raise
            return reply, address, current.number

        return await retry.run(policy, attempt)
