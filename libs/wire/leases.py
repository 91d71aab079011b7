"""Protobuf conversions of what the metadata log says of reconcilers: their leases
(``epochal.tcm.leases``: the grants a metadata snapshot carries and the transformation that adds
one) and their registrations (``epochal.tcm.reconcilers``: the addresses a snapshot carries and
the transformation that sets one)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from epochal.tcm import (
    GrantReconcileLease,
    LeaseGrant,
    RegisterReconciler,
    TokenRange,
    Transformation,
)
from epochal.tcm.schema import frozen_map
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


def reconcilers_to_proto(reconcilers: Mapping[str, str]) -> list[pb.ReconcilerInfo]:
    return [
        pb.ReconcilerInfo(reconciler_id=reconciler_id, address=reconcilers[reconciler_id])
        for reconciler_id in sorted(reconcilers)
    ]


def reconcilers_from_proto(messages: Iterable[pb.ReconcilerInfo]) -> Mapping[str, str]:
    entries = {
        required(m.reconciler_id, f"reconcilers[{i}].reconciler_id"): required(
            m.address, f"reconcilers[{i}].address"
        )
        for i, m in enumerate(messages)
    }
    return frozen_map(dict(sorted(entries.items())))


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


def _to_register(t: RegisterReconciler) -> pb.RegisterReconciler:
    return pb.RegisterReconciler(reconciler_id=t.reconciler_id, address=t.address)


def _from_register(m: pb.RegisterReconciler) -> Transformation:
    return RegisterReconciler(
        reconciler_id=required(m.reconciler_id, "register_reconciler.reconciler_id"),
        address=m.address,  # empty: a deregistration
    )


LEASE_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Transformation]]] = {
    GrantReconcileLease.kind: (_to_grant, _from_grant),
    RegisterReconciler.kind: (_to_register, _from_register),
}
