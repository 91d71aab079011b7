"""Metadata and transformations round-trip through protobuf, deterministically (property tests)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.sim.placement import placement_history
from epochal.tcm import (
    ALL_KINDS,
    AddCMSCandidate,
    AdvanceSequence,
    AlterKeyspace,
    AlterTable,
    CancelSequence,
    ClusterMetadata,
    CMSMember,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    FinishAddToCMS,
    GrantReconcileLease,
    InitializeCMS,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    Register,
    RegisterReconciler,
    RemoveFromCMS,
    ReplicationParams,
    ReplicationType,
    StartAddToCMS,
    Step,
    TokenRange,
    Transformation,
    TriggerSnapshot,
    Unregister,
)
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN
from epochal.wire.metadata import (
    MalformedInput,
    MetadataEncoder,
    decode_metadata,
    decode_transformation,
    encode_metadata,
    encode_transformation,
    metadata_from_proto,
    metadata_to_proto,
    transformation_from_proto,
    transformation_to_proto,
)
from epochal.wire.v1 import metadata_pb2

tokens = st.integers(MIN_TOKEN + 1, MAX_TOKEN)
names = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
columns = st.builds(Column, names, st.sampled_from(list(ColumnType)))
options = st.dictionaries(names, st.text(max_size=10), max_size=3).map(
    lambda d: tuple(sorted(d.items()))
)
replication = st.one_of(
    st.integers(1, 5).map(ReplicationParams.simple),
    st.dictionaries(names, st.integers(1, 5), min_size=1, max_size=3).map(
        ReplicationParams.network_topology
    ),
)


@st.composite
def create_tables(draw: st.DrawFn) -> CreateTable:
    cols = draw(st.lists(columns, min_size=1, max_size=5, unique_by=lambda c: c.name))
    key_size = draw(st.integers(1, len(cols)))
    split = draw(st.integers(1, key_size))
    key = [c.name for c in cols[:key_size]]
    return CreateTable(
        keyspace=draw(names),
        name=draw(names),
        columns=tuple(cols),
        partition_key=tuple(key[:split]),
        clustering_key=tuple(key[split:]),
        options=draw(options),
    )


transformations = st.one_of(
    st.lists(st.builds(CMSMember, names, st.just("127.0.0.1:7000")), min_size=1, max_size=3).map(
        lambda m: InitializeCMS(members=tuple(m))
    ),
    st.builds(
        CreateKeyspace,
        name=names,
        replication=replication,
        replication_type=st.sampled_from(list(ReplicationType)),
        options=options,
    ),
    st.builds(
        AlterKeyspace,
        name=names,
        options=options,
        replication=st.none() | replication,
        replication_type=st.none() | st.sampled_from(list(ReplicationType)),
    ),
    st.builds(DropKeyspace, name=names),
    create_tables(),
    st.builds(
        AlterTable,
        keyspace=names,
        name=names,
        add_columns=st.lists(columns, max_size=3).map(tuple),
        drop_columns=st.lists(names, max_size=3).map(tuple),
        options=options,
    ),
    st.builds(DropTable, keyspace=names, name=names),
    st.builds(Register, address=names, datacenter=names, rack=names, version=st.just("1.0.0")),
    st.builds(Unregister, node_id=names),
    st.just(TriggerSnapshot()),
    st.builds(
        PrepareJoin,
        node_id=names,
        tokens=st.lists(tokens, max_size=4, unique=True).map(tuple),
        num_tokens=st.integers(1, 16),
    ),
    st.builds(PrepareLeave, node_id=names, remove=st.booleans()),
    st.builds(PrepareReplace, node_id=names, replaced=names),
    st.builds(
        PrepareMove, node_id=names, tokens=st.lists(tokens, min_size=1, max_size=4).map(tuple)
    ),
    st.builds(AdvanceSequence, node_id=names, step=st.sampled_from(list(Step))),
    st.builds(CancelSequence, node_id=names),
    st.builds(AddCMSCandidate, names, names.map(lambda n: f"{n}:7000")),
    st.builds(StartAddToCMS, names),
    st.builds(FinishAddToCMS, names),
    st.builds(RemoveFromCMS, names),
    st.builds(
        GrantReconcileLease,
        keyspace=names,
        range=st.builds(TokenRange, tokens, tokens),
        holder=st.just("") | names,
        replaces=st.integers(0, 2**63 - 1),  # a token is an epoch (larger: refused on decode)
    ),
    st.builds(
        RegisterReconciler,
        reconciler_id=names,
        address=st.just("") | names.map(lambda n: f"{n}:9101"),  # "": a deregistration
    ),
)


def test_every_kind_has_a_codec() -> None:
    oneof = metadata_pb2.Transformation.DESCRIPTOR.oneofs_by_name["kind"]
    assert {k.kind for k in ALL_KINDS} == {field.name for field in oneof.fields}


@given(transformations)
def test_transformations_round_trip_and_encode_deterministically(t: Transformation) -> None:
    assert transformation_from_proto(transformation_to_proto(t)) == t
    assert decode_transformation(encode_transformation(t)) == t
    assert encode_transformation(t) == encode_transformation(
        decode_transformation(encode_transformation(t))
    )


@settings(max_examples=60)
@given(st.lists(transformations, max_size=25))
def test_metadata_built_by_random_transformations_round_trips(steps: list[Transformation]) -> None:
    metadata = ClusterMetadata.empty()
    metadata = InitializeCMS(members=(CMSMember("a", "127.0.0.1:1"),)).execute(metadata)
    encoder = MetadataEncoder()
    for step in steps:
        if step.validate(metadata) is None:
            metadata = step.execute(metadata)
        # The caching encoder gives exactly the bytes of a fresh encoding, step after step.
        assert encoder.encode(metadata) == encode_metadata(metadata)
    assert metadata_from_proto(metadata_to_proto(metadata)) == metadata
    assert decode_metadata(encode_metadata(metadata)) == metadata
    assert encode_metadata(metadata) == encode_metadata(decode_metadata(encode_metadata(metadata)))


def test_every_metadata_of_random_topology_histories_round_trips() -> None:
    """Tokens, placements with ranges split and in flight, sequences and locks: every epoch of
    the placement simulator's histories (joins, leaves, removes, replaces, moves, cancels)."""
    encoder = MetadataEncoder()
    checked = 0
    for seed in range(4):
        for metadata in placement_history(seed, actions=30):
            encoded = encode_metadata(metadata)
            assert encoder.encode(metadata) == encoded
            assert decode_metadata(encoded) == metadata
            checked += 1
    assert checked > 200


def test_cms_roles_round_trip_and_old_members_read_as_voters() -> None:
    metadata = InitializeCMS(members=(CMSMember("a", "127.0.0.1:1"),)).execute(
        ClusterMetadata.empty()
    )
    for step in (AddCMSCandidate("b", "127.0.0.1:2"), StartAddToCMS("b")):
        metadata = step.execute(metadata)
    assert decode_metadata(encode_metadata(metadata)) == metadata
    old = metadata_pb2.ClusterMetadata(
        epoch=1, cms_members=[metadata_pb2.CMSMember(member_id="a", address="127.0.0.1:1")]
    )
    assert [m.role.value for m in metadata_from_proto(old).cms_members] == ["voter"]


def test_a_snapshot_naming_a_reconciler_without_an_address_is_malformed() -> None:
    data = metadata_pb2.ClusterMetadata(
        epoch=3, reconcilers=[metadata_pb2.ReconcilerInfo(reconciler_id="r1")]
    ).SerializeToString()
    try:
        decode_metadata(data)
    except MalformedInput as error:
        assert "reconcilers[0].address is required" in str(error)
    else:
        raise AssertionError("decoded")


def test_malformed_input_says_what_is_wrong() -> None:
    cases = {
        b"\xff\xff\xff": "not an encoded Transformation",
        metadata_pb2.Transformation().SerializeToString(): "no kind set",
        metadata_pb2.Transformation(
            create_table=metadata_pb2.CreateTable(name="t")
        ).SerializeToString(): ("create_table.columns is required"),
        metadata_pb2.Transformation(
            create_table=metadata_pb2.CreateTable(
                keyspace="k",
                name="t",
                columns=[metadata_pb2.Column(name="id", type=99)],
                partition_key=["id"],
            )
        ).SerializeToString(): "create_table.columns[0].type",
        metadata_pb2.Transformation(
            create_table=metadata_pb2.CreateTable(
                keyspace="k",
                name="t",
                columns=[
                    metadata_pb2.Column(name="id", type=metadata_pb2.TEXT),
                    metadata_pb2.Column(type=metadata_pb2.TEXT),
                ],
                partition_key=["id"],
            )
        ).SerializeToString(): "create_table.columns[1].name is required",
        metadata_pb2.Transformation(
            create_keyspace=metadata_pb2.CreateKeyspace(name="k")
        ).SerializeToString(): "create_keyspace.replication is required",
        metadata_pb2.Transformation(
            grant_reconcile_lease=metadata_pb2.GrantReconcileLease(keyspace="ks", holder="r1")
        ).SerializeToString(): "grant_reconcile_lease.range is required",
        metadata_pb2.Transformation(
            register_reconciler=metadata_pb2.RegisterReconciler(address="127.0.0.1:9101")
        ).SerializeToString(): "register_reconciler.reconciler_id is required",
    }
    for data, expected in cases.items():
        try:
            decode_transformation(data)
        except MalformedInput as error:
            assert expected in str(error), (expected, str(error))
        else:
            raise AssertionError(f"{data!r} decoded")
