"""Reconcilers in the metadata log (epochal.tcm.reconcilers): a registration is an upsert of the
id's address, idempotent at the same address; a registration at no address removes the entry and
is refused for an id that is not registered; bad ids and addresses are refused where a commit
arrives; the number of reconcilers is capped; the map is sorted and survives the wire."""

from __future__ import annotations

import pytest

from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    InitializeCMS,
    RegisterReconciler,
    Rejected,
    apply_transformation,
)
from epochal.tcm.leases import MAX_HOLDER_CHARS
from epochal.tcm.reconcilers import MAX_RECONCILERS
from epochal.wire.metadata import (
    decode_metadata,
    decode_transformation,
    encode_metadata,
    encode_transformation,
)


def initialized() -> ClusterMetadata:
    return apply_transformation(
        ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),))
    )


def register(metadata: ClusterMetadata, reconciler_id: str, address: str) -> ClusterMetadata:
    return apply_transformation(
        metadata, RegisterReconciler(reconciler_id=reconciler_id, address=address)
    )


def refusal(metadata: ClusterMetadata, reconciler_id: str, address: str) -> Rejected:
    rejection = RegisterReconciler(reconciler_id=reconciler_id, address=address).validate(metadata)
    assert rejection is not None
    return rejection


def test_registering_names_the_reconciler_at_its_address_sorted_by_id() -> None:
    base = initialized()
    assert dict(base.reconcilers) == {}
    metadata = register(register(base, "r2", "10.0.0.2:9101"), "r1", "10.0.0.1:9101")
    assert metadata.epoch == base.epoch + 2
    assert list(metadata.reconcilers.items()) == [
        ("r1", "10.0.0.1:9101"),
        ("r2", "10.0.0.2:9101"),
    ]


def test_registering_again_at_the_same_address_is_accepted_and_changes_nothing_else() -> None:
    first = register(initialized(), "r1", "10.0.0.1:9101")
    again = register(first, "r1", "10.0.0.1:9101")
    assert again.epoch == first.epoch + 1
    assert again.reconcilers == first.reconcilers


def test_registering_at_a_new_address_moves_the_entry() -> None:
    metadata = register(register(initialized(), "r1", "10.0.0.1:9101"), "r1", "10.0.0.9:9200")
    assert dict(metadata.reconcilers) == {"r1": "10.0.0.9:9200"}


def test_a_new_id_at_an_address_another_id_holds_replaces_that_id() -> None:
    """A reconciler restarted at the same address under a new id: the old id is gone."""
    metadata = register(register(initialized(), "r1", "10.0.0.1:9101"), "r2", "10.0.0.2:9101")
    moved = register(metadata, "r3", "10.0.0.1:9101")
    assert dict(moved.reconcilers) == {"r2": "10.0.0.2:9101", "r3": "10.0.0.1:9101"}


def test_deregistering_removes_the_entry_and_only_an_existing_one() -> None:
    metadata = register(register(initialized(), "r1", "10.0.0.1:9101"), "r2", "10.0.0.2:9101")
    gone = register(metadata, "r1", "")
    assert dict(gone.reconcilers) == {"r2": "10.0.0.2:9101"}
    assert refusal(gone, "r1", "").rule == "reconciler_not_found"
    assert refusal(initialized(), "r9", "").rule == "reconciler_not_found"


@pytest.mark.parametrize(
    ("reconciler_id", "address", "says"),
    [
        ("", "10.0.0.1:9101", "1..256"),
        ("r" * (MAX_HOLDER_CHARS + 1), "10.0.0.1:9101", "1..256"),
        ("r1", "10.0.0.1", "expected one host:port"),
        ("r1", ":9101", "expected one host:port"),
        ("r1", "host:port", "expected one host:port"),
        ("r1", "10.0.0.1:0", "expected one host:port"),
        ("r1", "10.0.0.1:65536", "expected one host:port"),
        ("r1", "10.0.0.1:9101,10.0.0.2:9101", "expected one host:port"),
        ("r1", " 10.0.0.1:9101", "expected one host:port"),
        ("r1", "10.0.0.1\n:9101", "expected one host:port"),
        ("r1", "h" * 300 + ":1", "at most 256"),
    ],
)
def test_bad_ids_and_addresses_are_refused_where_the_commit_arrives(
    reconciler_id: str, address: str, says: str
) -> None:
    transformation = RegisterReconciler(reconciler_id=reconciler_id, address=address)
    with pytest.raises(Rejected) as refused:
        transformation.check_input()
    assert refused.value.rule == "bad_reconciler"
    assert says in refused.value.message
    assert refusal(initialized(), reconciler_id, address).rule == "bad_reconciler"


def test_the_number_of_reconcilers_is_capped_but_the_registered_may_still_move() -> None:
    metadata = initialized()
    for n in range(MAX_RECONCILERS):
        metadata = register(metadata, f"r{n}", f"10.0.{n // 200}.{n % 200}:9101")
    assert len(metadata.reconcilers) == MAX_RECONCILERS
    assert refusal(metadata, "one-more", "10.9.9.9:9101").rule == "too_many_reconcilers"
    moved = register(metadata, "r0", "10.9.9.9:9101")
    assert moved.reconcilers["r0"] == "10.9.9.9:9101"
    assert "one-more" in register(register(moved, "r1", ""), "one-more", "10.9.9.8:1").reconcilers


def test_a_registration_needs_the_cms_initialised() -> None:
    assert refusal(ClusterMetadata.empty(), "r1", "10.0.0.1:9101").rule == "not_initialized"


def test_registrations_survive_the_wire() -> None:
    for transformation in (
        RegisterReconciler(reconciler_id="r1", address="10.0.0.1:9101"),
        RegisterReconciler(reconciler_id="r1", address=""),
    ):
        assert decode_transformation(encode_transformation(transformation)) == transformation
    metadata = register(register(initialized(), "r2", "[::1]:9102"), "r1", "10.0.0.1:9101")
    decoded = decode_metadata(encode_metadata(metadata))
    assert decoded == metadata
    assert list(decoded.reconcilers) == ["r1", "r2"]
