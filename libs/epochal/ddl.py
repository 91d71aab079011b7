"""The schema changes of the SDK's clients, each one transformation committed through the CMS by
the client's ``commit`` (with its retries, profile and timeout)."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from epochal.errors import InvalidRequest
from epochal.tcm import (
    AlterTable,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    ReplicationParams,
    ReplicationType,
    Transformation,
)
from epochal.tcm.schema import gc_grace_seconds


class SchemaChanges(abc.ABC):
    @abc.abstractmethod
    async def commit(
        self,
        transformation: Transformation,
        *,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> int:
        """Commit ``transformation``; its epoch."""

    async def create_keyspace(
        self,
        name: str,
        *,
        replication_factor: int = 3,
        replication: ReplicationParams | None = None,
        tracked: bool = False,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> int:
        return await self.commit(
            CreateKeyspace(
                name=name,
                replication=replication or ReplicationParams.simple(replication_factor),
                replication_type=ReplicationType.TRACKED if tracked else ReplicationType.UNTRACKED,
            ),
            profile=profile,
            timeout_s=timeout_s,
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
        profile: str | None = None,
        timeout_s: float | None = None,
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
            ),
            profile=profile,
            timeout_s=timeout_s,
        )

    async def add_columns(
        self,
        keyspace: str,
        table: str,
        columns: Mapping[str, ColumnType | str],
        *,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> int:
        added = tuple(Column(c, ColumnType(t)) for c, t in columns.items())
        return await self.commit(
            AlterTable(keyspace=keyspace, name=table, add_columns=added),
            profile=profile,
            timeout_s=timeout_s,
        )

    async def drop_table(
        self,
        keyspace: str,
        table: str,
        *,
        profile: str | None = None,
        timeout_s: float | None = None,
    ) -> int:
        return await self.commit(
            DropTable(keyspace=keyspace, name=table), profile=profile, timeout_s=timeout_s
        )

    async def drop_keyspace(
        self, keyspace: str, *, profile: str | None = None, timeout_s: float | None = None
    ) -> int:
        return await self.commit(DropKeyspace(name=keyspace), profile=profile, timeout_s=timeout_s)
