from epochal.wire.v1 import cms_pb2 as _cms_pb2
from epochal.wire.v1 import metadata_pb2 as _metadata_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConsistencyLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSISTENCY_LEVEL_UNSPECIFIED: _ClassVar[ConsistencyLevel]
    ONE: _ClassVar[ConsistencyLevel]
    QUORUM: _ClassVar[ConsistencyLevel]
    LOCAL_QUORUM: _ClassVar[ConsistencyLevel]
    ALL: _ClassVar[ConsistencyLevel]

class PeerOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PEER_OUTCOME_UNSPECIFIED: _ClassVar[PeerOutcome]
    OK: _ClassVar[PeerOutcome]
    NOT_A_REPLICA: _ClassVar[PeerOutcome]
    UNKNOWN_TABLE: _ClassVar[PeerOutcome]
    BEHIND: _ClassVar[PeerOutcome]
    OVERLOADED: _ClassVar[PeerOutcome]
    CLOCK_SKEW: _ClassVar[PeerOutcome]
    TOO_LARGE: _ClassVar[PeerOutcome]
    MALFORMED: _ClassVar[PeerOutcome]
    FENCED: _ClassVar[PeerOutcome]
    SUPERSEDED: _ClassVar[PeerOutcome]
    MISMATCH: _ClassVar[PeerOutcome]
    LAPSED: _ClassVar[PeerOutcome]
CONSISTENCY_LEVEL_UNSPECIFIED: ConsistencyLevel
ONE: ConsistencyLevel
QUORUM: ConsistencyLevel
LOCAL_QUORUM: ConsistencyLevel
ALL: ConsistencyLevel
PEER_OUTCOME_UNSPECIFIED: PeerOutcome
OK: PeerOutcome
NOT_A_REPLICA: PeerOutcome
UNKNOWN_TABLE: PeerOutcome
BEHIND: PeerOutcome
OVERLOADED: PeerOutcome
CLOCK_SKEW: PeerOutcome
TOO_LARGE: PeerOutcome
MALFORMED: PeerOutcome
FENCED: PeerOutcome
SUPERSEDED: PeerOutcome
MISMATCH: PeerOutcome
LAPSED: PeerOutcome

class Value(_message.Message):
    __slots__ = ("text", "int", "boolean", "double", "blob", "uuid", "timestamp")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    INT_FIELD_NUMBER: _ClassVar[int]
    BOOLEAN_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    text: str
    int: int
    boolean: bool
    double: float
    blob: bytes
    uuid: bytes
    timestamp: int
    def __init__(self, text: _Optional[str] = ..., int: _Optional[int] = ..., boolean: _Optional[bool] = ..., double: _Optional[float] = ..., blob: _Optional[bytes] = ..., uuid: _Optional[bytes] = ..., timestamp: _Optional[int] = ...) -> None: ...

class MutationId(_message.Message):
    __slots__ = ("node", "log", "sequence", "hlc")
    NODE_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    node: int
    log: int
    sequence: int
    hlc: int
    def __init__(self, node: _Optional[int] = ..., log: _Optional[int] = ..., sequence: _Optional[int] = ..., hlc: _Optional[int] = ...) -> None: ...

class CellWrite(_message.Message):
    __slots__ = ("column", "value")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    column: str
    value: Value
    def __init__(self, column: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class RowWrite(_message.Message):
    __slots__ = ("clustering", "cells", "delete")
    CLUSTERING_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    clustering: _containers.RepeatedCompositeFieldContainer[Value]
    cells: _containers.RepeatedCompositeFieldContainer[CellWrite]
    delete: bool
    def __init__(self, clustering: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., cells: _Optional[_Iterable[_Union[CellWrite, _Mapping]]] = ..., delete: _Optional[bool] = ...) -> None: ...

class Mutation(_message.Message):
    __slots__ = ("keyspace", "table", "partition_key", "rows", "delete_partition")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DELETE_PARTITION_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    table: str
    partition_key: _containers.RepeatedCompositeFieldContainer[Value]
    rows: _containers.RepeatedCompositeFieldContainer[RowWrite]
    delete_partition: bool
    def __init__(self, keyspace: _Optional[str] = ..., table: _Optional[str] = ..., partition_key: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., rows: _Optional[_Iterable[_Union[RowWrite, _Mapping]]] = ..., delete_partition: _Optional[bool] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("mutation", "consistency", "epoch", "session_hlc", "mutation_id")
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SESSION_HLC_FIELD_NUMBER: _ClassVar[int]
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    mutation: Mutation
    consistency: ConsistencyLevel
    epoch: int
    session_hlc: int
    mutation_id: MutationId
    def __init__(self, mutation: _Optional[_Union[Mutation, _Mapping]] = ..., consistency: _Optional[_Union[ConsistencyLevel, str]] = ..., epoch: _Optional[int] = ..., session_hlc: _Optional[int] = ..., mutation_id: _Optional[_Union[MutationId, _Mapping]] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("epoch", "mutation_id", "acknowledged")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    mutation_id: MutationId
    acknowledged: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., mutation_id: _Optional[_Union[MutationId, _Mapping]] = ..., acknowledged: _Optional[_Iterable[str]] = ...) -> None: ...

class ClusteringSlice(_message.Message):
    __slots__ = ("start", "start_exclusive", "end", "end_exclusive", "has_start", "has_end")
    START_FIELD_NUMBER: _ClassVar[int]
    START_EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    END_EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    HAS_START_FIELD_NUMBER: _ClassVar[int]
    HAS_END_FIELD_NUMBER: _ClassVar[int]
    start: _containers.RepeatedCompositeFieldContainer[Value]
    start_exclusive: bool
    end: _containers.RepeatedCompositeFieldContainer[Value]
    end_exclusive: bool
    has_start: bool
    has_end: bool
    def __init__(self, start: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., start_exclusive: _Optional[bool] = ..., end: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., end_exclusive: _Optional[bool] = ..., has_start: _Optional[bool] = ..., has_end: _Optional[bool] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("keyspace", "table", "partition_key", "slice", "columns", "consistency", "epoch", "session_hlc")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    SLICE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SESSION_HLC_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    table: str
    partition_key: _containers.RepeatedCompositeFieldContainer[Value]
    slice: ClusteringSlice
    columns: _containers.RepeatedScalarFieldContainer[str]
    consistency: ConsistencyLevel
    epoch: int
    session_hlc: int
    def __init__(self, keyspace: _Optional[str] = ..., table: _Optional[str] = ..., partition_key: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., slice: _Optional[_Union[ClusteringSlice, _Mapping]] = ..., columns: _Optional[_Iterable[str]] = ..., consistency: _Optional[_Union[ConsistencyLevel, str]] = ..., epoch: _Optional[int] = ..., session_hlc: _Optional[int] = ...) -> None: ...

class CellValue(_message.Message):
    __slots__ = ("column", "value", "hlc")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    column: str
    value: Value
    hlc: int
    def __init__(self, column: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., hlc: _Optional[int] = ...) -> None: ...

class Row(_message.Message):
    __slots__ = ("clustering", "cells")
    CLUSTERING_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    clustering: _containers.RepeatedCompositeFieldContainer[Value]
    cells: _containers.RepeatedCompositeFieldContainer[CellValue]
    def __init__(self, clustering: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., cells: _Optional[_Iterable[_Union[CellValue, _Mapping]]] = ...) -> None: ...

class ReadStats(_message.Message):
    __slots__ = ("replicas", "data_replica", "repaired_mutations", "repaired", "digest_mismatch", "repaired_cells", "summary_rounds", "summaries_agreed", "differing")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DATA_REPLICA_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_FIELD_NUMBER: _ClassVar[int]
    DIGEST_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_CELLS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_AGREED_FIELD_NUMBER: _ClassVar[int]
    DIFFERING_FIELD_NUMBER: _ClassVar[int]
    replicas: _containers.RepeatedScalarFieldContainer[str]
    data_replica: str
    repaired_mutations: int
    repaired: _containers.RepeatedCompositeFieldContainer[MutationId]
    digest_mismatch: bool
    repaired_cells: int
    summary_rounds: int
    summaries_agreed: bool
    differing: _containers.RepeatedCompositeFieldContainer[DifferingLogs]
    def __init__(self, replicas: _Optional[_Iterable[str]] = ..., data_replica: _Optional[str] = ..., repaired_mutations: _Optional[int] = ..., repaired: _Optional[_Iterable[_Union[MutationId, _Mapping]]] = ..., digest_mismatch: _Optional[bool] = ..., repaired_cells: _Optional[int] = ..., summary_rounds: _Optional[int] = ..., summaries_agreed: _Optional[bool] = ..., differing: _Optional[_Iterable[_Union[DifferingLogs, _Mapping]]] = ...) -> None: ...

class DifferingLogs(_message.Message):
    __slots__ = ("replica", "logs")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    LOGS_FIELD_NUMBER: _ClassVar[int]
    replica: str
    logs: _containers.RepeatedCompositeFieldContainer[LogKey]
    def __init__(self, replica: _Optional[str] = ..., logs: _Optional[_Iterable[_Union[LogKey, _Mapping]]] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("epoch", "rows", "stats", "hlc")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    rows: _containers.RepeatedCompositeFieldContainer[Row]
    stats: ReadStats
    hlc: int
    def __init__(self, epoch: _Optional[int] = ..., rows: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., stats: _Optional[_Union[ReadStats, _Mapping]] = ..., hlc: _Optional[int] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("id", "write", "read", "traceparent", "tracestate")
    ID_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    id: int
    write: WriteRequest
    read: ReadRequest
    traceparent: str
    tracestate: str
    def __init__(self, id: _Optional[int] = ..., write: _Optional[_Union[WriteRequest, _Mapping]] = ..., read: _Optional[_Union[ReadRequest, _Mapping]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class SessionRequests(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[SessionRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[SessionRequest, _Mapping]]] = ...) -> None: ...

class SessionFailure(_message.Message):
    __slots__ = ("code", "message", "rule", "epoch", "mutation_id", "replicas")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    rule: str
    epoch: int
    mutation_id: MutationId
    replicas: ReplicaOutcome
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., rule: _Optional[str] = ..., epoch: _Optional[int] = ..., mutation_id: _Optional[_Union[MutationId, _Mapping]] = ..., replicas: _Optional[_Union[ReplicaOutcome, _Mapping]] = ...) -> None: ...

class ReplicaOutcome(_message.Message):
    __slots__ = ("consistency", "required", "replicas", "acknowledged", "refused", "not_answering")
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    NOT_ANSWERING_FIELD_NUMBER: _ClassVar[int]
    consistency: str
    required: int
    replicas: _containers.RepeatedScalarFieldContainer[str]
    acknowledged: _containers.RepeatedScalarFieldContainer[str]
    refused: _containers.RepeatedCompositeFieldContainer[NodeReason]
    not_answering: _containers.RepeatedCompositeFieldContainer[NodeReason]
    def __init__(self, consistency: _Optional[str] = ..., required: _Optional[int] = ..., replicas: _Optional[_Iterable[str]] = ..., acknowledged: _Optional[_Iterable[str]] = ..., refused: _Optional[_Iterable[_Union[NodeReason, _Mapping]]] = ..., not_answering: _Optional[_Iterable[_Union[NodeReason, _Mapping]]] = ...) -> None: ...

class NodeReason(_message.Message):
    __slots__ = ("node", "reason")
    NODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node: str
    reason: str
    def __init__(self, node: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SessionReply(_message.Message):
    __slots__ = ("id", "write", "read", "failure")
    ID_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    id: int
    write: WriteResponse
    read: ReadResponse
    failure: SessionFailure
    def __init__(self, id: _Optional[int] = ..., write: _Optional[_Union[WriteResponse, _Mapping]] = ..., read: _Optional[_Union[ReadResponse, _Mapping]] = ..., failure: _Optional[_Union[SessionFailure, _Mapping]] = ...) -> None: ...

class SessionReplies(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[SessionReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[SessionReply, _Mapping]]] = ...) -> None: ...

class ReplicaDescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplicaDescribeResponse(_message.Message):
    __slots__ = ("node_id", "address", "datacenter", "rack", "epoch", "ready", "state", "hlc", "metrics", "cms_addresses", "load_bytes")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATACENTER_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    CMS_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    LOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    datacenter: str
    rack: str
    epoch: int
    ready: bool
    state: str
    hlc: int
    metrics: _containers.ScalarMap[str, float]
    cms_addresses: _containers.RepeatedScalarFieldContainer[str]
    load_bytes: int
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., datacenter: _Optional[str] = ..., rack: _Optional[str] = ..., epoch: _Optional[int] = ..., ready: _Optional[bool] = ..., state: _Optional[str] = ..., hlc: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ..., cms_addresses: _Optional[_Iterable[str]] = ..., load_bytes: _Optional[int] = ...) -> None: ...

class AppliedEpochsRequest(_message.Message):
    __slots__ = ("since_epoch",)
    SINCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    since_epoch: int
    def __init__(self, since_epoch: _Optional[int] = ...) -> None: ...

class AppliedEpoch(_message.Message):
    __slots__ = ("epoch", "applied_unix_ns")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLIED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    applied_unix_ns: int
    def __init__(self, epoch: _Optional[int] = ..., applied_unix_ns: _Optional[int] = ...) -> None: ...

class AppliedEpochsResponse(_message.Message):
    __slots__ = ("epochs",)
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    epochs: _containers.RepeatedCompositeFieldContainer[AppliedEpoch]
    def __init__(self, epochs: _Optional[_Iterable[_Union[AppliedEpoch, _Mapping]]] = ...) -> None: ...

class StoredCell(_message.Message):
    __slots__ = ("column", "value", "tombstone")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    column: str
    value: bytes
    tombstone: bool
    def __init__(self, column: _Optional[str] = ..., value: _Optional[bytes] = ..., tombstone: _Optional[bool] = ...) -> None: ...

class StoredRow(_message.Message):
    __slots__ = ("clustering", "cells", "deleted")
    CLUSTERING_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    clustering: bytes
    cells: _containers.RepeatedCompositeFieldContainer[StoredCell]
    deleted: bool
    def __init__(self, clustering: _Optional[bytes] = ..., cells: _Optional[_Iterable[_Union[StoredCell, _Mapping]]] = ..., deleted: _Optional[bool] = ...) -> None: ...

class StoredMutation(_message.Message):
    __slots__ = ("id", "keyspace", "table_id", "token", "partition_key", "rows", "partition_deleted", "tracked", "timestamp")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_DELETED_FIELD_NUMBER: _ClassVar[int]
    TRACKED_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    id: MutationId
    keyspace: str
    table_id: str
    token: int
    partition_key: bytes
    rows: _containers.RepeatedCompositeFieldContainer[StoredRow]
    partition_deleted: bool
    tracked: bool
    timestamp: int
    def __init__(self, id: _Optional[_Union[MutationId, _Mapping]] = ..., keyspace: _Optional[str] = ..., table_id: _Optional[str] = ..., token: _Optional[int] = ..., partition_key: _Optional[bytes] = ..., rows: _Optional[_Iterable[_Union[StoredRow, _Mapping]]] = ..., partition_deleted: _Optional[bool] = ..., tracked: _Optional[bool] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ApplyRequest(_message.Message):
    __slots__ = ("epoch", "mutation", "repair", "cell_repair")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    REPAIR_FIELD_NUMBER: _ClassVar[int]
    CELL_REPAIR_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    mutation: StoredMutation
    repair: bool
    cell_repair: CellRepair
    def __init__(self, epoch: _Optional[int] = ..., mutation: _Optional[_Union[StoredMutation, _Mapping]] = ..., repair: _Optional[bool] = ..., cell_repair: _Optional[_Union[CellRepair, _Mapping]] = ...) -> None: ...

class CellRepair(_message.Message):
    __slots__ = ("keyspace", "table_id", "token", "partition_key", "cells")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    table_id: str
    token: int
    partition_key: bytes
    cells: _containers.RepeatedCompositeFieldContainer[RawCell]
    def __init__(self, keyspace: _Optional[str] = ..., table_id: _Optional[str] = ..., token: _Optional[int] = ..., partition_key: _Optional[bytes] = ..., cells: _Optional[_Iterable[_Union[RawCell, _Mapping]]] = ...) -> None: ...

class ApplyResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "fence")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    fence: int
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., fence: _Optional[int] = ...) -> None: ...

class KeyBounds(_message.Message):
    __slots__ = ("lower", "upper", "has_upper")
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    HAS_UPPER_FIELD_NUMBER: _ClassVar[int]
    lower: bytes
    upper: bytes
    has_upper: bool
    def __init__(self, lower: _Optional[bytes] = ..., upper: _Optional[bytes] = ..., has_upper: _Optional[bool] = ...) -> None: ...

class RawCell(_message.Message):
    __slots__ = ("clustering", "column", "value", "hlc", "mutation_key", "tombstone")
    CLUSTERING_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    MUTATION_KEY_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    clustering: bytes
    column: str
    value: bytes
    hlc: int
    mutation_key: bytes
    tombstone: bool
    def __init__(self, clustering: _Optional[bytes] = ..., column: _Optional[str] = ..., value: _Optional[bytes] = ..., hlc: _Optional[int] = ..., mutation_key: _Optional[bytes] = ..., tombstone: _Optional[bool] = ...) -> None: ...

class LocalReadRequest(_message.Message):
    __slots__ = ("epoch", "keyspace", "table_id", "token", "partition_key", "bounds", "data", "summary", "digest", "sketch_logs", "sketch_cells", "low_bound")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SKETCH_LOGS_FIELD_NUMBER: _ClassVar[int]
    SKETCH_CELLS_FIELD_NUMBER: _ClassVar[int]
    LOW_BOUND_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    keyspace: str
    table_id: str
    token: int
    partition_key: bytes
    bounds: KeyBounds
    data: bool
    summary: bool
    digest: bool
    sketch_logs: _containers.RepeatedCompositeFieldContainer[LogKey]
    sketch_cells: int
    low_bound: int
    def __init__(self, epoch: _Optional[int] = ..., keyspace: _Optional[str] = ..., table_id: _Optional[str] = ..., token: _Optional[int] = ..., partition_key: _Optional[bytes] = ..., bounds: _Optional[_Union[KeyBounds, _Mapping]] = ..., data: _Optional[bool] = ..., summary: _Optional[bool] = ..., digest: _Optional[bool] = ..., sketch_logs: _Optional[_Iterable[_Union[LogKey, _Mapping]]] = ..., sketch_cells: _Optional[int] = ..., low_bound: _Optional[int] = ...) -> None: ...

class LocalReadResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "cells", "summary", "digest", "sketch", "cohorts")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SKETCH_FIELD_NUMBER: _ClassVar[int]
    COHORTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    cells: _containers.RepeatedCompositeFieldContainer[RawCell]
    summary: bytes
    digest: bytes
    sketch: bytes
    cohorts: _containers.RepeatedCompositeFieldContainer[CohortMark]
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., cells: _Optional[_Iterable[_Union[RawCell, _Mapping]]] = ..., summary: _Optional[bytes] = ..., digest: _Optional[bytes] = ..., sketch: _Optional[bytes] = ..., cohorts: _Optional[_Iterable[_Union[CohortMark, _Mapping]]] = ...) -> None: ...

class LogKey(_message.Message):
    __slots__ = ("node", "log")
    NODE_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    node: int
    log: int
    def __init__(self, node: _Optional[int] = ..., log: _Optional[int] = ...) -> None: ...

class FetchMutationsRequest(_message.Message):
    __slots__ = ("epoch", "ids", "keyspace", "token")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    ids: _containers.RepeatedCompositeFieldContainer[MutationId]
    keyspace: str
    token: int
    def __init__(self, epoch: _Optional[int] = ..., ids: _Optional[_Iterable[_Union[MutationId, _Mapping]]] = ..., keyspace: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class FetchMutationsResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "mutations", "examined", "held")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    mutations: _containers.RepeatedCompositeFieldContainer[StoredMutation]
    examined: int
    held: _containers.RepeatedCompositeFieldContainer[MutationId]
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., mutations: _Optional[_Iterable[_Union[StoredMutation, _Mapping]]] = ..., examined: _Optional[int] = ..., held: _Optional[_Iterable[_Union[MutationId, _Mapping]]] = ...) -> None: ...

class PeerRequest(_message.Message):
    __slots__ = ("id", "apply", "read", "fetch", "deliver", "traceparent", "tracestate")
    ID_FIELD_NUMBER: _ClassVar[int]
    APPLY_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    DELIVER_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    id: int
    apply: ApplyRequest
    read: LocalReadRequest
    fetch: FetchMutationsRequest
    deliver: DeliverMutationsRequest
    traceparent: str
    tracestate: str
    def __init__(self, id: _Optional[int] = ..., apply: _Optional[_Union[ApplyRequest, _Mapping]] = ..., read: _Optional[_Union[LocalReadRequest, _Mapping]] = ..., fetch: _Optional[_Union[FetchMutationsRequest, _Mapping]] = ..., deliver: _Optional[_Union[DeliverMutationsRequest, _Mapping]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class PeerRequests(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[PeerRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[PeerRequest, _Mapping]]] = ...) -> None: ...

class PeerReply(_message.Message):
    __slots__ = ("id", "apply", "read", "fetch", "malformed", "deliver")
    ID_FIELD_NUMBER: _ClassVar[int]
    APPLY_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_FIELD_NUMBER: _ClassVar[int]
    DELIVER_FIELD_NUMBER: _ClassVar[int]
    id: int
    apply: ApplyResponse
    read: LocalReadResponse
    fetch: FetchMutationsResponse
    malformed: str
    deliver: DeliverMutationsResponse
    def __init__(self, id: _Optional[int] = ..., apply: _Optional[_Union[ApplyResponse, _Mapping]] = ..., read: _Optional[_Union[LocalReadResponse, _Mapping]] = ..., fetch: _Optional[_Union[FetchMutationsResponse, _Mapping]] = ..., malformed: _Optional[str] = ..., deliver: _Optional[_Union[DeliverMutationsResponse, _Mapping]] = ...) -> None: ...

class DeliverMutationsRequest(_message.Message):
    __slots__ = ("epoch", "mutations")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    mutations: _containers.RepeatedCompositeFieldContainer[StoredMutation]
    def __init__(self, epoch: _Optional[int] = ..., mutations: _Optional[_Iterable[_Union[StoredMutation, _Mapping]]] = ...) -> None: ...

class DeliverMutationsResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "stored")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    stored: int
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., stored: _Optional[int] = ...) -> None: ...

class PeerReplies(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[PeerReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[PeerReply, _Mapping]]] = ...) -> None: ...

class AwaitEpochRequest(_message.Message):
    __slots__ = ("epoch", "timeout_ms")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    timeout_ms: int
    def __init__(self, epoch: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AwaitEpochResponse(_message.Message):
    __slots__ = ("epoch", "node_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    node_id: str
    def __init__(self, epoch: _Optional[int] = ..., node_id: _Optional[str] = ...) -> None: ...

class StreamCursor(_message.Message):
    __slots__ = ("phase", "started", "token", "partition_key", "clustering", "column", "hlc", "mutation_id")
    class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CELLS: _ClassVar[StreamCursor.Phase]
        MUTATIONS: _ClassVar[StreamCursor.Phase]
        DONE: _ClassVar[StreamCursor.Phase]
    CELLS: StreamCursor.Phase
    MUTATIONS: StreamCursor.Phase
    DONE: StreamCursor.Phase
    PHASE_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    CLUSTERING_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    phase: StreamCursor.Phase
    started: bool
    token: int
    partition_key: bytes
    clustering: bytes
    column: str
    hlc: int
    mutation_id: MutationId
    def __init__(self, phase: _Optional[_Union[StreamCursor.Phase, str]] = ..., started: _Optional[bool] = ..., token: _Optional[int] = ..., partition_key: _Optional[bytes] = ..., clustering: _Optional[bytes] = ..., column: _Optional[str] = ..., hlc: _Optional[int] = ..., mutation_id: _Optional[_Union[MutationId, _Mapping]] = ...) -> None: ...

class StreamRangeRequest(_message.Message):
    __slots__ = ("epoch", "receiver", "prepared_epoch", "keyspace", "table_id", "left", "right", "after", "max_message_bytes", "sequence_node", "log_mode")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    PREPARED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NODE_FIELD_NUMBER: _ClassVar[int]
    LOG_MODE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    receiver: str
    prepared_epoch: int
    keyspace: str
    table_id: str
    left: int
    right: int
    after: StreamCursor
    max_message_bytes: int
    sequence_node: str
    log_mode: str
    def __init__(self, epoch: _Optional[int] = ..., receiver: _Optional[str] = ..., prepared_epoch: _Optional[int] = ..., keyspace: _Optional[str] = ..., table_id: _Optional[str] = ..., left: _Optional[int] = ..., right: _Optional[int] = ..., after: _Optional[_Union[StreamCursor, _Mapping]] = ..., max_message_bytes: _Optional[int] = ..., sequence_node: _Optional[str] = ..., log_mode: _Optional[str] = ...) -> None: ...

class PullRangesRequest(_message.Message):
    __slots__ = ("epoch", "sequence_node", "prepared_epoch")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NODE_FIELD_NUMBER: _ClassVar[int]
    PREPARED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    sequence_node: str
    prepared_epoch: int
    def __init__(self, epoch: _Optional[int] = ..., sequence_node: _Optional[str] = ..., prepared_epoch: _Optional[int] = ...) -> None: ...

class PullRangesResponse(_message.Message):
    __slots__ = ("node_id", "streamed_bytes", "streamed_cells", "streamed_mutations", "ranges_done", "ranges_total", "reconciled_mutations")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STREAMED_BYTES_FIELD_NUMBER: _ClassVar[int]
    STREAMED_CELLS_FIELD_NUMBER: _ClassVar[int]
    STREAMED_MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    RANGES_DONE_FIELD_NUMBER: _ClassVar[int]
    RANGES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RECONCILED_MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    streamed_bytes: int
    streamed_cells: int
    streamed_mutations: int
    ranges_done: int
    ranges_total: int
    reconciled_mutations: int
    def __init__(self, node_id: _Optional[str] = ..., streamed_bytes: _Optional[int] = ..., streamed_cells: _Optional[int] = ..., streamed_mutations: _Optional[int] = ..., ranges_done: _Optional[int] = ..., ranges_total: _Optional[int] = ..., reconciled_mutations: _Optional[int] = ...) -> None: ...

class StreamedCell(_message.Message):
    __slots__ = ("token", "partition_key", "cell")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    CELL_FIELD_NUMBER: _ClassVar[int]
    token: int
    partition_key: bytes
    cell: RawCell
    def __init__(self, token: _Optional[int] = ..., partition_key: _Optional[bytes] = ..., cell: _Optional[_Union[RawCell, _Mapping]] = ...) -> None: ...

class StreamChunk(_message.Message):
    __slots__ = ("epoch", "cells", "mutations", "cursor", "ids")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    cells: _containers.RepeatedCompositeFieldContainer[StreamedCell]
    mutations: _containers.RepeatedScalarFieldContainer[bytes]
    cursor: StreamCursor
    ids: _containers.RepeatedCompositeFieldContainer[StreamedId]
    def __init__(self, epoch: _Optional[int] = ..., cells: _Optional[_Iterable[_Union[StreamedCell, _Mapping]]] = ..., mutations: _Optional[_Iterable[bytes]] = ..., cursor: _Optional[_Union[StreamCursor, _Mapping]] = ..., ids: _Optional[_Iterable[_Union[StreamedId, _Mapping]]] = ...) -> None: ...

class StreamedId(_message.Message):
    __slots__ = ("id", "token", "partition_key", "whole")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    WHOLE_FIELD_NUMBER: _ClassVar[int]
    id: MutationId
    token: int
    partition_key: bytes
    whole: bool
    def __init__(self, id: _Optional[_Union[MutationId, _Mapping]] = ..., token: _Optional[int] = ..., partition_key: _Optional[bytes] = ..., whole: _Optional[bool] = ...) -> None: ...

class BootstrapRequest(_message.Message):
    __slots__ = ("tokens", "num_tokens")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedScalarFieldContainer[int]
    num_tokens: int
    def __init__(self, tokens: _Optional[_Iterable[int]] = ..., num_tokens: _Optional[int] = ...) -> None: ...

class OperationRequest(_message.Message):
    __slots__ = ("node_id", "epoch")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    epoch: int
    def __init__(self, node_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ReplaceRequest(_message.Message):
    __slots__ = ("replaced",)
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    replaced: str
    def __init__(self, replaced: _Optional[str] = ...) -> None: ...

class MoveRequest(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class CleanupResponse(_message.Message):
    __slots__ = ("epoch", "removed")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    removed: int
    def __init__(self, epoch: _Optional[int] = ..., removed: _Optional[int] = ...) -> None: ...

class OperationStatus(_message.Message):
    __slots__ = ("node_id", "epoch", "kind", "step", "state", "message", "prepared_epoch", "streamed_bytes", "streamed_cells", "streamed_mutations", "ranges_done", "ranges_total", "eta_s", "barrier_level", "reconciled_mutations")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PREPARED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STREAMED_BYTES_FIELD_NUMBER: _ClassVar[int]
    STREAMED_CELLS_FIELD_NUMBER: _ClassVar[int]
    STREAMED_MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    RANGES_DONE_FIELD_NUMBER: _ClassVar[int]
    RANGES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ETA_S_FIELD_NUMBER: _ClassVar[int]
    BARRIER_LEVEL_FIELD_NUMBER: _ClassVar[int]
    RECONCILED_MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    epoch: int
    kind: str
    step: str
    state: str
    message: str
    prepared_epoch: int
    streamed_bytes: int
    streamed_cells: int
    streamed_mutations: int
    ranges_done: int
    ranges_total: int
    eta_s: float
    barrier_level: str
    reconciled_mutations: int
    def __init__(self, node_id: _Optional[str] = ..., epoch: _Optional[int] = ..., kind: _Optional[str] = ..., step: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., prepared_epoch: _Optional[int] = ..., streamed_bytes: _Optional[int] = ..., streamed_cells: _Optional[int] = ..., streamed_mutations: _Optional[int] = ..., ranges_done: _Optional[int] = ..., ranges_total: _Optional[int] = ..., eta_s: _Optional[float] = ..., barrier_level: _Optional[str] = ..., reconciled_mutations: _Optional[int] = ...) -> None: ...

class TestHooks(_message.Message):
    __slots__ = ("hold_metadata_pushes", "skip_plan_recheck", "stream_delay_ms", "drop_write_share", "isolated", "id_clock_behind_ms", "cut_off_from")
    HOLD_METADATA_PUSHES_FIELD_NUMBER: _ClassVar[int]
    SKIP_PLAN_RECHECK_FIELD_NUMBER: _ClassVar[int]
    STREAM_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    DROP_WRITE_SHARE_FIELD_NUMBER: _ClassVar[int]
    ISOLATED_FIELD_NUMBER: _ClassVar[int]
    ID_CLOCK_BEHIND_MS_FIELD_NUMBER: _ClassVar[int]
    CUT_OFF_FROM_FIELD_NUMBER: _ClassVar[int]
    hold_metadata_pushes: bool
    skip_plan_recheck: bool
    stream_delay_ms: int
    drop_write_share: float
    isolated: bool
    id_clock_behind_ms: int
    cut_off_from: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hold_metadata_pushes: _Optional[bool] = ..., skip_plan_recheck: _Optional[bool] = ..., stream_delay_ms: _Optional[int] = ..., drop_write_share: _Optional[float] = ..., isolated: _Optional[bool] = ..., id_clock_behind_ms: _Optional[int] = ..., cut_off_from: _Optional[_Iterable[str]] = ...) -> None: ...

class ReconcileRange(_message.Message):
    __slots__ = ("epoch", "keyspace", "range", "lease_token", "replicas")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    keyspace: str
    range: _metadata_pb2.TokenRange
    lease_token: int
    replicas: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., keyspace: _Optional[str] = ..., range: _Optional[_Union[_metadata_pb2.TokenRange, _Mapping]] = ..., lease_token: _Optional[int] = ..., replicas: _Optional[_Iterable[str]] = ...) -> None: ...

class RangeMark(_message.Message):
    __slots__ = ("range", "hlc")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    range: _metadata_pb2.TokenRange
    hlc: int
    def __init__(self, range: _Optional[_Union[_metadata_pb2.TokenRange, _Mapping]] = ..., hlc: _Optional[int] = ...) -> None: ...

class RangeStateRequest(_message.Message):
    __slots__ = ("range", "claim", "lease_ms", "sizes", "window_ids", "window_from")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    SIZES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_IDS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FROM_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    claim: bool
    lease_ms: int
    sizes: bool
    window_ids: int
    window_from: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., claim: _Optional[bool] = ..., lease_ms: _Optional[int] = ..., sizes: _Optional[bool] = ..., window_ids: _Optional[int] = ..., window_from: _Optional[_Iterable[int]] = ...) -> None: ...

class RangeStateResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "hlc", "fence", "low_bounds", "lease_token", "lease_idle_ms", "log_entries", "log_bytes", "window_ends", "cohorts", "unreachable_peers")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    LOW_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_IDLE_MS_FIELD_NUMBER: _ClassVar[int]
    LOG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ENDS_FIELD_NUMBER: _ClassVar[int]
    COHORTS_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_PEERS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    hlc: int
    fence: int
    low_bounds: _containers.RepeatedCompositeFieldContainer[RangeMark]
    lease_token: int
    lease_idle_ms: float
    log_entries: int
    log_bytes: int
    window_ends: _containers.RepeatedScalarFieldContainer[int]
    cohorts: _containers.RepeatedCompositeFieldContainer[Cohort]
    unreachable_peers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., hlc: _Optional[int] = ..., fence: _Optional[int] = ..., low_bounds: _Optional[_Iterable[_Union[RangeMark, _Mapping]]] = ..., lease_token: _Optional[int] = ..., lease_idle_ms: _Optional[float] = ..., log_entries: _Optional[int] = ..., log_bytes: _Optional[int] = ..., window_ends: _Optional[_Iterable[int]] = ..., cohorts: _Optional[_Iterable[_Union[Cohort, _Mapping]]] = ..., unreachable_peers: _Optional[_Iterable[str]] = ...) -> None: ...

class Cohort(_message.Message):
    __slots__ = ("id", "range", "members", "low", "high", "mutations", "bytes", "formed_unix_ms", "folded_high")
    ID_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FORMED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_HIGH_FIELD_NUMBER: _ClassVar[int]
    id: int
    range: _metadata_pb2.TokenRange
    members: _containers.RepeatedScalarFieldContainer[str]
    low: int
    high: int
    mutations: int
    bytes: int
    formed_unix_ms: int
    folded_high: int
    def __init__(self, id: _Optional[int] = ..., range: _Optional[_Union[_metadata_pb2.TokenRange, _Mapping]] = ..., members: _Optional[_Iterable[str]] = ..., low: _Optional[int] = ..., high: _Optional[int] = ..., mutations: _Optional[int] = ..., bytes: _Optional[int] = ..., formed_unix_ms: _Optional[int] = ..., folded_high: _Optional[int] = ...) -> None: ...

class CohortMark(_message.Message):
    __slots__ = ("id", "high")
    ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    id: int
    high: int
    def __init__(self, id: _Optional[int] = ..., high: _Optional[int] = ...) -> None: ...

class RangeSummaryRequest(_message.Message):
    __slots__ = ("range", "low_bounds", "below", "sketch_logs", "sketch_cells")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    LOW_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    BELOW_FIELD_NUMBER: _ClassVar[int]
    SKETCH_LOGS_FIELD_NUMBER: _ClassVar[int]
    SKETCH_CELLS_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    low_bounds: _containers.RepeatedCompositeFieldContainer[RangeMark]
    below: int
    sketch_logs: _containers.RepeatedCompositeFieldContainer[LogKey]
    sketch_cells: int
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., low_bounds: _Optional[_Iterable[_Union[RangeMark, _Mapping]]] = ..., below: _Optional[int] = ..., sketch_logs: _Optional[_Iterable[_Union[LogKey, _Mapping]]] = ..., sketch_cells: _Optional[int] = ...) -> None: ...

class RangeSummaryResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "summary", "sketch")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SKETCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    summary: bytes
    sketch: bytes
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., summary: _Optional[bytes] = ..., sketch: _Optional[bytes] = ...) -> None: ...

class DeliverRequest(_message.Message):
    __slots__ = ("range", "target", "ids")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    target: str
    ids: _containers.RepeatedCompositeFieldContainer[MutationId]
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., target: _Optional[str] = ..., ids: _Optional[_Iterable[_Union[MutationId, _Mapping]]] = ...) -> None: ...

class DeliverResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "delivered", "bytes", "absent")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    ABSENT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    delivered: int
    bytes: int
    absent: int
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., delivered: _Optional[int] = ..., bytes: _Optional[int] = ..., absent: _Optional[int] = ...) -> None: ...

class FenceRequest(_message.Message):
    __slots__ = ("range", "hlc")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    HLC_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    hlc: int
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., hlc: _Optional[int] = ...) -> None: ...

class AdvanceLowBoundRequest(_message.Message):
    __slots__ = ("range", "old_bounds", "new_bound", "digests", "cohorts")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    OLD_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    NEW_BOUND_FIELD_NUMBER: _ClassVar[int]
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    COHORTS_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    old_bounds: _containers.RepeatedCompositeFieldContainer[RangeMark]
    new_bound: int
    digests: bytes
    cohorts: _containers.RepeatedCompositeFieldContainer[CohortMark]
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., old_bounds: _Optional[_Iterable[_Union[RangeMark, _Mapping]]] = ..., new_bound: _Optional[int] = ..., digests: _Optional[bytes] = ..., cohorts: _Optional[_Iterable[_Union[CohortMark, _Mapping]]] = ...) -> None: ...

class FoldCohortRequest(_message.Message):
    __slots__ = ("range", "old_bounds", "new_bound", "digests", "cohort")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    OLD_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    NEW_BOUND_FIELD_NUMBER: _ClassVar[int]
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    old_bounds: _containers.RepeatedCompositeFieldContainer[RangeMark]
    new_bound: int
    digests: bytes
    cohort: Cohort
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., old_bounds: _Optional[_Iterable[_Union[RangeMark, _Mapping]]] = ..., new_bound: _Optional[int] = ..., digests: _Optional[bytes] = ..., cohort: _Optional[_Union[Cohort, _Mapping]] = ...) -> None: ...

class DeliverCohortRequest(_message.Message):
    __slots__ = ("range", "cohort", "target")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    cohort: Cohort
    target: str
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., cohort: _Optional[_Union[Cohort, _Mapping]] = ..., target: _Optional[str] = ...) -> None: ...

class DeliverCohortResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "cells", "bytes", "partitions")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    cells: int
    bytes: int
    partitions: int
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., cells: _Optional[int] = ..., bytes: _Optional[int] = ..., partitions: _Optional[int] = ...) -> None: ...

class HoldCohortRequest(_message.Message):
    __slots__ = ("range", "cohort")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    range: ReconcileRange
    cohort: Cohort
    def __init__(self, range: _Optional[_Union[ReconcileRange, _Mapping]] = ..., cohort: _Optional[_Union[Cohort, _Mapping]] = ...) -> None: ...

class MarkResponse(_message.Message):
    __slots__ = ("epoch", "outcome", "message", "fence", "collected")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    COLLECTED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    outcome: PeerOutcome
    message: str
    fence: int
    collected: int
    def __init__(self, epoch: _Optional[int] = ..., outcome: _Optional[_Union[PeerOutcome, str]] = ..., message: _Optional[str] = ..., fence: _Optional[int] = ..., collected: _Optional[int] = ...) -> None: ...
