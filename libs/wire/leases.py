"""Protobuf conversions of reconciler leases (``epochal.tcm.leases``): the grants a metadata
snapshot carries and the transformation that adds one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from epochal.tcm import GrantReconcileLease, LeaseGrant, TokenRange, Transformation
from epochal.wire.fields import MalformedInput, required, within
from epochal.wire.v1 import metadata_pb2 as pb


def _range_to_proto(token_range: TokenRange) -> pb.TokenRange:
    return pb.TokenRange(left=token_range.left, right=token_range.right)


def _range_from_proto(message: Any, field: str) -> TokenRange:
    if not message.HasField("range"):
        raise MalformedInput(f"{field}.range is required")
    return TokenRange(message.range.left, message.range.right)


def leases_to_proto(grants: Iterable[LeaseGrant]) -> list[pb.LeaseGrant]:
    return [
        pb.LeaseGrant(
            keyspace=g.keyspace,
            range=_range_to_proto(g.range),
            holder=g.holder,
            epoch=g.epoch,
        )
        for g in grants
    ]


def leases_from_proto(messages: Iterable[pb.LeaseGrant]) -> tuple[LeaseGrant, ...]:
    return tuple(
        LeaseGrant(
            keyspace=required(m.keyspace, f"reconcile_leases[{i}].keyspace"),
            range=_range_from_proto(m, f"reconcile_leases[{i}]"),
            holder=m.holder,
            epoch=m.epoch,
        )
        for i, m in enumerate(messages)
    )


def _to_grant(t: GrantReconcileLease) -> pb.GrantReconcileLease:
    return pb.GrantReconcileLease(
        keyspace=t.keyspace,
        range=_range_to_proto(t.range),
        holder=t.holder,
        replaces=t.replaces,
    )


def _from_grant(m: pb.GrantReconcileLease) -> Transformation:
    return GrantReconcileLease(
        keyspace=required(m.keyspace, "grant_reconcile_lease.keyspace"),
        range=_range_from_proto(m, "grant_reconcile_lease"),
        holder=m.holder,  # empty: a release
        replaces=within(m.replaces, "grant_reconcile_lease.replaces"),
    )


LEASE_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Transformation]]] = {
    GrantReconcileLease.kind: (_to_grant, _from_grant),
}
