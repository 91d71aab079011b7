"""The coordinator's pure plan (epochal.replica.coordinator_plan) against DESIGN.md's rules and
seed 000's bootstrap table: X joins at 150 a ring of A=100, B=200, C=300 and D=0 (RF 2), so the
range (100, 150] goes through these groups, step by step:

    step      read    write
    PREPARE   {B,C}   {B,C}
    START     {B,C}   {B,C,X}
    MID       {B,X}   {B,C,X}
    FINISH    {B,X}   {B,X}

A, B and X are in dc1, C and D in dc2 (SimpleStrategy places them regardless)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from epochal.errors import Unavailable
from epochal.replica import coordinator_plan
from epochal.replica.coordinator_plan import Behind, Plan, Planner, Recheck, behind
from epochal.tcm import (
    ClusterMetadata,
    Column,
    ColumnType,
    CreateTable,
    ReplicationParams,
    apply_transformation,
)
from epochal.tcm.consistency import Consistency

from .seed_ring import JOIN_STEPS, SEED_TOKENS, Cluster
from .seed_ring import ring as seed_ring

ONE, QUORUM, LOCAL_QUORUM, ALL = (
    Consistency.ONE,
    Consistency.QUORUM,
    Consistency.LOCAL_QUORUM,
    Consistency.ALL,
)
FORBIDDEN = ("asyncio", "grpc", "sqlalchemy", "opentelemetry", "time", "random")
TOKEN = 120  # in (100, 150]
DATACENTERS = {"A": "dc1", "B": "dc1", "C": "dc2", "D": "dc2", "X": "dc1"}


def seed_steps() -> tuple[Cluster, dict[str, ClusterMetadata]]:
    """Seed 000's ring, then X's join at 150: the metadata after each step, by step name."""
    ring = seed_ring(SEED_TOKENS, Cluster(datacenters=DATACENTERS))
    ring.join("X", 150)
    names = ("PREPARE", *(step.name for step in JOIN_STEPS))
    return ring, dict(zip(names, ring.history[-len(names) :], strict=True))


RING, STEPS = seed_steps()


def planner(name: str = "B", datacenter: str = "dc1") -> Planner:
    return Planner(RING.ids.get(name, name), datacenter)


def plan(step: str, level: Consistency, *, write: bool, at: Planner | None = None) -> Plan:
    return (at or planner()).plan(STEPS[step], level, "ks", TOKEN, write=write)


def test_the_groups_are_the_seed_table() -> None:
    expected = {
        "PREPARE": ("BC", "BC"),
        "START": ("BC", "BCX"),
        "MID": ("BX", "BCX"),
        "FINISH": ("BX", "BX"),
    }
    for step, (read, write) in expected.items():
        assert plan(step, ONE, write=False).group == RING.of(*read), step
        assert plan(step, ONE, write=True).group == RING.of(*write), step


# ---------------------------------------------------------------------- levels and needed replicas


@pytest.mark.parametrize(
    ("level", "write", "needed"),
    [
        (ONE, True, 1),
        (QUORUM, True, 2),  # a majority of {B,C,X}: the pending X counts
        (ALL, True, 3),
        (ONE, False, 1),
        (QUORUM, False, 2),  # a majority of {B,C}
        (ALL, False, 2),
    ],
)
def test_a_level_counts_over_the_write_group_for_a_write_and_the_read_group_for_a_read(
    level: Consistency, write: bool, needed: int
) -> None:
    made = plan("START", level, write=write)
    assert made.counting == made.group
    assert made.needed == needed
    assert made.epoch == STEPS["START"].epoch


def test_local_quorum_counts_only_the_members_in_this_datacenter() -> None:
    in_dc1 = plan("START", LOCAL_QUORUM, write=True, at=planner("B", "dc1"))
    assert (in_dc1.counting, in_dc1.needed) == (RING.of("B", "X"), 2)
    in_dc2 = plan("START", LOCAL_QUORUM, write=True, at=planner("C", "dc2"))
    assert (in_dc2.counting, in_dc2.needed) == (RING.of("C"), 1)


def test_a_plan_no_answers_could_satisfy_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(Unavailable, match="no replica in dc3 can answer at LOCAL_QUORUM"):
        plan("START", LOCAL_QUORUM, write=True, at=planner("B", "dc3"))
    with pytest.raises(Unavailable, match="no replica owns token 120 of missing"):
        planner().plan(STEPS["START"], QUORUM, "missing", TOKEN, write=True)


# ---------------------------------------------------------------------- preference order


def test_a_read_asks_this_node_then_its_datacenter_then_the_rest_keeping_the_given_order() -> None:
    given = [RING.ids[n] for n in ("D", "C", "X", "A", "B")]
    ordered = planner("B", "dc1").preference(STEPS["START"], given)
    assert ordered == [RING.ids[n] for n in ("B", "X", "A", "D", "C")]
    # From dc2, by a node that is not a replica: dc2 first, each tier in the given order.
    ordered = planner("D", "dc2").preference(STEPS["START"], given)
    assert ordered == [RING.ids[n] for n in ("D", "C", "X", "A", "B")]
    assert planner("A", "dc2").preference(STEPS["START"], given[:3]) == [
        RING.ids[n] for n in ("D", "C", "X")
    ]


# ---------------------------------------------------------------------- the re-check


def test_too_few_answers_are_not_satisfied_whatever_the_epochs() -> None:
    made = plan("START", QUORUM, write=True)
    view = STEPS["START"]
    assert planner().recheck(made, view, view.epoch, RING.of("B")) is Recheck.NOT_SATISFIED
    assert planner().recheck(made, view, view.epoch + 5, RING.of("B")) is Recheck.NOT_SATISFIED


def test_enough_answers_succeed_at_once_when_no_newer_epoch_was_seen() -> None:
    made = plan("START", QUORUM, write=True)
    view = STEPS["START"]
    assert planner().recheck(made, view, view.epoch, RING.of("B", "X")) is Recheck.SATISFIED


def test_a_newer_epoch_in_a_reply_means_catching_up_before_success() -> None:
    made = plan("START", QUORUM, write=True)
    view = STEPS["START"]
    answered = RING.of("B", "X")
    assert planner().recheck(made, view, view.epoch + 1, answered) is Recheck.CATCH_UP


def test_a_quorum_write_planned_at_prepare_under_the_newer_groups() -> None:
    """B and C acknowledged; a reply revealed a later step. At MID the write group is {B,C,X}:
    two of three, still a quorum. At FINISH it is {B,X}: B alone is not."""
    made = plan("PREPARE", QUORUM, write=True)
    answered = RING.of("B", "C")
    mid, finish = STEPS["MID"], STEPS["FINISH"]
    assert planner().recheck(made, mid, mid.epoch, answered) is Recheck.SATISFIED
    assert planner().recheck(made, finish, finish.epoch, answered) is Recheck.NOT_SATISFIED


def test_a_read_planned_before_mid_from_a_node_mid_took_out_of_the_read_group_is_stale() -> None:
    made = plan("PREPARE", ONE, write=False)
    mid = STEPS["MID"]
    assert planner().recheck(made, mid, mid.epoch, RING.of("C")) is Recheck.NOT_SATISFIED
    assert planner().recheck(made, mid, mid.epoch, RING.of("B")) is Recheck.SATISFIED


def test_behind_says_whether_the_tokens_group_or_the_keyspace_changed() -> None:
    write, read = plan("PREPARE", ONE, write=True), plan("PREPARE", ONE, write=False)
    prepare, start = STEPS["PREPARE"], STEPS["START"]
    assert behind(prepare, start, write) == Behind(placements=True, schema=False)
    assert behind(prepare, start, read) == Behind(placements=False, schema=False)
    table = CreateTable(
        keyspace="ks", name="t", columns=(Column("k", ColumnType.INT),), partition_key=("k",)
    )
    with_table = apply_transformation(start, table)
    assert behind(start, with_table, read) == Behind(placements=False, schema=True)


# ---------------------------------------------------------------------- purity


def test_the_plan_loads_no_io_clock_or_randomness() -> None:
    """Nor does it import them itself (``time`` is loaded at start, so the source is read too)."""
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import epochal.replica.coordinator_plan\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(run.stdout)
    assert "epochal.tcm.consistency" in loaded
    assert [m for m in loaded if m.split(".")[0] in FORBIDDEN] == []
    tree = ast.parse(Path(str(coordinator_plan.__file__)).read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert [m for m in imported if m.split(".")[0] in FORBIDDEN] == []


def test_a_keyspace_with_fewer_replicas_than_its_factor_is_unavailable_above_one() -> None:
    """RF 3 on a ring of one node (the keyspace was created before more joined): ONE plans on
    that node, QUORUM and ALL are refused naming the factor and the replicas that exist, as
    Cassandra refuses them."""
    alone = Cluster({"ks": ReplicationParams.simple(3)})
    node = alone.join("A", 100)
    coordinator = Planner(node, "dc1")
    assert coordinator.plan(alone.md, ONE, "ks", TOKEN, write=True).needed == 1
    for level, needed in ((QUORUM, 2), (ALL, 3)):
        for write in (True, False):
            with pytest.raises(Unavailable) as refused:
                coordinator.plan(alone.md, level, "ks", TOKEN, write=write)
            assert (
                f"{level.value} needs {needed} replicas of ks (replication factor 3) but only 1 "
                f"own token {TOKEN}" in refused.value.message
            )
