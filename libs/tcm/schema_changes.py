"""Schema transformations: create, alter and drop keyspaces and tables. Pure.

Each validates against the state at the tail of the log (names new and well formed, the
keyspace or table there or not, columns within the limits, a keyspace's replication changed
only where a sequence of its own exists) and executes into the next epoch; a table's id is
derived from its name and the epoch, so every member assigns the same one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.placement import Placement
from epochal.tcm.schema import (
    Column,
    Keyspace,
    ReplicationParams,
    ReplicationType,
    Table,
    check_identifier,
    frozen_map,
    is_identifier,
)
from epochal.tcm.transformations import Transformation

_TABLE_ID_NAMESPACE = uuid.UUID("6f1c1c1e-8b8e-4e0b-9d8e-2f0a51c0e0a1")
MAX_COLUMNS = 1024
MAX_OPTION_CHARS = 4096


def _options(items: Mapping[str, str] | tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return frozen_map(dict(items))


def _check_options(options: Mapping[str, str]) -> None:
    for key, value in options.items():
        if not key or len(key) > 64 or len(value) > MAX_OPTION_CHARS:
            raise Rejected(
                "bad_option",
                f"option {key[:64]!r}: keys are 1..64 characters, values at most "
                f"{MAX_OPTION_CHARS}",
            )


# --------------------------------------------------------------------------- keyspaces


def _existing_keyspace(metadata: ClusterMetadata, name: str) -> Keyspace:
    keyspace = metadata.keyspaces.get(name)
    if keyspace is None:
        raise Rejected("keyspace_not_found", f"keyspace {name!r} does not exist")
    return keyspace


def _with_keyspace(metadata: ClusterMetadata, keyspace: Keyspace) -> ClusterMetadata:
    return replace(metadata, keyspaces=frozen_map({**metadata.keyspaces, keyspace.name: keyspace}))


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateKeyspace(Transformation):
    name: str
    replication: ReplicationParams
    replication_type: ReplicationType = ReplicationType.UNTRACKED
    options: tuple[tuple[str, str], ...] = ()
    kind: ClassVar[str] = "create_keyspace"

    def check_input(self) -> None:
        _check_new_names(self.name)

    def check(self, metadata: ClusterMetadata) -> None:
        check_identifier("keyspace", self.name)
        existing = metadata.keyspaces.get(self.name)
        if existing is not None:
            raise Rejected(
                "keyspace_exists",
                f"keyspace {self.name!r} already exists (created at epoch "
                f"{existing.created_epoch})",
            )
        self.replication.check()
        _check_options(_options(self.options))
        if self.replication not in metadata.placements and metadata.sequences:
            busy = next(iter(metadata.sequences.values()))
            raise Rejected(
                "sequence_in_progress",
                f"a keyspace with new replication params ({self.replication}) needs placements "
                f"computed while no topology operation runs; wait for the {busy.describe()}",
            )

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        if self.replication not in metadata.placements:
            placement = Placement.natural(self.replication, metadata.tokens, metadata.locations())
            placements = frozen_map({**metadata.placements, self.replication: placement})
            metadata = replace(metadata, placements=placements)
        keyspace = Keyspace(
            name=self.name,
            replication=self.replication,
            replication_type=self.replication_type,
            options=_options(self.options),
            created_epoch=epoch,
        )
        return _with_keyspace(metadata, keyspace)

    def __str__(self) -> str:
        return f"CreateKeyspace({self.name}, {self.replication}, {self.replication_type.value})"


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterKeyspace(Transformation):
    """Options only; a replication change is refused until it exists as its own sequence."""

    name: str
    options: tuple[tuple[str, str], ...] = ()
    replication: ReplicationParams | None = None
    replication_type: ReplicationType | None = None
    kind: ClassVar[str] = "alter_keyspace"

    def check(self, metadata: ClusterMetadata) -> None:
        keyspace = _existing_keyspace(metadata, self.name)
        if self.replication is not None and self.replication != keyspace.replication:
            raise Rejected(
                "replication_change_unsupported",
                f"changing the replication of {self.name!r} ({keyspace.replication} -> "
                f"{self.replication}) is not supported yet; only options can be altered",
            )
        if self.replication_type is not None and self.replication_type != keyspace.replication_type:
            raise Rejected(
                "replication_change_unsupported",
                f"changing {self.name!r} from {keyspace.replication_type.value} to "
                f"{self.replication_type.value} is not supported yet",
            )
        _check_options(_options(self.options))

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        keyspace = metadata.keyspaces[self.name]
        options = frozen_map({**keyspace.options, **dict(self.options)})
        return _with_keyspace(metadata, replace(keyspace, options=options))

    def __str__(self) -> str:
        return f"AlterKeyspace({self.name}, options={dict(self.options)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class DropKeyspace(Transformation):
    """The keyspace with its tables and its reconciler lease grants; a placement that no other
    keyspace uses goes too."""

    name: str
    kind: ClassVar[str] = "drop_keyspace"

    def check(self, metadata: ClusterMetadata) -> None:
        _existing_keyspace(metadata, self.name)

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        keyspaces = {k: v for k, v in metadata.keyspaces.items() if k != self.name}
        in_use = {k.replication for k in keyspaces.values()}
        placements = {p: v for p, v in metadata.placements.items() if p in in_use}
        leases = tuple(g for g in metadata.reconcile_leases if g.keyspace != self.name)
        return replace(
            metadata,
            keyspaces=frozen_map(keyspaces),
            placements=frozen_map(placements),
            reconcile_leases=leases,
        )

    def __str__(self) -> str:
        return f"DropKeyspace({self.name})"


# --------------------------------------------------------------------------- tables


def _existing_table(metadata: ClusterMetadata, keyspace: str, name: str) -> Table:
    table = _existing_keyspace(metadata, keyspace).tables.get(name)
    if table is None:
        raise Rejected("table_not_found", f"table {keyspace}.{name} does not exist")
    return table


def _with_table(
    metadata: ClusterMetadata, keyspace: str, table: Table | None, name: str
) -> ClusterMetadata:
    current = metadata.keyspaces[keyspace]
    tables = {k: v for k, v in current.tables.items() if k != name}
    if table is not None:
        tables[name] = table
    return _with_keyspace(metadata, replace(current, tables=frozen_map(tables)))


def _check_new_names(*names: str) -> None:
    """Names a commit introduces, checked strictly where it arrives (``check_input``): the
    rule applied to chosen entries (``check_identifier``) lets one trailing newline through,
    and stays so that members of two versions apply a log alike."""
    for name in names:
        if not is_identifier(name):
            raise Rejected(
                "bad_name",
                f"name {name[:60]!r} is not valid: use 1 to 48 letters, digits or underscores, "
                "starting with a letter",
            )


def _check_columns(columns: tuple[Column, ...]) -> None:
    if len(columns) > MAX_COLUMNS:
        raise Rejected("too_many_columns", f"{len(columns)} columns; the limit is {MAX_COLUMNS}")
    seen: set[str] = set()
    for column in columns:
        check_identifier("column", column.name)
        if column.name in seen:
            raise Rejected("duplicate_column", f"column {column.name!r} is defined twice")
        seen.add(column.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTable(Transformation):
    keyspace: str
    name: str
    columns: tuple[Column, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    kind: ClassVar[str] = "create_table"

    def check_input(self) -> None:
        _check_new_names(self.name, *(c.name for c in self.columns))

    def check(self, metadata: ClusterMetadata) -> None:
        keyspace = _existing_keyspace(metadata, self.keyspace)
        check_identifier("table", self.name)
        existing = keyspace.tables.get(self.name)
        if existing is not None:
            raise Rejected(
                "table_exists",
                f"table {self.keyspace}.{self.name} already exists (id {existing.id}, created at "
                f"epoch {existing.created_epoch})",
            )
        _check_columns(self.columns)
        if not self.partition_key:
            raise Rejected("bad_primary_key", "a table needs at least one partition key column")
        names = {c.name for c in self.columns}
        key = (*self.partition_key, *self.clustering_key)
        missing = [k for k in key if k not in names]
        if missing:
            raise Rejected("bad_primary_key", f"primary key columns {missing} are not defined")
        if len(set(key)) != len(key):
            raise Rejected("bad_primary_key", f"a column appears twice in the primary key {key}")
        _check_options(_options(self.options))

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        table = Table(
            keyspace=self.keyspace,
            name=self.name,
            id=str(uuid.uuid5(_TABLE_ID_NAMESPACE, f"{self.keyspace}.{self.name}@{epoch}")),
            columns=self.columns,
            partition_key=self.partition_key,
            clustering_key=self.clustering_key,
            options=_options(self.options),
            created_epoch=epoch,
        )
        return _with_table(metadata, self.keyspace, table, self.name)

    def __str__(self) -> str:
        columns = ", ".join(f"{c.name} {c.type.value}" for c in self.columns)
        key = f"({', '.join(self.partition_key)})" + (
            f", {', '.join(self.clustering_key)}" if self.clustering_key else ""
        )
        return f"CreateTable({self.keyspace}.{self.name}: {columns}; key {key})"


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterTable(Transformation):
    keyspace: str
    name: str
    add_columns: tuple[Column, ...] = ()
    drop_columns: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    kind: ClassVar[str] = "alter_table"

    def check_input(self) -> None:
        _check_new_names(*(c.name for c in self.add_columns))

    def check(self, metadata: ClusterMetadata) -> None:
        table = _existing_table(metadata, self.keyspace, self.name)
        for name in self.drop_columns:
            if table.column(name) is None:
                raise Rejected(
                    "column_not_found", f"{self.keyspace}.{self.name} has no column {name!r}"
                )
            if name in table.key_columns:
                raise Rejected(
                    "key_column", f"{name!r} is part of the primary key and cannot be dropped"
                )
        remaining = [c for c in table.columns if c.name not in self.drop_columns]
        for column in self.add_columns:
            if any(c.name == column.name for c in remaining):
                raise Rejected(
                    "column_exists",
                    f"{self.keyspace}.{self.name} already has a column {column.name!r}",
                )
        _check_columns((*remaining, *self.add_columns))
        _check_options(_options(self.options))

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        table = metadata.keyspaces[self.keyspace].tables[self.name]
        columns = tuple(c for c in table.columns if c.name not in self.drop_columns)
        altered = replace(
            table,
            columns=columns + self.add_columns,
            options=frozen_map({**table.options, **dict(self.options)}),
        )
        return _with_table(metadata, self.keyspace, altered, self.name)

    def __str__(self) -> str:
        changes = [f"+{c.name} {c.type.value}" for c in self.add_columns]
        changes += [f"-{name}" for name in self.drop_columns]
        changes += [f"{k}={v}" for k, v in self.options]
        return f"AlterTable({self.keyspace}.{self.name}: {', '.join(changes)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class DropTable(Transformation):
    keyspace: str
    name: str
    kind: ClassVar[str] = "drop_table"

    def check(self, metadata: ClusterMetadata) -> None:
        _existing_table(metadata, self.keyspace, self.name)

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        return _with_table(metadata, self.keyspace, None, self.name)

    def __str__(self) -> str:
        return f"DropTable({self.keyspace}.{self.name})"
