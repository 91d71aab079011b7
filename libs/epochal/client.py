"""The Epochal client SDK for asyncio: connect to any replicas, learn the metadata, read and write.
``epochal.Client`` is the same API for threads (``epochal.sync_client``).

    from epochal import AsyncClient

    async with AsyncClient(["127.0.0.1:9001"]) as client:
        await client.create_keyspace("depot", replication_factor=3, tracked=True)
        await client.create_table(
            "depot", "bins", {"site": "text", "bin": "text", "qty": "int"},
            partition_key=["site"], clustering_key=["bin"],
        )
        await client.write("depot", "bins", {"site": "lyon", "bin": "a1", "qty": 2})
        rows = (await client.read("depot", "bins", {"site": "lyon"})).rows

Theory of operation
-------------------
``AsyncClient`` is the facade over the SDK's parts, each a module of its own:

- ``epochal.metadata_view``: the client's copy of the cluster metadata, learnt from a seed
  replica's ``FetchLog`` and brought forward whenever an answer shows a newer epoch;
- ``epochal.profiles``: execution profiles — a call's consistency, timeout, retry policy and
  routing — and a call's overrides of them;
- ``epochal.routing``: token- and datacenter-aware choice of coordinators, suspects last;
- ``epochal.encoding``: Python values <-> the wire (checked against the table's schema);
- ``epochal.sessions``: one ``Session`` stream per replica, requests multiplexed by id, and
  each replica's health;
- ``epochal.calls`` and ``epochal.policies``: a call as attempts, as its retry policy decides;
- ``epochal.cms_client``: DDL goes to the CMS, whose members the metadata names.

Every request carries the highest epoch the client has seen (the coordinator catches up to it
first: a table created a moment ago is known) and the session's highest HLC (a later write of
this session always gets a later timestamp than an earlier one).

A call's timeout bounds the whole call, retries included. Retries are the profile's retry
policy's (``epochal.policies``; the default follows the retry table, README "Errors and
retries"): a write's retry reuses the mutation id the coordinator assigned (it comes back in
the error), so it is stored once, while the replicas still accept that id; a DDL's reuses its
entry id. A failed call raises its last attempt's error (``epochal.calls``), which carries
every attempt.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from epochal import calls, encoding
from epochal.cms_client import CMSClient, Committed
from epochal.ddl import SchemaChanges
from epochal.encoding import ColumnTypes, Encoded, Slice
from epochal.errors import EpochalError, InvalidRequest, Unavailable
from epochal.metadata_view import MetadataView
from epochal.policies import RetryPolicy
from epochal.profiles import ExecutionProfile, Profiles, Settings, default_profile
from epochal.results import ReadResult, ReadStats, WriteResult
from epochal.routing import Router
from epochal.sessions import Sessions, no_answer
from epochal.status import Operation
from epochal.tcm import (
    ClusterMetadata,
    Table,
    Transformation,
)
from epochal.tcm.consistency import Consistency
from epochal.telemetry import attributes as attr
from epochal.telemetry.context import inject
from epochal.transport import client_security
from epochal.wire.tls import TlsFiles

__all__ = [
    "AsyncClient",
    "Consistency",
    "ReadResult",
    "ReadStats",
    "WriteResult",
]


def __getattr__(name: str) -> NoReturn:
    if name == "Client":
        raise ImportError(
            "epochal.client.Client is now epochal.AsyncClient (asyncio; the same class renamed) "
            "— epochal.Client is the synchronous client with the same methods"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class AsyncClient(SchemaChanges):
    """A client of one cluster, for one event loop. The keyword arguments make the default
    execution profile (``profiles``, when it names ``"default"``, gives it instead: then leave
    them unset); ``retries`` is the default retry policy's ``max_retries``. ``tls``: the CA,
    certificate and key to connect with (mutual TLS; a certificate with the ``client`` role),
    else ``EPOCHAL_TLS_CA``/``_CERT``/``_KEY``; ``insecure=True`` for a cluster that runs in
    plain text (``epochal.transport``)."""

    def __init__(
        self,
        seeds: Sequence[str],
        *,
        consistency: Consistency | str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        retry_policy: RetryPolicy | None = None,
        local_dc: str | None = None,
        profiles: Mapping[str, ExecutionProfile] | None = None,
        tls: TlsFiles | None = None,
        insecure: bool = False,
    ) -> None:
        if isinstance(seeds, str) or not seeds:
            raise InvalidRequest(
                "a client needs a list of replica addresses to start from, e.g. ['127.0.0.1:9001']"
            )
        self.profiles = Profiles(
            default_profile(consistency, timeout_s, retries, retry_policy, local_dc, profiles),
            profiles,
        )
        self.session_hlc = 0
        self._pid = os.getpid()
        self._connected = False
        self._closed = False
        self._security = client_security(tls, insecure)
        self._sessions = Sessions(self._security)
        self._view = MetadataView(
            seeds,
            lambda address, since: self._sessions.fetch_log(
                address, since, self.profiles.default.attempt_timeout_s
            ),
        )
        self._router = Router()
        self._types = ColumnTypes()
        self._cms: CMSClient | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> AsyncClient:
        """Learn the metadata from the first seed that answers (one that refuses — not a
        replica, say — is one the next seed may stand in for); a profile's ``local_dc`` must
        then be a datacenter of the cluster."""
        self._usable()
        await self._view.connect()
        self._connected = True
        known = {node.datacenter for node in self.metadata.nodes.values()}
        for name, profile in self.profiles.by_name.items():
            if profile.local_dc and known and profile.local_dc not in known:
                raise InvalidRequest(
                    f"profile {name!r} has local_dc {profile.local_dc!r}, which is not a "
                    f"datacenter of the cluster: {sorted(known)}"
                )
        return self

    async def close(self) -> None:
        """Close the connections; calls after it are refused (InvalidRequest, rule
        ``closed``)."""
        self._closed = True
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

    @property
    def consistency(self) -> Consistency:
        """The default profile's level."""
        return self.profiles.default.level

    async def refresh(self, epoch: int | None = None) -> None:
        """Bring the client's metadata to ``epoch`` (default: what it has seen)."""
        self._usable()
        await self._view.refresh(epoch)

    def table(self, keyspace: str, table: str) -> Table:
        if not self._connected:
            raise InvalidRequest(
                "the client is not connected: call connect() first, or use it as a context "
                "manager (with / async with)",
                rule="not_connected",
            )
        return self._view.table(keyspace, table)

    async def _table(self, keyspace: str, table: str) -> Table:
        """``table``, after one refresh from the replicas when the client's metadata lacks it:
        the replica the client learnt the metadata from may not have applied the DDL yet."""
        if not self._connected:
            return self.table(keyspace, table)  # raises: not connected
        return await self._view.table_or_refresh(keyspace, table)

    def suspected(self) -> list[str]:
        """The replicas the client tries last, sorted: requests have waited on them without an
        answer for a while, or they could not be reached lately (``epochal.sessions``)."""
        return sorted(self._sessions.suspected())

    def _usable(self) -> None:
        """Refuse a call the client cannot make: in a forked child, after close, before
        connect."""
        if os.getpid() != self._pid:
            raise forked(self._pid)
        if self._closed:
            raise InvalidRequest("this client is closed", rule="closed")

    def _observe(self, epoch: int, address: str, hlc: int = 0) -> None:
        """An answer's epoch and HLC: the next requests carry them (and a newer epoch brings
        the metadata forward in the background)."""
        self.session_hlc = max(self.session_hlc, hlc)
        self._view.observe(epoch, address)

    # ------------------------------------------------------------------ DDL

    async def commit(
        self,
        transformation: Transformation,
        *,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> int:
        """Commit a metadata transformation through the CMS; returns its epoch, which the
        client's next requests carry (so every coordinator knows the change). Retried with the
        same entry id, so it is committed once."""
        self._usable()
        started = time.monotonic()
        settings = self.profiles.resolve(profile, None, timeout_s)
        if self._cms is None:
            addresses = [m.address for m in self.metadata.cms_members]
            if not addresses:
                raise Unavailable("the metadata names no CMS member yet")
            self._cms = CMSClient(addresses, security=self._security)
        cms = self._cms
        request = cms.commit_request_of(transformation, uuid.uuid4().hex)

        async def attempt(current: calls.Attempt) -> Committed:
            self._usable()  # not closed since the call began
            current.coordinator = cms.current_address
            return await cms.commit_once(request, current.timeout_s)

        committed = await calls.run(
            Operation.COMMIT,
            settings.profile.retry_policy,
            settings.timeout_s,
            attempt,
            what=f"commit of {type(transformation).__name__}",
            attempt_timeout_s=settings.profile.attempt_timeout_s,
            carry_id=request.entry_id,
            wall_ms=_wall_ms,
            span=f"{attr.CLIENT_CALL_PREFIX}commit",
            span_attributes={
                attr.TRANSFORMATION: type(transformation).__name__,
                attr.ENTRY_ID: request.entry_id,
            },
        )
        self._view.saw(committed.epoch)
        left_s = started + settings.timeout_s - time.monotonic()
        try:
            await asyncio.wait_for(self.refresh(committed.epoch), max(left_s, 0.001))
        except (TimeoutError, EpochalError) as error:
            why = str(error) or "no answer in time"
            raise Unavailable(
                f"{type(transformation).__name__} was committed at epoch {committed.epoch}, but "
                f"the client could not learn that epoch within the call's timeout ({why}); call "
                f"refresh({committed.epoch}) before using it",
                epoch=committed.epoch,
                rule="committed_not_learnt",
            ) from None
        return committed.epoch

    # ------------------------------------------------------------------ writes

    async def write(
        self,
        keyspace: str,
        table: str,
        row: Mapping[str, Any],
        *,
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> WriteResult:
        """Upsert one row (its key columns and the values to set; ``None`` deletes a cell)."""
        return await self.write_rows(
            keyspace,
            table,
            [row],
            consistency=consistency,
            coordinator=coordinator,
            profile=profile,
            timeout_s=timeout_s,
        )

    async def write_rows(
        self,
        keyspace: str,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> WriteResult:
        """Upsert rows of one partition as one mutation: replicas store it whole or not at all."""
        settings = self.profiles.resolve(
            profile, consistency, timeout_s, pinned=coordinator is not None
        )
        schema = await self._table(keyspace, table)
        encoded = encoding.write_rows(schema, self._types.of(schema), rows, settings.consistency)
        return await self._write(encoded, settings, coordinator, f"{keyspace}.{table}")

    async def delete(
        self,
        keyspace: str,
        table: str,
        key: Mapping[str, Any],
        *,
        columns: Sequence[str] = (),
        consistency: Consistency | str | None = None,
        coordinator: str | None = None,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> WriteResult:
        """Delete ``columns`` of a row, a whole row (``key`` names its clustering key), or the
        whole partition (``key`` names only the partition key)."""
        settings = self.profiles.resolve(
            profile, consistency, timeout_s, pinned=coordinator is not None
        )
        schema = await self._table(keyspace, table)
        level = settings.consistency
        encoded = encoding.delete(schema, self._types.of(schema), key, columns, level)
        return await self._write(encoded, settings, coordinator, f"{keyspace}.{table}")

    async def _write(
        self, encoded: Encoded, settings: Settings, coordinator: str | None, name: str
    ) -> WriteResult:
        reply, address, attempts = await self._send(encoded, settings, coordinator, name)
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
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> ReadResult:
        """The rows of one partition (or of a clustering slice: ``start``/``end`` name a prefix
        of the clustering key), each a dict of its key columns and live cells."""
        settings = self.profiles.resolve(
            profile, consistency, timeout_s, pinned=coordinator is not None
        )
        schema = await self._table(keyspace, table)
        bounds = Slice(start, end, start_exclusive, end_exclusive)
        encoded = encoding.read(
            schema, self._types.of(schema), partition_key, bounds, columns, settings.consistency
        )
        reply, address, _ = await self._send(encoded, settings, coordinator, f"{keyspace}.{table}")
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
        default profile's."""
        return self.profiles.resolve(None, consistency).consistency

    # ------------------------------------------------------------------ sending

    def _partition(self, schema: Table, values: Mapping[str, Any]) -> tuple[list[Any], int]:
        """The partition key's wire values and the token the SDK routes by
        (``encoding.partition``; tests/unit/test_replica_mutations.py holds it to the
        replica's)."""
        return encoding.partition(schema, values)

    async def _send(
        self, encoded: Encoded, settings: Settings, coordinator: str | None, name: str
    ) -> tuple[Any, str, int]:
        """Send ``encoded`` to coordinators in turn, as the profile routes and retries it
        (``coordinator``: to that one only). Returns the reply, who answered, and the attempts
        made."""
        self._usable()
        profile = settings.profile
        write = encoded.operation is Operation.WRITE
        candidates = self._router.candidates(
            self.metadata,
            encoded.keyspace,
            encoded.token,
            write=write,
            fallback=self._view.replicas(),
            pinned=coordinator,
            route=settings.route,
            suspected=self._sessions.suspected(),
        )

        silent: set[str] = set()  # coordinators that gave this call no answer

        async def attempt(current: calls.Attempt) -> tuple[Any, str, int]:
            self._usable()  # not closed since the call began
            address = current.coordinator = _next(candidates, current.number, silent)
            request = encoding.session_request(
                encoded,
                epoch=self.seen_epoch,
                session_hlc=self.session_hlc,
                mutation_id=current.carry_id,
            )
            inject(request)  # the coordinator's span is a child of this attempt's
            try:
                reply = await self._sessions.call(
                    address, coordinator is not None, request, current.timeout_s
                )
            except EpochalError as error:
                if no_answer(error):
                    silent.add(address)
                self._observe(error.epoch, address)
                raise
            return reply, address, current.number

        return await calls.run(
            encoded.operation,
            profile.retry_policy,
            settings.timeout_s,
            attempt,
            what=f"{settings.consistency.value} {'write to' if write else 'read of'} {name}",
            attempt_timeout_s=None if coordinator else profile.attempt_timeout_s,
            wall_ms=_wall_ms,
            span=f"{attr.CLIENT_CALL_PREFIX}{'write' if write else 'read'}",
            span_attributes={
                attr.KEYSPACE: encoded.keyspace,
                attr.TABLE: name.partition(".")[2],
                attr.TOKEN: encoded.token,
                attr.CONSISTENCY: settings.consistency.value,
            },
        )


def _next(candidates: list[str], number: int, silent: set[str]) -> str:
    """The coordinator of attempt ``number``: the candidates in turn, skipping those that gave
    the call no answer while another is left."""
    start = (number - 1) % len(candidates)
    turn = candidates[start:] + candidates[:start]
    return next((address for address in turn if address not in silent), turn[0])


def forked(pid: int) -> InvalidRequest:
    """The refusal of a client used in a process forked from the one that created it: gRPC's
    asyncio stack cannot be used in such a child."""
    return InvalidRequest(
        f"this Epochal client was created in process {pid}, and this process ({os.getpid()}) "
        "was forked from it: gRPC cannot be used after a fork, so create the client after the "
        "fork, in the process that uses it (gunicorn: in the worker, not with --preload; "
        "multiprocessing: the 'spawn' start method; Spark: inside the task)",
        rule="forked",
    )


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
