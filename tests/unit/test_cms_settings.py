"""Every CMS setting comes from a flag or an environment variable, and bad ones are refused."""

from __future__ import annotations

import pytest

from epochal.cms.settings import parse_members, settings_from

MEMBERS = "cms1=127.0.0.1:7001,cms2=127.0.0.1:7002,cms3=127.0.0.1:7003"


def test_flags_win_over_environment_which_wins_over_defaults() -> None:
    env = {
        "EPOCHAL_CMS_MEMBER_ID": "cms2",
        "EPOCHAL_CMS_MEMBERS": MEMBERS,
        "EPOCHAL_CMS_SNAPSHOT_FREQUENCY": "50",
        "EPOCHAL_CMS_DB": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    }
    settings = settings_from(["--snapshot-frequency", "7"], env)
    assert settings.member_id == "cms2"
    assert settings.snapshot_frequency == 7
    assert settings.listen_address == "127.0.0.1:7002"
    assert settings.schema == "cms_cms2"
    assert settings.peers == {"cms1": "127.0.0.1:7001", "cms3": "127.0.0.1:7003"}
    default = settings_from(["--member-id", "cms1", "--members", MEMBERS], {})
    assert default.db_url == "sqlite:///var/cms1/cms.db"
    assert default.schema is None
    assert default.snapshot_frequency == 100


def test_trace_dir_falls_back_to_epochal_trace_dir() -> None:
    env = {"EPOCHAL_TRACE_DIR": "/tmp/spans"}
    settings = settings_from(["--member-id", "cms1", "--members", MEMBERS], env)
    assert settings.trace_dir == "/tmp/spans"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--members", MEMBERS], "--member-id"),
        (["--member-id", "cms9", "--members", MEMBERS], "not in --members"),
        (["--member-id", "cms1", "--members", "cms1:7001"], "expected id=host:port"),
        (["--member-id", "cms1", "--members", MEMBERS, "--snapshot-frequency", "0"], "> 0"),
        (["--member-id", "cms1", "--members", MEMBERS, "--batch-linger-ms", "-1"], ">= 0"),
        (["--member-id", "cms1", "--members", MEMBERS, "--leader-vote-delay-ms", "-5"], ">= 0"),
        (
            ["--member-id", "cms1", "--members", MEMBERS, "--leader-votes-small-slots-up-to", "-1"],
            ">= 0",
        ),
        (
            ["--member-id", "cms1", "--members", MEMBERS, "--election-timeout-ms", "60"],
            "twice",
        ),
    ],
)
def test_bad_settings_are_refused_with_a_clear_message(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from(argv, {})


def test_a_member_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_members("a=127.0.0.1:1,a=127.0.0.1:2")


def test_a_zero_group_commit_window_turns_it_off() -> None:
    settings = settings_from(
        ["--member-id", "cms1", "--members", MEMBERS, "--batch-linger-ms", "0"], {}
    )
    assert settings.batch_linger_ms == 0
    assert settings_from(["--member-id", "cms1", "--members", MEMBERS], {}).batch_linger_ms > 0
