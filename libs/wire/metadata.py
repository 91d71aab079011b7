"""Cluster metadata and transformations <-> epochal.v1 protobuf (only here is metadata_pb2 used).

Decoding checks what protobuf cannot: a oneof that is set, enums that are known, fields that a
transformation needs. Anything wrong raises ``MalformedInput`` naming the field. Encoding is
deterministic (maps in key order), so equal values give equal bytes and equal digests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError

from epochal.tcm import (
    AlterKeyspace,
    AlterTable,
    ClusterMetadata,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    InitializeCMS,
    Keyspace,
    NodeInfo,
    NodeState,
    Register,
    ReplicationType,
    Table,
    TokenMap,
    Transformation,
    TriggerSnapshot,
    Unregister,
)
from epochal.tcm.schema import frozen_map
from epochal.wire.cms_members import CMS_CODECS, members_from_proto, members_to_proto
from epochal.wire.fields import (
    MalformedInput,
    enum_from,
    replication_from_proto,
    replication_to_proto,
    required,
)
from epochal.wire.leases import (
    LEASE_CODECS,
    leases_from_proto,
    leases_to_proto,
    reconcilers_from_proto,
    reconcilers_to_proto,
)
from epochal.wire.topology import (
    NODE_STATE_NUMBERS,
    NODE_STATES,
    TOPOLOGY_CODECS,
    placements_from_proto,
    sequences_from_proto,
    topology_to_proto,
)
from epochal.wire.v1 import metadata_pb2 as pb

_COLUMN_TYPES = {
    pb.TEXT: ColumnType.TEXT,
    pb.INT: ColumnType.INT,
    pb.BIGINT: ColumnType.BIGINT,
    pb.BOOLEAN: ColumnType.BOOLEAN,
    pb.DOUBLE: ColumnType.DOUBLE,
    pb.BLOB: ColumnType.BLOB,
    pb.UUID: ColumnType.UUID,
    pb.TIMESTAMP: ColumnType.TIMESTAMP,
}
_COLUMN_TYPE_NUMBERS = {v: k for k, v in _COLUMN_TYPES.items()}
_REPLICATION_TYPES = {pb.UNTRACKED: ReplicationType.UNTRACKED, pb.TRACKED: ReplicationType.TRACKED}
_REPLICATION_TYPE_NUMBERS = {v: k for k, v in _REPLICATION_TYPES.items()}


# --------------------------------------------------------------------------- pieces


def _add_columns(repeated: Any, columns: tuple[Column, ...]) -> None:
    """Append to a repeated Column field (``add`` builds each message in place, which costs
    half of building it apart and copying it in; tables have many columns)."""
    add = repeated.add
    for column in columns:
        add(name=column.name, type=_COLUMN_TYPE_NUMBERS[column.type])


def _columns_from_proto(columns: Any, field: str) -> tuple[Column, ...]:
    result = []
    for column in columns:
        kind = _COLUMN_TYPES.get(column.type)
        if not column.name or kind is None:
            _raise_for_columns(columns, field)
        result.append(Column(column.name, kind))
    return tuple(result)


def _raise_for_columns(columns: Any, field: str) -> None:
    """The precise error for the first bad column (kept off the common path)."""
    for index, column in enumerate(columns):
        required(column.name, f"{field}[{index}].name")
        enum_from(ColumnType, _COLUMN_TYPES, column.type, f"{field}[{index}].type")


def _options(mapping: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(mapping.items()))


# --------------------------------------------------------------------------- transformations


def _to_initialize(t: InitializeCMS) -> pb.InitializeCMS:
    return pb.InitializeCMS(members=members_to_proto(t.members))


def _from_initialize(m: pb.InitializeCMS) -> Transformation:
    return InitializeCMS(members=members_from_proto(m.members, "initialize_cms.members"))


def _to_create_keyspace(t: CreateKeyspace) -> pb.CreateKeyspace:
    return pb.CreateKeyspace(
        name=t.name,
        replication=replication_to_proto(t.replication),
        replication_type=_REPLICATION_TYPE_NUMBERS[t.replication_type],
        options=dict(t.options),
    )


def _from_create_keyspace(m: pb.CreateKeyspace) -> Transformation:
    if not m.HasField("replication"):
        raise MalformedInput("create_keyspace.replication is required")
    return CreateKeyspace(
        name=required(m.name, "create_keyspace.name"),
        replication=replication_from_proto(m.replication, "create_keyspace.replication"),
        replication_type=enum_from(
            ReplicationType,
            _REPLICATION_TYPES,
            m.replication_type,
            "create_keyspace.replication_type",
        ),
        options=_options(m.options),
    )


def _to_alter_keyspace(t: AlterKeyspace) -> pb.AlterKeyspace:
    message = pb.AlterKeyspace(name=t.name, options=dict(t.options))
    if t.replication is not None:
        message.replication.CopyFrom(replication_to_proto(t.replication))
    if t.replication_type is not None:
        message.replication_type = _REPLICATION_TYPE_NUMBERS[t.replication_type]
    return message


def _from_alter_keyspace(m: pb.AlterKeyspace) -> Transformation:
    return AlterKeyspace(
        name=required(m.name, "alter_keyspace.name"),
        options=_options(m.options),
        replication=replication_from_proto(m.replication, "alter_keyspace.replication")
        if m.HasField("replication")
        else None,
        replication_type=enum_from(
            ReplicationType,
            _REPLICATION_TYPES,
            m.replication_type,
            "alter_keyspace.replication_type",
        )
        if m.replication_type
        else None,
    )


def _to_drop_keyspace(t: DropKeyspace) -> pb.DropKeyspace:
    return pb.DropKeyspace(name=t.name)


def _from_drop_keyspace(m: pb.DropKeyspace) -> Transformation:
    return DropKeyspace(name=required(m.name, "drop_keyspace.name"))


def _to_create_table(t: CreateTable) -> pb.CreateTable:
    message = pb.CreateTable(
        keyspace=t.keyspace,
        name=t.name,
        partition_key=t.partition_key,
        clustering_key=t.clustering_key,
        options=dict(t.options),
    )
    _add_columns(message.columns, t.columns)
    return message


def _from_create_table(m: pb.CreateTable) -> Transformation:
    if not m.columns:
        raise MalformedInput("create_table.columns is required")
    if not m.partition_key:
        raise MalformedInput("create_table.partition_key is required")
    return CreateTable(
        keyspace=required(m.keyspace, "create_table.keyspace"),
        name=required(m.name, "create_table.name"),
        columns=_columns_from_proto(m.columns, "create_table.columns"),
        partition_key=tuple(m.partition_key),
        clustering_key=tuple(m.clustering_key),
        options=_options(m.options),
    )


def _to_alter_table(t: AlterTable) -> pb.AlterTable:
    message = pb.AlterTable(
        keyspace=t.keyspace,
        name=t.name,
        drop_columns=t.drop_columns,
        options=dict(t.options),
    )
    _add_columns(message.add_columns, t.add_columns)
    return message


def _from_alter_table(m: pb.AlterTable) -> Transformation:
    return AlterTable(
        keyspace=required(m.keyspace, "alter_table.keyspace"),
        name=required(m.name, "alter_table.name"),
        add_columns=_columns_from_proto(m.add_columns, "alter_table.add_columns"),
        drop_columns=tuple(m.drop_columns),
        options=_options(m.options),
    )


def _to_drop_table(t: DropTable) -> pb.DropTable:
    return pb.DropTable(keyspace=t.keyspace, name=t.name)


def _from_drop_table(m: pb.DropTable) -> Transformation:
    return DropTable(
        keyspace=required(m.keyspace, "drop_table.keyspace"),
        name=required(m.name, "drop_table.name"),
    )


def _to_register(t: Register) -> pb.Register:
    return pb.Register(address=t.address, datacenter=t.datacenter, rack=t.rack, version=t.version)


def _from_register(m: pb.Register) -> Transformation:
    return Register(
        address=required(m.address, "register.address"),
        datacenter=required(m.datacenter, "register.datacenter"),
        rack=required(m.rack, "register.rack"),
        version=required(m.version, "register.version"),
    )


def _to_unregister(t: Unregister) -> pb.Unregister:
    return pb.Unregister(node_id=t.node_id)


def _from_unregister(m: pb.Unregister) -> Transformation:
    return Unregister(node_id=required(m.node_id, "unregister.node_id"))


def _to_trigger_snapshot(t: TriggerSnapshot) -> pb.TriggerSnapshot:
    return pb.TriggerSnapshot()


def _from_trigger_snapshot(m: pb.TriggerSnapshot) -> Transformation:
    return TriggerSnapshot()


# kind (the oneof field name and Transformation.kind) -> (to proto, from proto)
_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Transformation]]] = {
    InitializeCMS.kind: (_to_initialize, _from_initialize),
    CreateKeyspace.kind: (_to_create_keyspace, _from_create_keyspace),
    AlterKeyspace.kind: (_to_alter_keyspace, _from_alter_keyspace),
    DropKeyspace.kind: (_to_drop_keyspace, _from_drop_keyspace),
    CreateTable.kind: (_to_create_table, _from_create_table),
    AlterTable.kind: (_to_alter_table, _from_alter_table),
    DropTable.kind: (_to_drop_table, _from_drop_table),
    Register.kind: (_to_register, _from_register),
    Unregister.kind: (_to_unregister, _from_unregister),
    TriggerSnapshot.kind: (_to_trigger_snapshot, _from_trigger_snapshot),
    **TOPOLOGY_CODECS,
    **CMS_CODECS,
    **LEASE_CODECS,
}


def transformation_to_proto(transformation: Transformation) -> pb.Transformation:
    to_proto, _ = _CODECS[transformation.kind]
    return pb.Transformation(**{transformation.kind: to_proto(transformation)})


def transformation_from_proto(message: pb.Transformation) -> Transformation:
    kind = message.WhichOneof("kind")
    if kind is None:
        raise MalformedInput(
            "transformation has no kind set (or a kind this server does not know): expected one "
            f"of {', '.join(sorted(_CODECS))}"
        )
    _, from_proto = _CODECS[kind]
    return from_proto(getattr(message, kind))


def encode_transformation(transformation: Transformation) -> bytes:
    return transformation_to_proto(transformation).SerializeToString(deterministic=True)


def decode_transformation(data: bytes) -> Transformation:
    try:
        message = pb.Transformation.FromString(data)
    except DecodeError as error:
        raise MalformedInput(f"not an encoded Transformation: {error}") from None
    return transformation_from_proto(message)


# --------------------------------------------------------------------------- metadata


def _table_to_proto(table: Table) -> pb.Table:
    message = pb.Table(
        keyspace=table.keyspace,
        name=table.name,
        id=table.id,
        partition_key=table.partition_key,
        clustering_key=table.clustering_key,
        options=dict(table.options),
        created_epoch=table.created_epoch,
    )
    _add_columns(message.columns, table.columns)
    return message


def _table_from_proto(m: pb.Table) -> Table:
    return Table(
        keyspace=m.keyspace,
        name=m.name,
        id=m.id,
        columns=_columns_from_proto(m.columns, f"table {m.name}.columns"),
        partition_key=tuple(m.partition_key),
        clustering_key=tuple(m.clustering_key),
        options=frozen_map(dict(m.options)),
        created_epoch=m.created_epoch,
    )


def _keyspace_to_proto(keyspace: Keyspace) -> pb.Keyspace:
    return pb.Keyspace(
        name=keyspace.name,
        replication=replication_to_proto(keyspace.replication),
        replication_type=_REPLICATION_TYPE_NUMBERS[keyspace.replication_type],
        options=dict(keyspace.options),
        tables=[_table_to_proto(keyspace.tables[name]) for name in sorted(keyspace.tables)],
        created_epoch=keyspace.created_epoch,
    )


def metadata_to_proto(
    metadata: ClusterMetadata, keyspace_to_proto: Callable[[Keyspace], pb.Keyspace] | None = None
) -> pb.ClusterMetadata:
    convert = keyspace_to_proto or _keyspace_to_proto
    return pb.ClusterMetadata(
        epoch=metadata.epoch,
        keyspaces=[convert(metadata.keyspaces[name]) for name in sorted(metadata.keyspaces)],
        nodes=[
            pb.NodeInfo(
                node_id=n.node_id,
                address=n.address,
                datacenter=n.datacenter,
                rack=n.rack,
                state=NODE_STATE_NUMBERS[n.state],
                version=n.version,
                registered_epoch=n.registered_epoch,
            )
            for n in (metadata.nodes[node_id] for node_id in sorted(metadata.nodes))
        ],
        cms_members=members_to_proto(metadata.cms_members),
        next_node_number=metadata.next_node_number,
        **topology_to_proto(metadata),
        reconcile_leases=leases_to_proto(metadata.reconcile_leases),
        reconcilers=reconcilers_to_proto(metadata.reconcilers),
    )


class MetadataEncoder:
    """``encode_metadata`` that converts only the keyspaces that changed since its last call.

    Metadata is immutable and a transformation replaces only what it touches, so an unchanged
    keyspace is the very same object in the next snapshot; its message is reused. Not
    thread-safe: one encoder per thread.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Keyspace, pb.Keyspace]] = {}

    def encode(self, metadata: ClusterMetadata) -> bytes:
        previous, self._cache = self._cache, {}

        def convert(keyspace: Keyspace) -> pb.Keyspace:
            hit = previous.get(id(keyspace))
            message = (
                hit[1] if hit is not None and hit[0] is keyspace else _keyspace_to_proto(keyspace)
            )
            self._cache[id(keyspace)] = (keyspace, message)
            return message

        return metadata_to_proto(metadata, convert).SerializeToString(deterministic=True)


def metadata_from_proto(m: pb.ClusterMetadata) -> ClusterMetadata:
    keyspaces = {
        k.name: Keyspace(
            name=k.name,
            replication=replication_from_proto(k.replication, f"keyspace {k.name}.replication"),
            replication_type=enum_from(
                ReplicationType, _REPLICATION_TYPES, k.replication_type, f"keyspace {k.name}"
            ),
            options=frozen_map(dict(k.options)),
            tables=frozen_map({t.name: _table_from_proto(t) for t in k.tables}),
            created_epoch=k.created_epoch,
        )
        for k in m.keyspaces
    }
    nodes = {
        n.node_id: NodeInfo(
            node_id=n.node_id,
            address=n.address,
            datacenter=n.datacenter,
            rack=n.rack,
            state=enum_from(NodeState, NODE_STATES, n.state, f"node {n.node_id}.state"),
            version=n.version,
            registered_epoch=n.registered_epoch,
        )
        for n in m.nodes
    }
    return ClusterMetadata(
        epoch=m.epoch,
        keyspaces=frozen_map(keyspaces),
        nodes=frozen_map(nodes),
        cms_members=members_from_proto(m.cms_members, "cms_members"),
        next_node_number=m.next_node_number or 1,
        tokens=TokenMap({t.node_id: tuple(t.tokens) for t in m.tokens}),
        placements=placements_from_proto(m.placements, sorted(nodes)),
        sequences=sequences_from_proto(m.sequences),
        reconcile_leases=leases_from_proto(m.reconcile_leases),
        reconcilers=reconcilers_from_proto(m.reconcilers),
    )


def metadata_to_json(metadata: ClusterMetadata) -> dict[str, Any]:
    """The metadata in the proto3 JSON form of ``ClusterMetadata`` (field names as in the proto;
    64-bit numbers as strings, as that mapping writes them), but for ``epoch``: an int."""
    data: dict[str, Any] = MessageToDict(
        metadata_to_proto(metadata), preserving_proto_field_name=True
    )
    data["epoch"] = metadata.epoch
    return data


def encode_metadata(metadata: ClusterMetadata) -> bytes:
    return metadata_to_proto(metadata).SerializeToString(deterministic=True)


def decode_metadata(data: bytes) -> ClusterMetadata:
    try:
        message = pb.ClusterMetadata.FromString(data)
    except DecodeError as error:
        raise MalformedInput(f"not encoded ClusterMetadata: {error}") from None
    return metadata_from_proto(message)
