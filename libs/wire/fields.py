"""Decoding helpers shared by the conversions of every service's messages: required fields,
known enum values, integers in range, replication params. Errors are ``MalformedInput`` naming
the field."""

from __future__ import annotations

from typing import Any

from epochal.tcm import ReplicationParams, Strategy
from epochal.wire.v1 import metadata_pb2 as pb


class MalformedInput(ValueError):
    """A message that does not describe a valid value; the text names the field."""


def enum_from(kind: type, values: dict[Any, Any], number: int, field: str) -> Any:
    if number not in values:
        raise MalformedInput(f"{field}: unknown or unset {kind.__name__} value {number}")
    return values[number]


# The largest epoch, HLC, sequence, lease token or count a server keeps: SQLite's INTEGER is
# signed 64-bit, and a protobuf uint64 field carries up to 2^64 - 1.
MAX_INT64 = (1 << 63) - 1


def within(value: int, field: str, high: int = MAX_INT64, low: int = 0) -> int:
    """``value``, checked where the message enters to be in ``low..high``."""
    if not low <= value <= high:
        raise MalformedInput(f"{field}: {value} is out of range ({low}..{high})")
    return value


def required(value: str, field: str) -> str:
    if not value:
        raise MalformedInput(f"{field} is required")
    return value


def replication_to_proto(params: ReplicationParams) -> pb.ReplicationParams:
    if params.strategy is Strategy.SIMPLE:
        return pb.ReplicationParams(
            simple=pb.SimpleStrategy(replication_factor=params.factors[0][1])
        )
    return pb.ReplicationParams(
        network_topology=pb.NetworkTopologyStrategy(datacenters=dict(params.factors))
    )


def replication_from_proto(message: pb.ReplicationParams, field: str) -> ReplicationParams:
    kind = message.WhichOneof("strategy")
    if kind == "simple":
        return ReplicationParams.simple(message.simple.replication_factor)
    if kind == "network_topology":
        return ReplicationParams.network_topology(dict(message.network_topology.datacenters))
    raise MalformedInput(f"{field}: no replication strategy set (simple or network_topology)")
