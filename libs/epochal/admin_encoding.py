"""The replica's admin calls <-> the wire: ``epochal.admin``'s requests and answers as the
messages of ``ReplicaAdmin``, ``Replica.Describe`` and ``ReplicaTesting.SetHooks`` (with
``epochal.encoding``, ``epochal.sessions`` and ``epochal.cms_client``, the SDK's transport).

Each call is a ``Call``: the method's path, the request as bytes and how the reply's bytes
become a domain value, which is what a gRPC channel's ``unary_unary`` takes; so
``epochal.admin_client`` sends domain values and never sees a message. A domain value and its
message name their fields alike, and a conversion copies them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from epochal.admin import (
    Bootstrap,
    BootstrapAbort,
    BootstrapResume,
    Cancel,
    Cleanup,
    CleanupResult,
    Decommission,
    DecommissionAbort,
    Move,
    OperationRequest,
    OperationStatus,
    Remove,
    Replace,
    ReplicaDescription,
    Resume,
    Status,
    TestHooks,
)
from epochal.wire.v1 import replica_pb2 as pb

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Reply = TypeVar("Reply")
Value = TypeVar("Value", bound="DataclassInstance")

# Each ReplicaAdmin request: its method, and the message it travels as.
ADMIN_METHODS: dict[type, tuple[str, type]] = {
    Bootstrap: ("Bootstrap", pb.BootstrapRequest),
    BootstrapResume: ("BootstrapResume", pb.OperationRequest),
    BootstrapAbort: ("BootstrapAbort", pb.OperationRequest),
    Decommission: ("Decommission", pb.OperationRequest),
    DecommissionAbort: ("DecommissionAbort", pb.OperationRequest),
    Remove: ("Remove", pb.OperationRequest),
    Replace: ("Replace", pb.ReplaceRequest),
    Move: ("Move", pb.MoveRequest),
    Resume: ("Resume", pb.OperationRequest),
    Cancel: ("Cancel", pb.OperationRequest),
    Cleanup: ("Cleanup", pb.OperationRequest),
    Status: ("Status", pb.OperationRequest),
}


@dataclass(frozen=True, slots=True)
class Call(Generic[Reply]):
    """One unary call as a channel sends it."""

    path: str  # /epochal.v1.<service>/<method>
    request: bytes
    decode: Callable[[bytes], Reply]  # the reply's bytes -> a domain value


def operation_call(request: OperationRequest | Status) -> Call[OperationStatus]:
    return Call(*_admin(request), _decoder(pb.OperationStatus, OperationStatus))


def cleanup_call(request: Cleanup) -> Call[CleanupResult]:
    return Call(*_admin(request), _decoder(pb.CleanupResponse, CleanupResult))


def describe_call() -> Call[ReplicaDescription]:
    return Call(
        _path("Replica", "Describe"),
        pb.ReplicaDescribeRequest().SerializeToString(),
        lambda data: description_from_proto(pb.ReplicaDescribeResponse.FromString(data)),
    )


def set_hooks_call(hooks: TestHooks) -> Call[TestHooks]:
    return Call(
        _path("ReplicaTesting", "SetHooks"),
        _to_proto(pb.TestHooks, hooks).SerializeToString(),
        _decoder(pb.TestHooks, TestHooks),
    )


def description_from_proto(message: pb.ReplicaDescribeResponse) -> ReplicaDescription:
    return _from_proto(
        ReplicaDescription,
        message,
        metrics=dict(message.metrics),
        cms_addresses=tuple(message.cms_addresses),
    )


def request_to_proto(request: OperationRequest | Status | Cleanup) -> Any:
    """The message ``request`` travels as."""
    return _to_proto(ADMIN_METHODS[type(request)][1], request)


def _admin(request: OperationRequest | Status | Cleanup) -> tuple[str, bytes]:
    method, _ = ADMIN_METHODS[type(request)]
    return _path("ReplicaAdmin", method), request_to_proto(request).SerializeToString()


def _path(service: str, method: str) -> str:
    """The method's path, from the generated descriptors (so it cannot drift from the proto)."""
    descriptor = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    return f"/{descriptor.containing_service.full_name}/{descriptor.name}"


def _to_proto(message_class: type, value: DataclassInstance) -> Any:
    return message_class(**{f.name: getattr(value, f.name) for f in fields(value)})


def _from_proto(value_class: type[Value], message: Any, **converted: Any) -> Value:
    """``value_class`` from the message's fields of the same names (``converted``: the fields
    that need more than a copy)."""
    names = [f.name for f in fields(value_class) if f.name not in converted]
    return value_class(**{name: getattr(message, name) for name in names}, **converted)


def _decoder(message_class: Any, value_class: type[Value]) -> Callable[[bytes], Value]:
    return lambda data: _from_proto(value_class, message_class.FromString(data))
