"""The replica's join settings: on by default, off by ``--no-auto-join`` or the environment;
tokens by ``--num-tokens`` or ``--initial-tokens``, checked when the settings are built."""

from __future__ import annotations

import pytest

from epochal.replica.settings import settings_from

BASE = ["--listen", "127.0.0.1:9001", "--cms", "127.0.0.1:7001"]


def test_auto_join_is_on_by_default_and_turned_off_by_flag_or_environment() -> None:
    assert settings_from(BASE, {}).auto_join is True
    assert settings_from([*BASE, "--no-auto-join"], {}).auto_join is False
    assert settings_from([*BASE, "--auto-join", "false"], {}).auto_join is False
    assert settings_from(BASE, {"EPOCHAL_REPLICA_AUTO_JOIN": "false"}).auto_join is False
    # A flag wins over the environment.
    on = settings_from([*BASE, "--auto-join"], {"EPOCHAL_REPLICA_AUTO_JOIN": "0"})
    assert on.auto_join is True


def test_join_tokens_come_from_initial_tokens_else_num_tokens_are_allocated() -> None:
    default = settings_from(BASE, {})
    assert (default.num_tokens, default.join_tokens) == (16, ())
    explicit = settings_from([*BASE, "--initial-tokens", "-5, 10,42"], {})
    assert explicit.join_tokens == (-5, 10, 42)
    assert settings_from([*BASE, "--num-tokens", "4"], {}).num_tokens == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-tokens", "0"], "--num-tokens must be > 0"),
        (["--num-tokens", "257"], "--num-tokens must be 1..256"),
        (["--initial-tokens", "1,x"], "--initial-tokens: 'x'"),
        (["--initial-tokens", "1,1"], "--initial-tokens must be distinct"),
        (["--initial-tokens", str(-(1 << 63))], "outside"),
    ],
)
def test_bad_join_settings_are_refused_with_a_clear_message(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from([*BASE, *argv], {})
