from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ColumnType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLUMN_TYPE_UNSPECIFIED: _ClassVar[ColumnType]
    TEXT: _ClassVar[ColumnType]
    INT: _ClassVar[ColumnType]
    BIGINT: _ClassVar[ColumnType]
    BOOLEAN: _ClassVar[ColumnType]
    DOUBLE: _ClassVar[ColumnType]
    BLOB: _ClassVar[ColumnType]
    UUID: _ClassVar[ColumnType]
    TIMESTAMP: _ClassVar[ColumnType]

class ReplicationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICATION_TYPE_UNSPECIFIED: _ClassVar[ReplicationType]
    UNTRACKED: _ClassVar[ReplicationType]
    TRACKED: _ClassVar[ReplicationType]

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATE_UNSPECIFIED: _ClassVar[NodeState]
    REGISTERED: _ClassVar[NodeState]
    JOINING: _ClassVar[NodeState]
    JOINED: _ClassVar[NodeState]
    LEAVING: _ClassVar[NodeState]
    LEFT: _ClassVar[NodeState]
    MOVING: _ClassVar[NodeState]
    REPLACING: _ClassVar[NodeState]
    REMOVING: _ClassVar[NodeState]

class CMSRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CMS_ROLE_UNSPECIFIED: _ClassVar[CMSRole]
    CMS_ROLE_VOTER: _ClassVar[CMSRole]
    CMS_ROLE_JOINING: _ClassVar[CMSRole]
    CMS_ROLE_LEARNER: _ClassVar[CMSRole]

class SequenceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEQUENCE_KIND_UNSPECIFIED: _ClassVar[SequenceKind]
    SEQUENCE_KIND_JOIN: _ClassVar[SequenceKind]
    SEQUENCE_KIND_LEAVE: _ClassVar[SequenceKind]
    SEQUENCE_KIND_REMOVE: _ClassVar[SequenceKind]
    SEQUENCE_KIND_REPLACE: _ClassVar[SequenceKind]
    SEQUENCE_KIND_MOVE: _ClassVar[SequenceKind]

class SequenceStep(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEQUENCE_STEP_UNSPECIFIED: _ClassVar[SequenceStep]
    SEQUENCE_STEP_PREPARE: _ClassVar[SequenceStep]
    SEQUENCE_STEP_START: _ClassVar[SequenceStep]
    SEQUENCE_STEP_MID: _ClassVar[SequenceStep]
    SEQUENCE_STEP_FINISH: _ClassVar[SequenceStep]
COLUMN_TYPE_UNSPECIFIED: ColumnType
TEXT: ColumnType
INT: ColumnType
BIGINT: ColumnType
BOOLEAN: ColumnType
DOUBLE: ColumnType
BLOB: ColumnType
UUID: ColumnType
TIMESTAMP: ColumnType
REPLICATION_TYPE_UNSPECIFIED: ReplicationType
UNTRACKED: ReplicationType
TRACKED: ReplicationType
NODE_STATE_UNSPECIFIED: NodeState
REGISTERED: NodeState
JOINING: NodeState
JOINED: NodeState
LEAVING: NodeState
LEFT: NodeState
MOVING: NodeState
REPLACING: NodeState
REMOVING: NodeState
CMS_ROLE_UNSPECIFIED: CMSRole
CMS_ROLE_VOTER: CMSRole
CMS_ROLE_JOINING: CMSRole
CMS_ROLE_LEARNER: CMSRole
SEQUENCE_KIND_UNSPECIFIED: SequenceKind
SEQUENCE_KIND_JOIN: SequenceKind
SEQUENCE_KIND_LEAVE: SequenceKind
SEQUENCE_KIND_REMOVE: SequenceKind
SEQUENCE_KIND_REPLACE: SequenceKind
SEQUENCE_KIND_MOVE: SequenceKind
SEQUENCE_STEP_UNSPECIFIED: SequenceStep
SEQUENCE_STEP_PREPARE: SequenceStep
SEQUENCE_STEP_START: SequenceStep
SEQUENCE_STEP_MID: SequenceStep
SEQUENCE_STEP_FINISH: SequenceStep

class SimpleStrategy(_message.Message):
    __slots__ = ("replication_factor",)
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    replication_factor: int
    def __init__(self, replication_factor: _Optional[int] = ...) -> None: ...

class NetworkTopologyStrategy(_message.Message):
    __slots__ = ("datacenters",)
    class DatacentersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DATACENTERS_FIELD_NUMBER: _ClassVar[int]
    datacenters: _containers.ScalarMap[str, int]
    def __init__(self, datacenters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ReplicationParams(_message.Message):
    __slots__ = ("simple", "network_topology")
    SIMPLE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    simple: SimpleStrategy
    network_topology: NetworkTopologyStrategy
    def __init__(self, simple: _Optional[_Union[SimpleStrategy, _Mapping]] = ..., network_topology: _Optional[_Union[NetworkTopologyStrategy, _Mapping]] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: ColumnType
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[ColumnType, str]] = ...) -> None: ...

class Table(_message.Message):
    __slots__ = ("keyspace", "name", "id", "columns", "partition_key", "clustering_key", "options", "created_epoch")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    CLUSTERING_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    name: str
    id: str
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    partition_key: _containers.RepeatedScalarFieldContainer[str]
    clustering_key: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.ScalarMap[str, str]
    created_epoch: int
    def __init__(self, keyspace: _Optional[str] = ..., name: _Optional[str] = ..., id: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., partition_key: _Optional[_Iterable[str]] = ..., clustering_key: _Optional[_Iterable[str]] = ..., options: _Optional[_Mapping[str, str]] = ..., created_epoch: _Optional[int] = ...) -> None: ...

class Keyspace(_message.Message):
    __slots__ = ("name", "replication", "replication_type", "options", "tables", "created_epoch")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    CREATED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    name: str
    replication: ReplicationParams
    replication_type: ReplicationType
    options: _containers.ScalarMap[str, str]
    tables: _containers.RepeatedCompositeFieldContainer[Table]
    created_epoch: int
    def __init__(self, name: _Optional[str] = ..., replication: _Optional[_Union[ReplicationParams, _Mapping]] = ..., replication_type: _Optional[_Union[ReplicationType, str]] = ..., options: _Optional[_Mapping[str, str]] = ..., tables: _Optional[_Iterable[_Union[Table, _Mapping]]] = ..., created_epoch: _Optional[int] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("node_id", "address", "datacenter", "rack", "state", "version", "registered_epoch")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATACENTER_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    datacenter: str
    rack: str
    state: NodeState
    version: str
    registered_epoch: int
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., datacenter: _Optional[str] = ..., rack: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., version: _Optional[str] = ..., registered_epoch: _Optional[int] = ...) -> None: ...

class CMSMember(_message.Message):
    __slots__ = ("member_id", "address", "role")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    address: str
    role: CMSRole
    def __init__(self, member_id: _Optional[str] = ..., address: _Optional[str] = ..., role: _Optional[_Union[CMSRole, str]] = ...) -> None: ...

class ClusterMetadata(_message.Message):
    __slots__ = ("epoch", "keyspaces", "nodes", "cms_members", "next_node_number", "tokens", "placements", "sequences", "reconcile_leases", "reconcilers")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEYSPACES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    CMS_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_NODE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_LEASES_FIELD_NUMBER: _ClassVar[int]
    RECONCILERS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    keyspaces: _containers.RepeatedCompositeFieldContainer[Keyspace]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    cms_members: _containers.RepeatedCompositeFieldContainer[CMSMember]
    next_node_number: int
    tokens: _containers.RepeatedCompositeFieldContainer[NodeTokens]
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    sequences: _containers.RepeatedCompositeFieldContainer[InProgressSequence]
    reconcile_leases: _containers.RepeatedCompositeFieldContainer[LeaseGrant]
    reconcilers: _containers.RepeatedCompositeFieldContainer[ReconcilerInfo]
    def __init__(self, epoch: _Optional[int] = ..., keyspaces: _Optional[_Iterable[_Union[Keyspace, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., cms_members: _Optional[_Iterable[_Union[CMSMember, _Mapping]]] = ..., next_node_number: _Optional[int] = ..., tokens: _Optional[_Iterable[_Union[NodeTokens, _Mapping]]] = ..., placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., sequences: _Optional[_Iterable[_Union[InProgressSequence, _Mapping]]] = ..., reconcile_leases: _Optional[_Iterable[_Union[LeaseGrant, _Mapping]]] = ..., reconcilers: _Optional[_Iterable[_Union[ReconcilerInfo, _Mapping]]] = ...) -> None: ...

class LeaseGrant(_message.Message):
    __slots__ = ("keyspace", "range", "holder", "epoch")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    range: TokenRange
    holder: str
    epoch: int
    def __init__(self, keyspace: _Optional[str] = ..., range: _Optional[_Union[TokenRange, _Mapping]] = ..., holder: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ReconcilerInfo(_message.Message):
    __slots__ = ("reconciler_id", "address")
    RECONCILER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    reconciler_id: str
    address: str
    def __init__(self, reconciler_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class NodeTokens(_message.Message):
    __slots__ = ("node_id", "tokens")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, node_id: _Optional[str] = ..., tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class PlacementRange(_message.Message):
    __slots__ = ("right", "reads", "extra_writes")
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_WRITES_FIELD_NUMBER: _ClassVar[int]
    right: int
    reads: _containers.RepeatedScalarFieldContainer[int]
    extra_writes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, right: _Optional[int] = ..., reads: _Optional[_Iterable[int]] = ..., extra_writes: _Optional[_Iterable[int]] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("params", "ranges")
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    params: ReplicationParams
    ranges: _containers.RepeatedCompositeFieldContainer[PlacementRange]
    def __init__(self, params: _Optional[_Union[ReplicationParams, _Mapping]] = ..., ranges: _Optional[_Iterable[_Union[PlacementRange, _Mapping]]] = ...) -> None: ...

class TokenRange(_message.Message):
    __slots__ = ("left", "right")
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    left: int
    right: int
    def __init__(self, left: _Optional[int] = ..., right: _Optional[int] = ...) -> None: ...

class RangeDelta(_message.Message):
    __slots__ = ("point", "added", "removed")
    POINT_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    point: int
    added: _containers.RepeatedScalarFieldContainer[str]
    removed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, point: _Optional[int] = ..., added: _Optional[_Iterable[str]] = ..., removed: _Optional[_Iterable[str]] = ...) -> None: ...

class PlacementDeltas(_message.Message):
    __slots__ = ("params", "deltas")
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    params: ReplicationParams
    deltas: _containers.RepeatedCompositeFieldContainer[RangeDelta]
    def __init__(self, params: _Optional[_Union[ReplicationParams, _Mapping]] = ..., deltas: _Optional[_Iterable[_Union[RangeDelta, _Mapping]]] = ...) -> None: ...

class InProgressSequence(_message.Message):
    __slots__ = ("kind", "node_id", "replaced", "tokens_before", "tokens_after", "done", "cancelling", "prepared_epoch", "locked", "deltas")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    CANCELLING_FIELD_NUMBER: _ClassVar[int]
    PREPARED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    kind: SequenceKind
    node_id: str
    replaced: str
    tokens_before: _containers.RepeatedScalarFieldContainer[int]
    tokens_after: _containers.RepeatedScalarFieldContainer[int]
    done: SequenceStep
    cancelling: bool
    prepared_epoch: int
    locked: _containers.RepeatedCompositeFieldContainer[TokenRange]
    deltas: _containers.RepeatedCompositeFieldContainer[PlacementDeltas]
    def __init__(self, kind: _Optional[_Union[SequenceKind, str]] = ..., node_id: _Optional[str] = ..., replaced: _Optional[str] = ..., tokens_before: _Optional[_Iterable[int]] = ..., tokens_after: _Optional[_Iterable[int]] = ..., done: _Optional[_Union[SequenceStep, str]] = ..., cancelling: _Optional[bool] = ..., prepared_epoch: _Optional[int] = ..., locked: _Optional[_Iterable[_Union[TokenRange, _Mapping]]] = ..., deltas: _Optional[_Iterable[_Union[PlacementDeltas, _Mapping]]] = ...) -> None: ...

class InitializeCMS(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[CMSMember]
    def __init__(self, members: _Optional[_Iterable[_Union[CMSMember, _Mapping]]] = ...) -> None: ...

class CreateKeyspace(_message.Message):
    __slots__ = ("name", "replication", "replication_type", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    replication: ReplicationParams
    replication_type: ReplicationType
    options: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., replication: _Optional[_Union[ReplicationParams, _Mapping]] = ..., replication_type: _Optional[_Union[ReplicationType, str]] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AlterKeyspace(_message.Message):
    __slots__ = ("name", "options", "replication", "replication_type")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    options: _containers.ScalarMap[str, str]
    replication: ReplicationParams
    replication_type: ReplicationType
    def __init__(self, name: _Optional[str] = ..., options: _Optional[_Mapping[str, str]] = ..., replication: _Optional[_Union[ReplicationParams, _Mapping]] = ..., replication_type: _Optional[_Union[ReplicationType, str]] = ...) -> None: ...

class DropKeyspace(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class CreateTable(_message.Message):
    __slots__ = ("keyspace", "name", "columns", "partition_key", "clustering_key", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    CLUSTERING_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    name: str
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    partition_key: _containers.RepeatedScalarFieldContainer[str]
    clustering_key: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.ScalarMap[str, str]
    def __init__(self, keyspace: _Optional[str] = ..., name: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., partition_key: _Optional[_Iterable[str]] = ..., clustering_key: _Optional[_Iterable[str]] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AlterTable(_message.Message):
    __slots__ = ("keyspace", "name", "add_columns", "drop_columns", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADD_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    DROP_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    name: str
    add_columns: _containers.RepeatedCompositeFieldContainer[Column]
    drop_columns: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.ScalarMap[str, str]
    def __init__(self, keyspace: _Optional[str] = ..., name: _Optional[str] = ..., add_columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., drop_columns: _Optional[_Iterable[str]] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DropTable(_message.Message):
    __slots__ = ("keyspace", "name")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    name: str
    def __init__(self, keyspace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Register(_message.Message):
    __slots__ = ("address", "datacenter", "rack", "version")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATACENTER_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    address: str
    datacenter: str
    rack: str
    version: str
    def __init__(self, address: _Optional[str] = ..., datacenter: _Optional[str] = ..., rack: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class Unregister(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class TriggerSnapshot(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PrepareJoin(_message.Message):
    __slots__ = ("node_id", "tokens", "num_tokens")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    tokens: _containers.RepeatedScalarFieldContainer[int]
    num_tokens: int
    def __init__(self, node_id: _Optional[str] = ..., tokens: _Optional[_Iterable[int]] = ..., num_tokens: _Optional[int] = ...) -> None: ...

class PrepareLeave(_message.Message):
    __slots__ = ("node_id", "remove")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    remove: bool
    def __init__(self, node_id: _Optional[str] = ..., remove: _Optional[bool] = ...) -> None: ...

class PrepareReplace(_message.Message):
    __slots__ = ("node_id", "replaced")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    replaced: str
    def __init__(self, node_id: _Optional[str] = ..., replaced: _Optional[str] = ...) -> None: ...

class PrepareMove(_message.Message):
    __slots__ = ("node_id", "tokens")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, node_id: _Optional[str] = ..., tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class AdvanceSequence(_message.Message):
    __slots__ = ("node_id", "step")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    step: SequenceStep
    def __init__(self, node_id: _Optional[str] = ..., step: _Optional[_Union[SequenceStep, str]] = ...) -> None: ...

class CancelSequence(_message.Message):
    __slots__ = ("node_id", "last_step")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_STEP_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    last_step: SequenceStep
    def __init__(self, node_id: _Optional[str] = ..., last_step: _Optional[_Union[SequenceStep, str]] = ...) -> None: ...

class AddCMSCandidate(_message.Message):
    __slots__ = ("member_id", "address")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    address: str
    def __init__(self, member_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class StartAddToCMS(_message.Message):
    __slots__ = ("member_id",)
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    def __init__(self, member_id: _Optional[str] = ...) -> None: ...

class FinishAddToCMS(_message.Message):
    __slots__ = ("member_id",)
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    def __init__(self, member_id: _Optional[str] = ...) -> None: ...

class RemoveFromCMS(_message.Message):
    __slots__ = ("member_id",)
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    def __init__(self, member_id: _Optional[str] = ...) -> None: ...

class GrantReconcileLease(_message.Message):
    __slots__ = ("keyspace", "range", "holder", "replaces")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    REPLACES_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    range: TokenRange
    holder: str
    replaces: int
    def __init__(self, keyspace: _Optional[str] = ..., range: _Optional[_Union[TokenRange, _Mapping]] = ..., holder: _Optional[str] = ..., replaces: _Optional[int] = ...) -> None: ...

class RegisterReconciler(_message.Message):
    __slots__ = ("reconciler_id", "address")
    RECONCILER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    reconciler_id: str
    address: str
    def __init__(self, reconciler_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class Transformation(_message.Message):
    __slots__ = ("initialize_cms", "create_keyspace", "alter_keyspace", "drop_keyspace", "create_table", "alter_table", "drop_table", "register", "unregister", "trigger_snapshot", "prepare_join", "prepare_leave", "prepare_replace", "prepare_move", "advance_sequence", "cancel_sequence", "add_cms_candidate", "start_add_to_cms", "finish_add_to_cms", "remove_from_cms", "grant_reconcile_lease", "register_reconciler")
    INITIALIZE_CMS_FIELD_NUMBER: _ClassVar[int]
    CREATE_KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    ALTER_KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    DROP_KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TABLE_FIELD_NUMBER: _ClassVar[int]
    ALTER_TABLE_FIELD_NUMBER: _ClassVar[int]
    DROP_TABLE_FIELD_NUMBER: _ClassVar[int]
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    UNREGISTER_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    PREPARE_JOIN_FIELD_NUMBER: _ClassVar[int]
    PREPARE_LEAVE_FIELD_NUMBER: _ClassVar[int]
    PREPARE_REPLACE_FIELD_NUMBER: _ClassVar[int]
    PREPARE_MOVE_FIELD_NUMBER: _ClassVar[int]
    ADVANCE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ADD_CMS_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    START_ADD_TO_CMS_FIELD_NUMBER: _ClassVar[int]
    FINISH_ADD_TO_CMS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FROM_CMS_FIELD_NUMBER: _ClassVar[int]
    GRANT_RECONCILE_LEASE_FIELD_NUMBER: _ClassVar[int]
    REGISTER_RECONCILER_FIELD_NUMBER: _ClassVar[int]
    initialize_cms: InitializeCMS
    create_keyspace: CreateKeyspace
    alter_keyspace: AlterKeyspace
    drop_keyspace: DropKeyspace
    create_table: CreateTable
    alter_table: AlterTable
    drop_table: DropTable
    register: Register
    unregister: Unregister
    trigger_snapshot: TriggerSnapshot
    prepare_join: PrepareJoin
    prepare_leave: PrepareLeave
    prepare_replace: PrepareReplace
    prepare_move: PrepareMove
    advance_sequence: AdvanceSequence
    cancel_sequence: CancelSequence
    add_cms_candidate: AddCMSCandidate
    start_add_to_cms: StartAddToCMS
    finish_add_to_cms: FinishAddToCMS
    remove_from_cms: RemoveFromCMS
    grant_reconcile_lease: GrantReconcileLease
    register_reconciler: RegisterReconciler
    def __init__(self, initialize_cms: _Optional[_Union[InitializeCMS, _Mapping]] = ..., create_keyspace: _Optional[_Union[CreateKeyspace, _Mapping]] = ..., alter_keyspace: _Optional[_Union[AlterKeyspace, _Mapping]] = ..., drop_keyspace: _Optional[_Union[DropKeyspace, _Mapping]] = ..., create_table: _Optional[_Union[CreateTable, _Mapping]] = ..., alter_table: _Optional[_Union[AlterTable, _Mapping]] = ..., drop_table: _Optional[_Union[DropTable, _Mapping]] = ..., register: _Optional[_Union[Register, _Mapping]] = ..., unregister: _Optional[_Union[Unregister, _Mapping]] = ..., trigger_snapshot: _Optional[_Union[TriggerSnapshot, _Mapping]] = ..., prepare_join: _Optional[_Union[PrepareJoin, _Mapping]] = ..., prepare_leave: _Optional[_Union[PrepareLeave, _Mapping]] = ..., prepare_replace: _Optional[_Union[PrepareReplace, _Mapping]] = ..., prepare_move: _Optional[_Union[PrepareMove, _Mapping]] = ..., advance_sequence: _Optional[_Union[AdvanceSequence, _Mapping]] = ..., cancel_sequence: _Optional[_Union[CancelSequence, _Mapping]] = ..., add_cms_candidate: _Optional[_Union[AddCMSCandidate, _Mapping]] = ..., start_add_to_cms: _Optional[_Union[StartAddToCMS, _Mapping]] = ..., finish_add_to_cms: _Optional[_Union[FinishAddToCMS, _Mapping]] = ..., remove_from_cms: _Optional[_Union[RemoveFromCMS, _Mapping]] = ..., grant_reconcile_lease: _Optional[_Union[GrantReconcileLease, _Mapping]] = ..., register_reconciler: _Optional[_Union[RegisterReconciler, _Mapping]] = ...) -> None: ...
