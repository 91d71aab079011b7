"""CMS membership as metadata: candidates, the two-step add, removal, one change at a time, the
voter target by cluster size, and a planner that resumes a reconfiguration in progress."""

from __future__ import annotations

import itertools
import random

import pytest

from epochal.tcm import (
    AddCMSCandidate,
    ClusterMetadata,
    CMSMember,
    CMSRole,
    FinishAddToCMS,
    InitializeCMS,
    Rejected,
    RemoveFromCMS,
    StartAddToCMS,
    Transformation,
    apply_transformation,
    next_reconfiguration,
    target_voters,
)


def one_member() -> ClusterMetadata:
    md = apply_transformation(
        ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),))
    )
    for n in range(2, 6):
        md = apply_transformation(md, AddCMSCandidate(f"cms-{n}", f"127.0.0.1:{n}"))
    return md


def roles(md: ClusterMetadata) -> dict[str, str]:
    return {m.member_id: m.role.value for m in md.cms_members}


def rejected(md: ClusterMetadata, transformation: Transformation) -> Rejected:
    rejection = transformation.validate(md)
    assert rejection is not None, f"{transformation} was accepted"
    return rejection


def test_a_voter_is_added_in_two_steps_write_set_then_read_set() -> None:
    md = one_member()
    assert roles(md) == {
        "cms-1": "voter",
        "cms-2": "learner",
        "cms-3": "learner",
        "cms-4": "learner",
        "cms-5": "learner",
    }
    md = apply_transformation(md, StartAddToCMS("cms-2"))
    assert md.cms_member("cms-2").role is CMSRole.JOINING  # type: ignore[union-attr]
    assert md.cms_voters == {"cms-1"}  # the log goes to it; it counts in no quorum yet
    md = apply_transformation(md, FinishAddToCMS("cms-2"))
    assert md.cms_voters == {"cms-1", "cms-2"}


def test_one_change_at_a_time_and_the_error_names_the_member_in_progress() -> None:
    md = apply_transformation(one_member(), StartAddToCMS("cms-2"))
    for transformation in (StartAddToCMS("cms-3"), RemoveFromCMS("cms-1")):
        rejection = rejected(md, transformation)
        assert rejection.rule == "cms_reconfiguration_in_progress"
        assert "cms-2 is being added" in str(rejection)


def test_removing_an_add_in_progress_cancels_it() -> None:
    md = apply_transformation(one_member(), StartAddToCMS("cms-2"))
    md = apply_transformation(md, RemoveFromCMS("cms-2"))
    assert roles(md)["cms-2"] == "learner" and md.cms_voters == {"cms-1"}


def test_the_last_voter_stays_and_roles_are_checked() -> None:
    md = one_member()
    assert rejected(md, RemoveFromCMS("cms-1")).rule == "last_cms_voter"
    assert rejected(md, FinishAddToCMS("cms-2")).rule == "cms_wrong_role"
    assert rejected(md, StartAddToCMS("cms-1")).rule == "cms_wrong_role"
    assert rejected(md, StartAddToCMS("cms-9")).rule == "cms_member_not_found"
    assert rejected(md, AddCMSCandidate("cms-2", "127.0.0.1:9")).rule == "cms_member_exists"
    assert rejected(md, AddCMSCandidate("cms-9", "127.0.0.1:2")).rule == "cms_address_taken"


@pytest.mark.parametrize(
    ("nodes", "voters"),
    [(0, 1), (1, 1), (2, 1), (3, 3), (5, 3), (6, 5), (100, 5), (101, 9), (5000, 9)],
)
def test_the_voter_target_follows_the_seeds_scale(nodes: int, voters: int) -> None:
    assert target_voters(nodes) == voters


def drive(md: ClusterMetadata, target: int, down: frozenset[str] = frozenset()) -> list[str]:
    steps = []
    for _ in range(20):
        step = next_reconfiguration(md, target, down)
        if step is None:
            return steps
        md = apply_transformation(md, step)
        steps.append(str(step))
    raise AssertionError(f"no fixed point: {steps}")


def test_the_planner_grows_and_shrinks_one_member_at_a_time() -> None:
    md = one_member()
    assert drive(md, 3) == [
        "StartAddToCMS(cms-2)",
        "FinishAddToCMS(cms-2)",
        "StartAddToCMS(cms-3)",
        "FinishAddToCMS(cms-3)",
    ]
    for step in drive(md, 5):
        md = apply_transformation(md, _parse(step))
    assert md.cms_voters == {f"cms-{n}" for n in range(1, 6)}
    assert drive(md, 3) == ["RemoveFromCMS(cms-5)", "RemoveFromCMS(cms-4)"]
    # Down voters go first, after a live learner has taken their place.
    md = apply_transformation(md, RemoveFromCMS("cms-5"))
    assert drive(md, 4, down=frozenset({"cms-1"})) == [
        "StartAddToCMS(cms-5)",
        "FinishAddToCMS(cms-5)",
        "RemoveFromCMS(cms-1)",
    ]


def test_a_reconfiguration_in_progress_is_resumed_first() -> None:
    md = apply_transformation(one_member(), StartAddToCMS("cms-4"))
    assert str(next_reconfiguration(md, 1)) == "FinishAddToCMS(cms-4)"


def test_any_two_consecutive_voter_sets_have_intersecting_majorities() -> None:
    rng = random.Random(7)
    md = one_member()
    kinds = (StartAddToCMS, FinishAddToCMS, RemoveFromCMS)
    changes = 0
    for _ in range(2000):
        transformation = rng.choice(kinds)(f"cms-{rng.randint(1, 5)}")
        if transformation.validate(md) is not None:
            continue
        before, md = md.cms_voters, apply_transformation(md, transformation)
        after = md.cms_voters
        assert len(before ^ after) <= 1
        for q1, q2 in itertools.product(_majorities(before), _majorities(after)):
            assert q1 & q2, (before, after)
        changes += before != after
    assert changes > 50


def _majorities(voters: frozenset[str]) -> list[set[str]]:
    size = len(voters) // 2 + 1
    return [set(c) for c in itertools.combinations(sorted(voters), size)]


def _parse(text: str) -> Transformation:
    kind, member = text.rstrip(")").split("(")
    return {"StartAddToCMS": StartAddToCMS, "FinishAddToCMS": FinishAddToCMS}[kind](member)
