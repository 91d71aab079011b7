from epochal.wire.v1 import metadata_pb2 as _metadata_pb2
from epochal.wire.v1 import paxos_pb2 as _paxos_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CommitRequest(_message.Message):
    __slots__ = ("transformation", "entry_id")
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    transformation: _metadata_pb2.Transformation
    entry_id: str
    def __init__(self, transformation: _Optional[_Union[_metadata_pb2.Transformation, _Mapping]] = ..., entry_id: _Optional[str] = ...) -> None: ...

class CommitResponse(_message.Message):
    __slots__ = ("epoch", "duplicate")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    duplicate: bool
    def __init__(self, epoch: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class LogEntry(_message.Message):
    __slots__ = ("epoch", "transformation", "entry_id", "slot")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    transformation: _metadata_pb2.Transformation
    entry_id: str
    slot: int
    def __init__(self, epoch: _Optional[int] = ..., transformation: _Optional[_Union[_metadata_pb2.Transformation, _Mapping]] = ..., entry_id: _Optional[str] = ..., slot: _Optional[int] = ...) -> None: ...

class EntryIdRecord(_message.Message):
    __slots__ = ("entry_id", "epoch", "digest")
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    entry_id: str
    epoch: int
    digest: int
    def __init__(self, entry_id: _Optional[str] = ..., epoch: _Optional[int] = ..., digest: _Optional[int] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("metadata", "slot", "entry_ids")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    metadata: _metadata_pb2.ClusterMetadata
    slot: int
    entry_ids: _containers.RepeatedCompositeFieldContainer[EntryIdRecord]
    def __init__(self, metadata: _Optional[_Union[_metadata_pb2.ClusterMetadata, _Mapping]] = ..., slot: _Optional[int] = ..., entry_ids: _Optional[_Iterable[_Union[EntryIdRecord, _Mapping]]] = ...) -> None: ...

class FetchLogRequest(_message.Message):
    __slots__ = ("since_epoch", "max_entries", "include_entry_ids", "entries_only")
    SINCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_ONLY_FIELD_NUMBER: _ClassVar[int]
    since_epoch: int
    max_entries: int
    include_entry_ids: bool
    entries_only: bool
    def __init__(self, since_epoch: _Optional[int] = ..., max_entries: _Optional[int] = ..., include_entry_ids: _Optional[bool] = ..., entries_only: _Optional[bool] = ...) -> None: ...

class FetchLogResponse(_message.Message):
    __slots__ = ("snapshot", "entries", "latest_epoch", "applied_slot", "has_more")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LATEST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLIED_SLOT_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    entries: _containers.RepeatedCompositeFieldContainer[LogEntry]
    latest_epoch: int
    applied_slot: int
    has_more: bool
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[LogEntry, _Mapping]]] = ..., latest_epoch: _Optional[int] = ..., applied_slot: _Optional[int] = ..., has_more: _Optional[bool] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("since_epoch",)
    SINCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    since_epoch: int
    def __init__(self, since_epoch: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("snapshot", "entries", "latest_epoch")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LATEST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    entries: _containers.RepeatedCompositeFieldContainer[LogEntry]
    latest_epoch: int
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[LogEntry, _Mapping]]] = ..., latest_epoch: _Optional[int] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MemberInfo(_message.Message):
    __slots__ = ("member_id", "address", "voter", "role")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    address: str
    voter: bool
    role: str
    def __init__(self, member_id: _Optional[str] = ..., address: _Optional[str] = ..., voter: _Optional[bool] = ..., role: _Optional[str] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("member_id", "members", "leader_id", "epoch", "snapshot_epochs", "ballot", "applied_slot", "ready", "snapshots_installed", "log_complete")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    APPLIED_SLOT_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_INSTALLED_FIELD_NUMBER: _ClassVar[int]
    LOG_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[MemberInfo]
    leader_id: str
    epoch: int
    snapshot_epochs: _containers.RepeatedScalarFieldContainer[int]
    ballot: _paxos_pb2.Ballot
    applied_slot: int
    ready: bool
    snapshots_installed: int
    log_complete: bool
    def __init__(self, member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[MemberInfo, _Mapping]]] = ..., leader_id: _Optional[str] = ..., epoch: _Optional[int] = ..., snapshot_epochs: _Optional[_Iterable[int]] = ..., ballot: _Optional[_Union[_paxos_pb2.Ballot, _Mapping]] = ..., applied_slot: _Optional[int] = ..., ready: _Optional[bool] = ..., snapshots_installed: _Optional[int] = ..., log_complete: _Optional[bool] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("messages", "traceparent", "tracestate")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_paxos_pb2.PaxosMessage]
    traceparent: str
    tracestate: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_paxos_pb2.PaxosMessage, _Mapping]]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class TraceContext(_message.Message):
    __slots__ = ("traceparent", "tracestate")
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    traceparent: str
    tracestate: str
    def __init__(self, traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ForwardRequest(_message.Message):
    __slots__ = ("batch_id", "member_id", "items", "traces")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TRACES_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    member_id: str
    items: _containers.RepeatedCompositeFieldContainer[ProposalItem]
    traces: _containers.RepeatedCompositeFieldContainer[TraceContext]
    def __init__(self, batch_id: _Optional[int] = ..., member_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[ProposalItem, _Mapping]]] = ..., traces: _Optional[_Iterable[_Union[TraceContext, _Mapping]]] = ...) -> None: ...

class CommitOutcome(_message.Message):
    __slots__ = ("committed", "error", "batch_size", "index")
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    committed: CommitResponse
    error: CommitError
    batch_size: int
    index: int
    def __init__(self, committed: _Optional[_Union[CommitResponse, _Mapping]] = ..., error: _Optional[_Union[CommitError, _Mapping]] = ..., batch_size: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class CommitError(_message.Message):
    __slots__ = ("code", "message", "rule", "leader_id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    rule: str
    leader_id: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., rule: _Optional[str] = ..., leader_id: _Optional[str] = ...) -> None: ...

class ForwardResponse(_message.Message):
    __slots__ = ("outcomes", "batch_id")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[CommitOutcome]
    batch_id: int
    def __init__(self, outcomes: _Optional[_Iterable[_Union[CommitOutcome, _Mapping]]] = ..., batch_id: _Optional[int] = ...) -> None: ...

class ProposalItem(_message.Message):
    __slots__ = ("transformation", "entry_id", "digest")
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    transformation: bytes
    entry_id: str
    digest: int
    def __init__(self, transformation: _Optional[bytes] = ..., entry_id: _Optional[str] = ..., digest: _Optional[int] = ...) -> None: ...
