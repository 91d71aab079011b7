"""Reconciler leases in the metadata log (epochal.tcm.leases): a grant is a compare-and-set on the
range's token, its epoch the new token; pieces split from a granted range stay under its token;
grants covered by newer ones are forgotten without changing any answer; a release is a grant to
nobody; dropping a keyspace drops its grants; grants survive the wire."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    CreateKeyspace,
    DropKeyspace,
    GrantReconcileLease,
    InitializeCMS,
    LeaseChanged,
    LeaseGrant,
    Rejected,
    ReplicationParams,
    ReplicationType,
    TokenRange,
    apply_transformation,
)
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN
from epochal.wire.metadata import (
    decode_metadata,
    decode_transformation,
    encode_metadata,
    encode_transformation,
)

from .seed_ring import RF2, ring_of_four


def tracked(*names: str) -> ClusterMetadata:
    metadata = apply_transformation(
        ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),))
    )
    for name in names:
        metadata = apply_transformation(
            metadata,
            CreateKeyspace(
                name=name,
                replication=ReplicationParams.simple(3),
                replication_type=ReplicationType.TRACKED,
            ),
        )
    return metadata


def grant(
    metadata: ClusterMetadata, token_range: TokenRange, holder: str, keyspace: str = "ks"
) -> ClusterMetadata:
    """``holder`` takes the range, replacing the token it reads for it now."""
    seen = metadata.lease_of(keyspace, token_range)
    return apply_transformation(
        metadata,
        GrantReconcileLease(
            keyspace=keyspace,
            range=token_range,
            holder=holder,
            replaces=seen.epoch if seen is not None else 0,
        ),
    )


def test_a_free_range_is_granted_under_the_epoch_of_the_grant() -> None:
    base = tracked("ks")
    assert base.lease_of("ks", TokenRange(0, 100)) is None
    after = grant(base, TokenRange(0, 100), "r1")
    held = LeaseGrant("ks", TokenRange(0, 100), "r1", after.epoch)
    assert after.reconcile_leases == (held,)
    assert after.lease_of("ks", TokenRange(50, 60)) == held
    assert after.lease_of("ks", TokenRange(100, 200)) is None  # (0, 100] ends at 100
    assert after.lease_of("other", TokenRange(0, 100)) is None


def test_of_two_contenders_that_saw_the_same_token_the_second_is_refused_naming_the_holder() -> (
    None
):
    base = tracked("ks")
    first = grant(base, TokenRange(0, 100), "r1")
    # r2 read the range's token (0) before r1's grant came in.
    stale = GrantReconcileLease(keyspace="ks", range=TokenRange(50, 150), holder="r2", replaces=0)
    rejection = stale.validate(first)
    assert isinstance(rejection, LeaseChanged)
    assert rejection.rule == "lease_changed"
    assert (rejection.holder, rejection.token) == ("r1", first.epoch)
    assert f"held by 'r1' under token {first.epoch}" in rejection.message
    assert f"replaces={first.epoch} only once that lease has lapsed" in rejection.message
    # With the token it reads now, it takes over (the lease lapsed: the replicas decide that).
    second = grant(first, TokenRange(50, 150), "r2")
    assert second.lease_of("ks", TokenRange(0, 10)).holder == "r1"  # type: ignore[union-attr]
    assert second.lease_of("ks", TokenRange(60, 70)).holder == "r2"  # type: ignore[union-attr]


def test_a_range_split_from_a_granted_range_is_under_its_token_until_granted_again() -> None:
    cluster = ring_of_four()
    cluster.apply(
        CreateKeyspace(name="tk", replication=RF2, replication_type=ReplicationType.TRACKED)
    )
    before = cluster.md.token_range("tk", 150)
    assert before == TokenRange(100, 200)
    cluster.history.append(grant(cluster.md, before, "r1", "tk"))
    old = cluster.md.lease_of("tk", before)
    cluster.join("E", 150)  # splits (100, 200]
    piece = cluster.md.token_range("tk", 120)
    assert piece == TokenRange(100, 150)
    assert cluster.md.lease_of("tk", piece) == old
    # A grant of the piece must replace the old token; the other piece keeps it.
    late = GrantReconcileLease(keyspace="tk", range=piece, holder="r2", replaces=0)
    assert late.validate(cluster.md) == LeaseChanged("tk", piece, old)
    cluster.history.append(grant(cluster.md, piece, "r2", "tk"))
    assert cluster.md.lease_of("tk", piece).holder == "r2"  # type: ignore[union-attr]
    assert cluster.md.lease_of("tk", TokenRange(150, 200)) == old
    # The range the pieces merge back into answers the highest token of either.
    assert cluster.md.lease_of("tk", before).holder == "r2"  # type: ignore[union-attr]


def test_grants_covered_by_newer_grants_are_dropped_and_the_answers_stay() -> None:
    metadata = tracked("ks", "other")
    metadata = grant(metadata, TokenRange(0, 100), "r1")
    metadata = grant(metadata, TokenRange(100, 200), "r2")
    metadata = grant(metadata, TokenRange(0, 100), "r9", keyspace="other")
    metadata = grant(metadata, TokenRange(-50, 200), "r3")  # covers both
    assert [(g.keyspace, g.holder) for g in metadata.reconcile_leases] == [
        ("ks", "r3"),
        ("other", "r9"),
    ]
    # Covered by two newer grants together: dropped once the second comes.
    metadata = grant(metadata, TokenRange(-50, 0), "r4")
    assert len(metadata.reconcile_leases) == 3
    metadata = grant(metadata, TokenRange(0, 200), "r5")
    assert [g.holder for g in metadata.reconcile_leases] == ["r4", "r5", "r9"]


def test_a_release_frees_the_range_and_still_raises_its_token() -> None:
    held = grant(tracked("ks"), TokenRange(0, 100), "r1")
    released = grant(held, TokenRange(0, 100), "")
    free = released.lease_of("ks", TokenRange(0, 100))
    assert free == LeaseGrant("ks", TokenRange(0, 100), "", released.epoch)
    # The former holder's token is below the release's: it cannot grant itself on top.
    again = GrantReconcileLease(keyspace="ks", range=TokenRange(0, 100), holder="r1", replaces=1)
    rejection = again.validate(released)
    assert isinstance(rejection, LeaseChanged) and rejection.holder == ""
    assert f"released at token {released.epoch}" in rejection.message
    taken = grant(released, TokenRange(0, 100), "r2")
    assert taken.lease_of("ks", TokenRange(0, 100)).holder == "r2"  # type: ignore[union-attr]


def test_dropping_a_keyspace_drops_its_grants_only() -> None:
    metadata = grant(tracked("ks", "other"), TokenRange(0, 100), "r1")
    metadata = grant(metadata, TokenRange(0, 100), "r2", keyspace="other")
    dropped = apply_transformation(metadata, DropKeyspace(name="ks"))
    assert [g.keyspace for g in dropped.reconcile_leases] == ["other"]
    assert dropped.lease_of("ks", TokenRange(0, 100)) is None
    # Recreated, it starts from token 0 again; the epochs that follow are still higher.
    recreated = apply_transformation(
        dropped,
        CreateKeyspace(
            name="ks",
            replication=ReplicationParams.simple(3),
            replication_type=ReplicationType.TRACKED,
        ),
    )
    assert grant(recreated, TokenRange(0, 100), "r3").reconcile_leases[0].epoch > metadata.epoch


@pytest.mark.parametrize(
    ("transformation", "rule"),
    [
        (dict(keyspace="missing"), "keyspace_not_found"),
        (dict(keyspace="plain"), "keyspace_not_tracked"),
        (dict(holder="r" * 257), "bad_lease"),
        (dict(range=TokenRange(MIN_TOKEN, 0)), "bad_lease"),
        (dict(range=TokenRange(0, MAX_TOKEN + 1)), "bad_lease"),
        (dict(replaces=-1), "bad_lease"),
    ],
)
def test_what_a_grant_is_refused_for(transformation: dict[str, object], rule: str) -> None:
    metadata = apply_transformation(
        tracked("ks"), CreateKeyspace(name="plain", replication=ReplicationParams.simple(3))
    )
    fields: dict[str, object] = dict(keyspace="ks", range=TokenRange(0, 100), holder="r1")
    refused = GrantReconcileLease(**(fields | {"replaces": 0} | transformation))  # type: ignore[arg-type]
    rejection = refused.validate(metadata)
    assert rejection is not None and rejection.rule == rule, rejection
    if rule == "bad_lease":  # wrong whatever the metadata: refused where a commit arrives
        with pytest.raises(Rejected):
            refused.check_input()


def test_the_whole_ring_and_a_wrapping_range_can_be_granted() -> None:
    metadata = grant(tracked("ks"), TokenRange(900, -900), "r1")  # wraps past MAX_TOKEN
    assert metadata.lease_of("ks", TokenRange(MAX_TOKEN - 1, MAX_TOKEN)).holder == "r1"  # type: ignore[union-attr]
    metadata = grant(metadata, TokenRange(5, 5), "r2")  # the whole ring covers it
    assert [g.holder for g in metadata.reconcile_leases] == ["r2"]


def test_grants_and_the_transformation_survive_the_wire() -> None:
    metadata = grant(tracked("ks", "other"), TokenRange(0, 100), "r1")
    metadata = grant(metadata, TokenRange(100, 100), "", keyspace="other")
    decoded = decode_metadata(encode_metadata(metadata))
    assert decoded == metadata
    assert len(decoded.reconcile_leases) == 2
    for transformation in (
        GrantReconcileLease(keyspace="ks", range=TokenRange(900, -900), holder="r1", replaces=7),
        GrantReconcileLease(keyspace="ks", range=TokenRange(3, 3), holder="", replaces=0),
    ):
        assert decode_transformation(encode_transformation(transformation)) == transformation


SMALL = st.integers(-6, 6)
GRANTS = st.lists(
    st.tuples(st.builds(TokenRange, SMALL, SMALL), st.sampled_from(["", "a", "b"])), max_size=12
)


@given(GRANTS, st.builds(TokenRange, SMALL, SMALL))
def test_lease_of_answers_as_every_grant_ever_made_would(grants, query) -> None:
    """The naive model keeps every grant; the metadata forgets the covered ones."""
    metadata = tracked("ks")
    made: list[LeaseGrant] = []
    for token_range, holder in grants:
        metadata = grant(metadata, token_range, holder)
        made.append(LeaseGrant("ks", token_range, holder, metadata.epoch))
    naive = max((g for g in made if g.range.intersects(query)), key=lambda g: g.epoch, default=None)
    assert metadata.lease_of("ks", query) == naive
    assert len(metadata.reconcile_leases) <= len(made)
