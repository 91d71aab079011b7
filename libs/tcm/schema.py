"""Schema: keyspaces with replication, tables with CMS-assigned ids, typed columns. Immutable.

Maps are ``MappingProxyType`` views over fresh dicts: a change builds a new dict, so a
``ClusterMetadata`` never changes once built, and two equal states compare equal whatever order
their maps were built in.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from epochal.errors import Rejected

MAX_REPLICATION_FACTOR = 16
# A table's tombstones are kept at least this long (its option, as Cassandra's): a replica cut
# off for less than that still learns of a delete before it is purged.
GC_GRACE_OPTION = "gc_grace_seconds"
DEFAULT_GC_GRACE_S = 864_000  # ten days
MAX_GC_GRACE_S = 10 * 365 * 86_400
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")
_IDENTIFIER_AS_APPLIED = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")


def frozen_map(items: Mapping[str, object] | None = None) -> Mapping:  # type: ignore[type-arg]
    # Not sorted: equality ignores order, and encoding sorts (see epochal.wire.metadata).
    return MappingProxyType(dict(items or {}))


def is_identifier(name: str) -> bool:
    """1 to 48 letters, digits or underscores, starting with a letter (and nothing after)."""
    return _IDENTIFIER.fullmatch(name) is not None


def check_identifier(what: str, name: str) -> None:
    # ``match`` of ``[...]$`` also lets one trailing newline through; this rule runs when a
    # chosen entry is applied, so tightening it would make members of two versions apply a
    # log differently: it stays as it was (is_identifier is the strict one).
    if not _IDENTIFIER_AS_APPLIED.match(name):
        raise Rejected(
            "bad_name",
            f"{what} name {name!r} is not valid: use 1 to 48 letters, digits or underscores, "
            "starting with a letter",
        )


class ColumnType(enum.Enum):
    TEXT = "text"
    INT = "int"
    BIGINT = "bigint"
    BOOLEAN = "boolean"
    DOUBLE = "double"
    BLOB = "blob"
    UUID = "uuid"
    TIMESTAMP = "timestamp"


class ReplicationType(enum.Enum):
    UNTRACKED = "untracked"
    TRACKED = "tracked"


class Strategy(enum.Enum):
    SIMPLE = "SimpleStrategy"
    NETWORK_TOPOLOGY = "NetworkTopologyStrategy"


@dataclass(frozen=True, slots=True)
class ReplicationParams:
    """SimpleStrategy(RF) or NetworkTopologyStrategy({dc: RF}); factors sorted by datacenter."""

    strategy: Strategy
    factors: tuple[tuple[str, int], ...]

    @classmethod
    def simple(cls, replication_factor: int) -> ReplicationParams:
        return cls(Strategy.SIMPLE, (("", replication_factor),))

    @classmethod
    def network_topology(cls, factors: Mapping[str, int]) -> ReplicationParams:
        return cls(Strategy.NETWORK_TOPOLOGY, tuple(sorted(factors.items())))

    def check(self) -> None:
        if not self.factors:
            raise Rejected("bad_replication", "replication needs at least one replication factor")
        for datacenter, factor in self.factors:
            if not 1 <= factor <= MAX_REPLICATION_FACTOR:
                raise Rejected(
                    "bad_replication",
                    f"replication factor {factor} is out of range 1..{MAX_REPLICATION_FACTOR}",
                )
            if self.strategy is Strategy.NETWORK_TOPOLOGY and not datacenter:
                raise Rejected(
                    "bad_replication", "NetworkTopologyStrategy needs non-empty datacenter names"
                )
        if self.strategy is Strategy.SIMPLE and (len(self.factors) != 1 or self.factors[0][0]):
            raise Rejected("bad_replication", "SimpleStrategy takes exactly one replication factor")

    def __str__(self) -> str:
        if self.strategy is Strategy.SIMPLE:
            return f"SimpleStrategy(rf={self.factors[0][1]})"
        return "NetworkTopologyStrategy(" + ", ".join(f"{d}={f}" for d, f in self.factors) + ")"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    keyspace: str
    name: str
    id: str
    columns: tuple[Column, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...]
    options: Mapping[str, str] = field(default_factory=frozen_map)
    created_epoch: int

    @property
    def key_columns(self) -> frozenset[str]:
        return frozenset(self.partition_key) | frozenset(self.clustering_key)

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Keyspace:
    name: str
    replication: ReplicationParams
    replication_type: ReplicationType
    options: Mapping[str, str] = field(default_factory=frozen_map)
    tables: Mapping[str, Table] = field(default_factory=frozen_map)
    created_epoch: int


def gc_grace_seconds(options: Mapping[str, str]) -> int:
    """The table's ``gc_grace_seconds`` option (default ten days); ValueError when it is not
    a whole number of seconds in 0..10 years."""
    text = options.get(GC_GRACE_OPTION)
    if text is None:
        return DEFAULT_GC_GRACE_S
    if not text.isdigit() or int(text) > MAX_GC_GRACE_S:
        raise ValueError(
            f"{GC_GRACE_OPTION} must be a whole number of seconds in 0..{MAX_GC_GRACE_S}, "
            f"got {text!r}"
        )
    return int(text)
