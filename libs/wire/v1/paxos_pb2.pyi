from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Ballot(_message.Message):
    __slots__ = ("round", "node_id")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    round: int
    node_id: str
    def __init__(self, round: _Optional[int] = ..., node_id: _Optional[str] = ...) -> None: ...

class SlotValue(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, values: _Optional[_Iterable[bytes]] = ...) -> None: ...

class AcceptedSlot(_message.Message):
    __slots__ = ("slot", "ballot", "value")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    slot: int
    ballot: Ballot
    value: SlotValue
    def __init__(self, slot: _Optional[int] = ..., ballot: _Optional[_Union[Ballot, _Mapping]] = ..., value: _Optional[_Union[SlotValue, _Mapping]] = ...) -> None: ...

class ChosenSlot(_message.Message):
    __slots__ = ("slot", "value")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    slot: int
    value: SlotValue
    def __init__(self, slot: _Optional[int] = ..., value: _Optional[_Union[SlotValue, _Mapping]] = ...) -> None: ...

class Prepare(_message.Message):
    __slots__ = ("ballot", "from_slot")
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    FROM_SLOT_FIELD_NUMBER: _ClassVar[int]
    ballot: Ballot
    from_slot: int
    def __init__(self, ballot: _Optional[_Union[Ballot, _Mapping]] = ..., from_slot: _Optional[int] = ...) -> None: ...

class Promise(_message.Message):
    __slots__ = ("ballot", "accepted", "chosen_up_to")
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_UP_TO_FIELD_NUMBER: _ClassVar[int]
    ballot: Ballot
    accepted: _containers.RepeatedCompositeFieldContainer[AcceptedSlot]
    chosen_up_to: int
    def __init__(self, ballot: _Optional[_Union[Ballot, _Mapping]] = ..., accepted: _Optional[_Iterable[_Union[AcceptedSlot, _Mapping]]] = ..., chosen_up_to: _Optional[int] = ...) -> None: ...

class Nack(_message.Message):
    __slots__ = ("ballot", "promised")
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    PROMISED_FIELD_NUMBER: _ClassVar[int]
    ballot: Ballot
    promised: Ballot
    def __init__(self, ballot: _Optional[_Union[Ballot, _Mapping]] = ..., promised: _Optional[_Union[Ballot, _Mapping]] = ...) -> None: ...

class Accept(_message.Message):
    __slots__ = ("ballot", "slot", "value", "chosen_up_to", "learners")
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_UP_TO_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    ballot: Ballot
    slot: int
    value: SlotValue
    chosen_up_to: int
    learners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ballot: _Optional[_Union[Ballot, _Mapping]] = ..., slot: _Optional[int] = ..., value: _Optional[_Union[SlotValue, _Mapping]] = ..., chosen_up_to: _Optional[int] = ..., learners: _Optional[_Iterable[str]] = ...) -> None: ...

class Accepted(_message.Message):
    __slots__ = ("ballot", "slot")
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    ballot: Ballot
    slot: int
    def __init__(self, ballot: _Optional[_Union[Ballot, _Mapping]] = ..., slot: _Optional[int] = ...) -> None: ...

class Commit(_message.Message):
    __slots__ = ("ballot", "chosen_up_to")
    BALLOT_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_UP_TO_FIELD_NUMBER: _ClassVar[int]
    ballot: Ballot
    chosen_up_to: int
    def __init__(self, ballot: _Optional[_Union[Ballot, _Mapping]] = ..., chosen_up_to: _Optional[int] = ...) -> None: ...

class CatchUpRequest(_message.Message):
    __slots__ = ("from_slot",)
    FROM_SLOT_FIELD_NUMBER: _ClassVar[int]
    from_slot: int
    def __init__(self, from_slot: _Optional[int] = ...) -> None: ...

class CatchUpReply(_message.Message):
    __slots__ = ("chosen", "chosen_up_to", "compacted_up_to")
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_UP_TO_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_UP_TO_FIELD_NUMBER: _ClassVar[int]
    chosen: _containers.RepeatedCompositeFieldContainer[ChosenSlot]
    chosen_up_to: int
    compacted_up_to: int
    def __init__(self, chosen: _Optional[_Iterable[_Union[ChosenSlot, _Mapping]]] = ..., chosen_up_to: _Optional[int] = ..., compacted_up_to: _Optional[int] = ...) -> None: ...

class PaxosMessage(_message.Message):
    __slots__ = ("src", "dst", "prepare", "promise", "nack", "accept", "accepted", "commit", "catch_up_request", "catch_up_reply")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    PREPARE_FIELD_NUMBER: _ClassVar[int]
    PROMISE_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_REPLY_FIELD_NUMBER: _ClassVar[int]
    src: str
    dst: str
    prepare: Prepare
    promise: Promise
    nack: Nack
    accept: Accept
    accepted: Accepted
    commit: Commit
    catch_up_request: CatchUpRequest
    catch_up_reply: CatchUpReply
    def __init__(self, src: _Optional[str] = ..., dst: _Optional[str] = ..., prepare: _Optional[_Union[Prepare, _Mapping]] = ..., promise: _Optional[_Union[Promise, _Mapping]] = ..., nack: _Optional[_Union[Nack, _Mapping]] = ..., accept: _Optional[_Union[Accept, _Mapping]] = ..., accepted: _Optional[_Union[Accepted, _Mapping]] = ..., commit: _Optional[_Union[Commit, _Mapping]] = ..., catch_up_request: _Optional[_Union[CatchUpRequest, _Mapping]] = ..., catch_up_reply: _Optional[_Union[CatchUpReply, _Mapping]] = ...) -> None: ...
