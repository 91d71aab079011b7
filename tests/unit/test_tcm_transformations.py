"""The metadata model's rules, including seed 000's racing schema changes.

The CMS validates every transformation against the state at the tail of the log, so of two racing
changes the second is validated against the first; these tests apply them in log order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from epochal.tcm import (
    AlterKeyspace,
    AlterTable,
    ClusterMetadata,
    CMSMember,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    InitializeCMS,
    NodeState,
    Register,
    Rejected,
    ReplicationParams,
    ReplicationType,
    TriggerSnapshot,
    Unregister,
    apply_transformation,
)

INIT = InitializeCMS(members=(CMSMember("cms1", "127.0.0.1:7001"),))


def initialized() -> ClusterMetadata:
    return apply_transformation(ClusterMetadata.empty(), INIT)


def with_keyspace(name: str = "ks") -> ClusterMetadata:
    return apply_transformation(
        initialized(), CreateKeyspace(name=name, replication=ReplicationParams.simple(3))
    )


def table(name: str = "t", keyspace: str = "ks", *extra: Column) -> CreateTable:
    return CreateTable(
        keyspace=keyspace,
        name=name,
        columns=(Column("id", ColumnType.TEXT), Column("v", ColumnType.BLOB), *extra),
        partition_key=("id",),
    )


def rejected(metadata: ClusterMetadata, transformation) -> Rejected:
    rejection = transformation.validate(metadata)
    assert rejection is not None, f"{transformation} was accepted"
    return rejection


def test_epochs_count_applied_transformations_and_metadata_is_never_changed_in_place() -> None:
    empty = ClusterMetadata.empty()
    first = apply_transformation(empty, INIT)
    second = apply_transformation(
        first, CreateKeyspace(name="ks", replication=ReplicationParams.simple(1))
    )
    assert (empty.epoch, first.epoch, second.epoch) == (0, 1, 2)
    assert "ks" not in first.keyspaces and "ks" in second.keyspaces
    assert first == apply_transformation(ClusterMetadata.empty(), INIT)


def test_nothing_but_initialize_before_the_cms_is_initialised_and_it_happens_once() -> None:
    assert rejected(ClusterMetadata.empty(), table()).rule == "not_initialized"
    assert rejected(initialized(), INIT).rule == "already_initialized"
    assert rejected(ClusterMetadata.empty(), InitializeCMS(members=())).rule == "bad_members"


def test_racing_create_table_gives_one_table_one_id_and_the_loser_names_the_winners_epoch() -> None:
    # Two coordinators each validated CREATE TABLE ks.t against an older state; the CMS puts
    # them in one order and validates the second against the first.
    base = with_keyspace()
    winner = apply_transformation(base, table())
    loser = rejected(winner, table("t", "ks", Column("other", ColumnType.INT)))
    assert loser.rule == "table_exists"
    assert f"created at epoch {winner.epoch}" in loser.message
    tables = winner.keyspaces["ks"].tables
    assert list(tables) == ["t"]
    assert tables["t"].id in loser.message


def test_a_create_that_depends_on_something_dropped_first_is_rejected() -> None:
    # Seed: DROP TYPE committed first makes the CREATE TABLE that uses it invalid.
    base = with_keyspace()
    dropped = apply_transformation(base, DropKeyspace(name="ks"))
    assert rejected(dropped, table()).rule == "keyspace_not_found"
    created = apply_transformation(base, table())
    without_table = apply_transformation(created, DropTable(keyspace="ks", name="t"))
    alter = AlterTable(keyspace="ks", name="t", add_columns=(Column("x", ColumnType.INT),))
    assert rejected(without_table, alter).rule == "table_not_found"


def test_a_recreated_table_gets_a_new_id_and_ids_are_deterministic() -> None:
    created = apply_transformation(with_keyspace(), table())
    again = apply_transformation(
        apply_transformation(created, DropTable(keyspace="ks", name="t")), table()
    )
    assert created.keyspaces["ks"].tables["t"].id != again.keyspaces["ks"].tables["t"].id
    assert apply_transformation(with_keyspace(), table()) == created


def test_alter_keyspace_changes_options_but_refuses_replication_changes() -> None:
    base = with_keyspace()
    altered = apply_transformation(base, AlterKeyspace(name="ks", options=(("comment", "hi"),)))
    assert dict(altered.keyspaces["ks"].options) == {"comment": "hi"}
    change_rf = AlterKeyspace(name="ks", replication=ReplicationParams.simple(5))
    rejection = rejected(base, change_rf)
    assert rejection.rule == "replication_change_unsupported"
    assert "not supported yet" in rejection.message
    tracking = AlterKeyspace(name="ks", replication_type=ReplicationType.TRACKED)
    assert rejected(base, tracking).rule == "replication_change_unsupported"


def test_alter_table_adds_and_drops_regular_columns_only() -> None:
    base = apply_transformation(with_keyspace(), table())
    altered = apply_transformation(
        base,
        AlterTable(
            keyspace="ks", name="t", add_columns=(Column("x", ColumnType.INT),), drop_columns=("v",)
        ),
    )
    assert [c.name for c in altered.keyspaces["ks"].tables["t"].columns] == ["id", "x"]
    assert (
        rejected(base, AlterTable(keyspace="ks", name="t", drop_columns=("id",))).rule
        == "key_column"
    )
    duplicate = AlterTable(keyspace="ks", name="t", add_columns=(Column("v", ColumnType.INT),))
    assert rejected(base, duplicate).rule == "column_exists"


@pytest.mark.parametrize(
    ("transformation", "rule"),
    [
        (CreateKeyspace(name="9bad", replication=ReplicationParams.simple(3)), "bad_name"),
        (CreateKeyspace(name="ks2", replication=ReplicationParams.simple(0)), "bad_replication"),
        (CreateKeyspace(name="ks2", replication=ReplicationParams.simple(17)), "bad_replication"),
        (
            CreateKeyspace(name="ks2", replication=ReplicationParams.network_topology({"": 3})),
            "bad_replication",
        ),
        (CreateKeyspace(name="ks", replication=ReplicationParams.simple(3)), "keyspace_exists"),
        (
            CreateTable(
                keyspace="ks", name="t", columns=(Column("id", ColumnType.TEXT),), partition_key=()
            ),
            "bad_primary_key",
        ),
        (
            CreateTable(
                keyspace="ks",
                name="t",
                columns=(Column("id", ColumnType.TEXT),),
                partition_key=("nope",),
            ),
            "bad_primary_key",
        ),
        (
            CreateTable(
                keyspace="ks",
                name="t",
                columns=(Column("id", ColumnType.TEXT), Column("id", ColumnType.INT)),
                partition_key=("id",),
            ),
            "duplicate_column",
        ),
        (DropTable(keyspace="ks", name="missing"), "table_not_found"),
        (DropKeyspace(name="missing"), "keyspace_not_found"),
        (Unregister(node_id="node-9"), "node_not_found"),
    ],
)
def test_invalid_transformations_name_the_rule_they_break(transformation, rule: str) -> None:
    rejection = rejected(with_keyspace(), transformation)
    assert rejection.rule == rule
    assert len(rejection.message) > 10


def test_keyspace_rejection_names_the_winners_epoch() -> None:
    base = with_keyspace()
    rejection = rejected(base, CreateKeyspace(name="ks", replication=ReplicationParams.simple(1)))
    assert f"created at epoch {base.epoch}" in rejection.message


def test_register_assigns_node_ids_and_refuses_a_used_address() -> None:
    node = Register(address="10.0.0.1:9000", datacenter="dc1", rack="r1", version="1.0.0")
    one = apply_transformation(initialized(), node)
    two = apply_transformation(
        one, Register(address="10.0.0.2:9000", datacenter="dc1", rack="r2", version="1.2.0")
    )
    assert sorted(two.nodes) == ["node-1", "node-2"]
    assert two.nodes["node-1"].state is NodeState.REGISTERED
    assert rejected(two, node).rule == "address_in_use"
    removed = apply_transformation(two, Unregister(node_id="node-1"))
    assert sorted(removed.nodes) == ["node-2"]


@pytest.mark.parametrize(
    ("version", "rule"),
    [
        ("one", "bad_version"),
        ("1", "bad_version"),  # once accepted, it blocked every schema change
        ("1.0", "bad_version"),
        ("1.0.0.0", "bad_version"),
        ("1.0.x", "bad_version"),
        ("1.².0", "bad_version"),
        ("1.0.1234567", "bad_version"),
        ("", "bad_version"),
        ("0.9.0", "version_too_old"),
    ],
)
def test_register_refuses_a_version_that_would_block_the_log(version: str, rule: str) -> None:
    """Checked where the commit arrives (check_input); at apply only the old rule holds, so
    that members of different versions apply a log alike."""
    register = Register(address="10.0.0.3:9000", datacenter="dc1", rack="r1", version=version)
    with pytest.raises(Rejected) as rejection:
        register.check_input()
    assert rejection.value.rule == rule
    assert "MAJOR.MINOR.PATCH" in rejection.value.message or "1.0.0" in rejection.value.message


@dataclass(frozen=True, slots=True, kw_only=True)
class FutureSnapshot(TriggerSnapshot):
    """A kind that a later release adds."""

    kind: ClassVar[str] = "future_snapshot"
    since_version: ClassVar[str] = "1.1.0"


def test_a_kind_some_registered_node_cannot_apply_is_refused_with_a_way_out() -> None:
    old_node = Register(address="10.0.0.1:9000", datacenter="dc1", rack="r1", version="1.0.0")
    metadata = apply_transformation(initialized(), old_node)
    rejection = rejected(metadata, FutureSnapshot())
    assert rejection.rule == "version_too_old"
    assert "node-1" in rejection.message and "1.0.0" in rejection.message
    assert "unregister it (epochal unregister node-1)" in rejection.message
    apply_transformation(metadata, TriggerSnapshot())  # a kind it can apply goes through


def test_trigger_snapshot_only_takes_an_epoch() -> None:
    base = with_keyspace()
    after = apply_transformation(base, TriggerSnapshot())
    assert after.epoch == base.epoch + 1
    assert after.keyspaces == base.keyspaces
