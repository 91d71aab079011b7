from epochal.wire.v1 import metadata_pb2 as _metadata_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReconcilerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RangeReport(_message.Message):
    __slots__ = ("keyspace", "range", "owner", "lease_token", "low_bound", "lag_ms", "last_outcome", "last_round_unix_ms", "rounds", "delivered", "log_entries", "unreachable", "cohorts")
    KEYSPACE_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOW_BOUND_FIELD_NUMBER: _ClassVar[int]
    LAG_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LAST_ROUND_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    LOG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_FIELD_NUMBER: _ClassVar[int]
    COHORTS_FIELD_NUMBER: _ClassVar[int]
    keyspace: str
    range: _metadata_pb2.TokenRange
    owner: str
    lease_token: int
    low_bound: int
    lag_ms: int
    last_outcome: str
    last_round_unix_ms: int
    rounds: int
    delivered: int
    log_entries: int
    unreachable: _containers.RepeatedScalarFieldContainer[str]
    cohorts: _containers.RepeatedCompositeFieldContainer[CohortReport]
    def __init__(self, keyspace: _Optional[str] = ..., range: _Optional[_Union[_metadata_pb2.TokenRange, _Mapping]] = ..., owner: _Optional[str] = ..., lease_token: _Optional[int] = ..., low_bound: _Optional[int] = ..., lag_ms: _Optional[int] = ..., last_outcome: _Optional[str] = ..., last_round_unix_ms: _Optional[int] = ..., rounds: _Optional[int] = ..., delivered: _Optional[int] = ..., log_entries: _Optional[int] = ..., unreachable: _Optional[_Iterable[str]] = ..., cohorts: _Optional[_Iterable[_Union[CohortReport, _Mapping]]] = ...) -> None: ...

class CohortReport(_message.Message):
    __slots__ = ("id", "members", "low", "high", "mutations", "bytes", "formed_unix_ms", "holders")
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FORMED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    id: str
    members: _containers.RepeatedScalarFieldContainer[str]
    low: int
    high: int
    mutations: int
    bytes: int
    formed_unix_ms: int
    holders: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., members: _Optional[_Iterable[str]] = ..., low: _Optional[int] = ..., high: _Optional[int] = ..., mutations: _Optional[int] = ..., bytes: _Optional[int] = ..., formed_unix_ms: _Optional[int] = ..., holders: _Optional[_Iterable[str]] = ...) -> None: ...

class ReconcilerStatus(_message.Message):
    __slots__ = ("reconciler_id", "epoch", "ranges")
    RECONCILER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    reconciler_id: str
    epoch: int
    ranges: _containers.RepeatedCompositeFieldContainer[RangeReport]
    def __init__(self, reconciler_id: _Optional[str] = ..., epoch: _Optional[int] = ..., ranges: _Optional[_Iterable[_Union[RangeReport, _Mapping]]] = ...) -> None: ...
