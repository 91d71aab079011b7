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
The client keeps its own copy of the cluster metadata, learnt from a seed replica's
``FetchLog`` (a snapshot, then entries) and brought forward whenever an answer shows a newer
epoch. With it, requests are routed token-aware: to a replica of the partition, in turn. Every
request carries the highest epoch the client has seen (the coordinator catches up to it first:
a table created a moment ago is known) and the session's highest HLC (a later write of this
session always gets a later timestamp than an earlier one). DDL goes to the CMS, whose members
the metadata names.

Retries follow the retry table (``epochal.status.RETRIES``, README "Errors and retries"): a
failed write or read is tried again on the next replica unless the server decided no (bad
input, a refusal). A write's retry reuses the mutation id the coordinator assigned (it comes
back in the error), so it is stored once. A write whose coordinator vanished before answering
has no id to reuse; its retry is a new mutation with the same content (idempotent cells,
another id).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from epochal.cms_client import CMSClient
from epochal.errors import EpochalError, InvalidRequest, Unavailable
from epochal.mtrack import MutationId
from epochal.status import Operation, Retry, code_of, error_for, from_rpc_error, retry_for
from epochal.tcm import (
    AlterTable,
    ClusterMetadata,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    NodeState,
    ReplicationParams,
    ReplicationType,
    Table,
    Transformation,
)
from epochal.tcm.consistency import Consistency
from epochal.tcm.keys import partition_columns, partition_token
from epochal.wire.channels import insecure_channel
from epochal.wire.log import fetch_request, fetch_response
from epochal.wire.multiplex import Multiplexer
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc
from epochal.wire.values import BadValue, from_proto, to_proto

__all__ = [
    "Client",
    "Consistency",
    "ReadResult",
    "ReadStats",
    "WriteResult",
]

MAX_IN_FLIGHT_PER_REPLICA = 4096
_LEVELS = {
    Consistency.ONE: pb.ONE,
    Consistency.QUORUM: pb.QUORUM,
    Consistency.LOCAL_QUORUM: pb.LOCAL_QUORUM,
    Consistency.ALL: pb.ALL,
}


@dataclass(frozen=True, slots=True)
class WriteResult:
    mutation_id: MutationId
    epoch: int
    acknowledged: tuple[str, ...]
    coordinator: str
    attempts: int


@dataclass(frozen=True, slots=True)
class ReadStats:
    replicas: tuple[str, ...]
    data_replica: str
    repaired_mutations: int
    repaired: tuple[MutationId, ...]
    digest_mismatch: bool
    repaired_cells: int
    # Tracked: rounds of summary comparison (1: the summaries agreed at once), whether they
    # agreed in the first round, and per replica the logs (node, log) that differed then.
    summary_rounds: int = 0
    summaries_agreed: bool = False
    differing: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReadResult:
    rows: list[dict[str, Any]]
    stats: ReadStats
    epoch: int
    coordinator: str
    # When each cell was written (its HLC), by row index and column.
    written: list[dict[str, int]] = field(default_factory=list)


def _mutation_id(message: pb.MutationId) -> MutationId:
    return MutationId(
        node=message.node, log=message.log, sequence=message.sequence, hlc=message.hlc
    )


class Client:
    def __init__(
        self,
        seeds: Sequence[str],
        *,
        consistency: Consistency = Consistency.QUORUM,
        timeout_s: float = 10.0,
        retries: int = 3,
    ) -> None:
        if not seeds:
            raise ValueError("Client needs at least one replica address to start from")
        self.seeds = list(seeds)
        self.consistency = consistency
        self.timeout_s = timeout_s
        self.retries = retries
        self.metadata = ClusterMetadata.empty()
        self.seen_epoch = 0
        self.session_hlc = 0
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, replica_pb2_grpc.ReplicaStub] = {}
        self._turn = itertools.count()
        self._refresh: asyncio.Task[None] | None = None
        self._cms: CMSClient | None = None
        self._sessions: dict[tuple[str, bool], Multiplexer] = {}
        self._column_types: dict[str, tuple[Table, dict[str, ColumnType]]] = {}  # by table id
        # Replica group -> (the directory it was resolved in, addresses sorted).
        self._addresses_of: dict[frozenset[str], tuple[object, list[str]]] = {}

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> Client:
        """Learn the metadata from the first seed that answers (one that refuses — not a
        replica, say — is one the next seed may stand in for)."""
        errors = []
        refusal: grpc.aio.AioRpcError | None = None
        for address in self.seeds:
            try:
                await self._fetch_metadata(address)
                return self
            except grpc.aio.AioRpcError as error:
                if retry_for(Operation.READ, error.code()) is Retry.NO:
                    refusal = error
                errors.append(f"{address}: {error.code().name} {error.details() or ''}".strip())
        if refusal is not None and len(errors) == 1:
            raise from_rpc_error(refusal) from None
        raise Unavailable(f"no seed answered: {'; '.join(errors)}")

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        if self._cms is not None:
            await self._cms.close()
        for channel in self._channels.values():
            await channel.close(grace=None)
        self._channels.clear()
        self._stubs.clear()

    def _stub(self, address: str) -> replica_pb2_grpc.ReplicaStub:
        stub = self._stubs.get(address)
        if stub is None:
            self._channels[address] = insecure_channel(address)
            stub = self._stubs[address] = replica_pb2_grpc.ReplicaStub(self._channels[address])
        return stub

    # ------------------------------------------------------------------ metadata

    @property
    def epoch(self) -> int:
        return self.metadata.epoch

    async def _fetch_metadata(self, address: str) -> None:
        stub = self._stub(address)
        while True:
            response = await stub.FetchLog(
                fetch_request(self.metadata.epoch), timeout=self.timeout_s
            )
            page = fetch_response(response)
            metadata = self.metadata
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
            moved = metadata.epoch > self.metadata.epoch
            self.metadata = metadata
            self.seen_epoch = max(self.seen_epoch, metadata.epoch)
            if not page.has_more or metadata.epoch >= page.latest_epoch or not moved:
                return

    def _observe(self, epoch: int, address: str, hlc: int = 0) -> None:
        """An answer's epoch (and HLC): the next requests carry them; a newer epoch brings the
        client's metadata forward in the background (one refresh at a time)."""
        self.seen_epoch = max(self.seen_epoch, epoch)
        self.session_hlc = max(self.session_hlc, hlc)
        if epoch > self.metadata.epoch and (self._refresh is None or self._refresh.done()):
            self._refresh = asyncio.get_running_loop().create_task(self._quiet_refresh(address))

    async def _quiet_refresh(self, address: str) -> None:
        # On failure the next answer with a newer epoch tries again.
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self._fetch_metadata(address)

    async def refresh(self, epoch: int | None = None) -> None:
        """Bring the client's metadata to ``epoch`` (default: what it has seen)."""
        target = self.seen_epoch if epoch is None else epoch
        for address in itertools.islice(itertools.cycle(self._addresses()), 50):
            if self.metadata.epoch >= target:
                return
            try:
                await self._fetch_metadata(address)
            except grpc.aio.AioRpcError as error:
                if retry_for(Operation.READ, error.code()) is Retry.NO:
                    raise from_rpc_error(error) from None
                continue
            if self.metadata.epoch < target:
                await asyncio.sleep(0.05)
        if self.metadata.epoch < target:
            raise Unavailable(
                f"no replica reached epoch {target} (client at {self.metadata.epoch})"
            )

    def _addresses(self) -> list[str]:
        known = [n.address for n in self.metadata.nodes.values() if n.state is NodeState.JOINED]
        return known or self.seeds

    def table(self, keyspace: str, table: str) -> Table:
        found = self.metadata.keyspaces.get(keyspace)
        schema = found.tables.get(table) if found is not None else None
        if schema is None:
            raise InvalidRequest(
                f"table {keyspace}.{table} is not in the client's metadata (epoch "
                f"{self.metadata.epoch}); create it, or refresh() if another client did"
            )
        return schema

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
        self.seen_epoch = max(self.seen_epoch, committed.epoch)
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
    ) -> int:
        return await self.commit(
            CreateTable(
                keyspace=keyspace,
                name=name,
                columns=tuple(Column(c, ColumnType(t)) for c, t in columns.items()),
                partition_key=tuple(partition_key),
                clustering_key=tuple(clustering_key),
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

    # ------------------------------------------------------------------ routing

    def _partition(self, schema: Table, values: Mapping[str, Any]) -> tuple[list[pb.Value], int]:
        columns = partition_columns(schema)
        missing = [name for name, _ in columns if values.get(name) is None]
        if missing:
            raise InvalidRequest(f"the partition key needs {missing}")
        try:
            protos = [to_proto(name, kind, values[name]) for name, kind in columns]
            # The token of the values the replica decodes (to_proto converts an int for a
            # double, a datetime for a timestamp), so that both compute the same token.
            token = partition_token(columns, [from_proto(proto) for proto in protos])
        except (BadValue, ValueError) as error:
            raise InvalidRequest(str(error)) from None
        return protos, token

    def _types(self, schema: Table) -> dict[str, ColumnType]:
        """Column -> type, computed once per version of the table (tables are immutable: an
        altered table is a new object)."""
        cached = self._column_types.get(schema.id)
        if cached is None or cached[0] is not schema:
            cached = self._column_types[schema.id] = (
                schema,
                {c.name: c.type for c in schema.columns},
            )
        return cached[1]

    def _coordinators(self, keyspace: str, token: int, *, write: bool) -> list[str]:
        """The token's replicas (by the client's metadata), rotated; else every known node."""
        metadata = self.metadata
        found = metadata.keyspaces.get(keyspace)
        placement = metadata.placements.get(found.replication) if found is not None else None
        replicas: list[str] = []
        if placement is not None and placement.points:
            index = placement.index_of(token)
            group = placement.writes[index] if write else placement.reads[index]
            cached = self._addresses_of.get(group)
            if cached is None or cached[0] is not metadata.nodes:
                addresses = sorted(metadata.nodes[n].address for n in group if n in metadata.nodes)
                cached = self._addresses_of[group] = (metadata.nodes, addresses)
            replicas = cached[1]
        replicas = replicas or self._addresses()
        start = next(self._turn) % len(replicas)
        return replicas[start:] + replicas[:start]

    # ------------------------------------------------------------------ sessions

    def _session(self, address: str, pinned: bool) -> Multiplexer:
        """The session stream to ``address`` (a pinned coordinator's waits for the channel to
        connect; otherwise a replica that cannot be reached fails at once, and the next is
        tried)."""
        session = self._sessions.get((address, pinned))
        if session is None:
            stub = self._stub(address)
            session = self._sessions[address, pinned] = Multiplexer(
                lambda: stub.Session(wait_for_ready=pinned),
                lambda requests: pb.SessionRequests(requests=requests),
                max_in_flight=MAX_IN_FLIGHT_PER_REPLICA,
                name=address,
                failure=lambda reason, code: error_for(code, reason),
            )
        return session

    async def _send(self, address: str, pinned: bool, **body: Any) -> pb.SessionReply:
        """One request on the session to ``address``; a failure raises an EpochalError."""
        return await self._session(address, pinned).call(
            pb.SessionRequest(**body), self.timeout_s, _session_reply
        )

    # ------------------------------------------------------------------ writes

    async def write(
        self,
        keyspace: str,
        table: str,
        row: Mapping[str, Any],
        *,
        consistency: Consistency | None = None,
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
        consistency: Consistency | None = None,
        coordinator: str | None = None,
    ) -> WriteResult:
        """Upsert rows of one partition as one mutation: replicas store it whole or not at all."""
        schema = self.table(keyspace, table)
        if not rows:
            raise InvalidRequest("write_rows needs at least one row")
        key, token = self._partition(schema, rows[0])
        mutation = pb.Mutation(keyspace=keyspace, table=table, partition_key=key)
        types = self._types(schema)
        first = [rows[0].get(name) for name in schema.partition_key]
        for row in rows:
            if [row.get(name) for name in schema.partition_key] != first:
                raise InvalidRequest("every row of one write must have the same partition key")
            mutation.rows.append(
                pb.RowWrite(
                    clustering=self._clustering(schema, row, types),
                    cells=[
                        pb.CellWrite(column=name, value=self._value(name, types, value))
                        for name, value in row.items()
                        if name not in schema.key_columns
                    ],
                )
            )
        return await self._write(mutation, token, consistency, coordinator)

    async def delete(
        self,
        keyspace: str,
        table: str,
        key: Mapping[str, Any],
        *,
        columns: Sequence[str] = (),
        consistency: Consistency | None = None,
        coordinator: str | None = None,
    ) -> WriteResult:
        """Delete ``columns`` of a row, a whole row (``key`` names its clustering key), or the
        whole partition (``key`` names only the partition key)."""
        schema = self.table(keyspace, table)
        partition, token = self._partition(schema, key)
        mutation = pb.Mutation(keyspace=keyspace, table=table, partition_key=partition)
        types = self._types(schema)
        has_clustering = any(c in key for c in schema.clustering_key)
        if not has_clustering and schema.clustering_key:
            if columns:
                raise InvalidRequest("deleting columns needs the row's whole clustering key")
            mutation.delete_partition = True
        elif columns:
            mutation.rows.append(
                pb.RowWrite(
                    clustering=self._clustering(schema, key, types),
                    cells=[pb.CellWrite(column=c, value=pb.Value()) for c in columns],
                )
            )
        else:
            mutation.rows.append(
                pb.RowWrite(clustering=self._clustering(schema, key, types), delete=True)
            )
        return await self._write(mutation, token, consistency, coordinator)

    def _clustering(
        self, schema: Table, row: Mapping[str, Any], types: Mapping[str, ColumnType]
    ) -> list[pb.Value]:
        missing = [c for c in schema.clustering_key if row.get(c) is None]
        if missing:
            raise InvalidRequest(f"the clustering key needs {missing}")
        return [self._value(c, types, row[c]) for c in schema.clustering_key]

    @staticmethod
    def _value(name: str, types: Mapping[str, ColumnType], value: Any) -> pb.Value:
        column_type = types.get(name)
        if column_type is None:
            raise InvalidRequest(f"unknown column {name!r}")
        try:
            return to_proto(name, column_type, value)
        except BadValue as error:
            raise InvalidRequest(str(error)) from None

    async def _write(
        self,
        mutation: pb.Mutation,
        token: int,
        consistency: Consistency | None,
        coordinator: str | None,
    ) -> WriteResult:
        level = _LEVELS[consistency or self.consistency]
        request = pb.WriteRequest(mutation=mutation, consistency=level)
        candidates = self._candidates(coordinator, mutation.keyspace, token, write=True)
        reply, address, attempts = await self._with_retries(
            candidates, coordinator is not None, write=request
        )
        response = reply.write
        self._observe(response.epoch, address, response.mutation_id.hlc)
        return WriteResult(
            _mutation_id(response.mutation_id),
            response.epoch,
            tuple(response.acknowledged),
            address,
            attempts,
        )

    def _candidates(
        self, coordinator: str | None, keyspace: str, token: int, *, write: bool
    ) -> list[str]:
        return [coordinator] if coordinator else self._coordinators(keyspace, token, write=write)

    async def _with_retries(
        self, candidates: list[str], pinned: bool, **body: Any
    ) -> tuple[pb.SessionReply, str, int]:
        """Send the request (``write=`` or ``read=``) to the candidates in turn until one
        answers, a failure is not worth retrying (the retry table, ``epochal.status``) or
        ``retries`` retries failed; a write's retry reuses the mutation id its failure named
        (or drops it when the table says a fresh one). Returns the reply, who answered, and
        the attempts made."""
        request = next(iter(body.values()))
        operation = Operation.WRITE if "write" in body else Operation.READ
        attempt = 0
        while True:
            address = candidates[attempt % len(candidates)]
            attempt += 1
            request.epoch = self.seen_epoch
            request.session_hlc = self.session_hlc
            try:
                return await self._send(address, pinned, **body), address, attempt
            except EpochalError as error:
                self._observe(error.epoch, address)
                retry = retry_for(operation, code_of(error))
                if retry is Retry.NO or attempt > self.retries:
                    raise
                if operation is Operation.WRITE and retry is Retry.FRESH:
                    request.ClearField("mutation_id")
                elif operation is Operation.WRITE and error.mutation_id:
                    request.mutation_id.CopyFrom(_id_proto(error.mutation_id))
                await asyncio.sleep(min(0.05 * 2**attempt, 1.0))

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
        consistency: Consistency | None = None,
        coordinator: str | None = None,
    ) -> ReadResult:
        """The rows of one partition (or of a clustering slice: ``start``/``end`` name a prefix
        of the clustering key), each a dict of its key columns and live cells."""
        schema = self.table(keyspace, table)
        key, token = self._partition(schema, partition_key)
        types = self._types(schema)
        request = pb.ReadRequest(
            keyspace=keyspace,
            table=table,
            partition_key=key,
            columns=list(columns),
            consistency=_LEVELS[consistency or self.consistency],
        )
        if start is not None or end is not None:
            request.slice.CopyFrom(
                pb.ClusteringSlice(
                    start=self._prefix(schema, start or {}, types),
                    has_start=start is not None,
                    start_exclusive=start_exclusive,
                    end=self._prefix(schema, end or {}, types),
                    has_end=end is not None,
                    end_exclusive=end_exclusive,
                )
            )
        candidates = self._candidates(coordinator, keyspace, token, write=False)
        reply, address, _ = await self._with_retries(
            candidates, coordinator is not None, read=request
        )
        self._observe(reply.read.epoch, address, reply.read.hlc)
        return self._read_result(schema, partition_key, reply.read, address)

    @staticmethod
    def _prefix(
        schema: Table, values: Mapping[str, Any], types: Mapping[str, ColumnType]
    ) -> list[pb.Value]:
        prefix = []
        for name in schema.clustering_key:
            if name not in values:
                break
            prefix.append(Client._value(name, types, values[name]))
        if len(prefix) != len(values):
            raise InvalidRequest(
                f"a slice bound names a prefix of the clustering key {list(schema.clustering_key)}"
            )
        return prefix

    @staticmethod
    def _read_result(
        schema: Table, partition_key: Mapping[str, Any], response: pb.ReadResponse, address: str
    ) -> ReadResult:
        rows = []
        written = []
        for row in response.rows:
            values = {name: partition_key[name] for name in schema.partition_key}
            values.update(
                zip(schema.clustering_key, (from_proto(v) for v in row.clustering), strict=True)
            )
            values.update((cell.column, from_proto(cell.value)) for cell in row.cells)
            rows.append(values)
            written.append({cell.column: cell.hlc for cell in row.cells})
        stats = response.stats
        return ReadResult(
            rows=rows,
            stats=ReadStats(
                replicas=tuple(stats.replicas),
                data_replica=stats.data_replica,
                repaired_mutations=stats.repaired_mutations,
                repaired=tuple(_mutation_id(m) for m in stats.repaired),
                digest_mismatch=stats.digest_mismatch,
                repaired_cells=stats.repaired_cells,
                summary_rounds=stats.summary_rounds,
                summaries_agreed=stats.summaries_agreed,
                differing={
                    d.replica: tuple((k.node, k.log) for k in d.logs) for d in stats.differing
                },
            ),
            epoch=response.epoch,
            coordinator=address,
            written=written,
        )


def _session_reply(reply: pb.SessionReply) -> pb.SessionReply:
    """The reply, or the EpochalError its failure describes (what Write or Read would raise)."""
    if reply.WhichOneof("body") != "failure":
        return reply
    failure = reply.failure
    mutation_id = ""
    if failure.HasField("mutation_id"):
        mutation_id = _mutation_id(failure.mutation_id).pack().hex()
    raise error_for(
        getattr(grpc.StatusCode, failure.code, grpc.StatusCode.UNKNOWN),
        failure.message,
        rule=failure.rule,
        epoch=failure.epoch,
        mutation_id=mutation_id,
    )


def _id_proto(packed_hex: str) -> pb.MutationId:
    try:
        mutation_id = MutationId.unpack(bytes.fromhex(packed_hex))
    except ValueError as error:
        raise EpochalError(f"the server sent a malformed mutation id: {error}") from None
    return pb.MutationId(
        node=mutation_id.node,
        log=mutation_id.log,
        sequence=mutation_id.sequence,
        hlc=mutation_id.hlc,
    )
