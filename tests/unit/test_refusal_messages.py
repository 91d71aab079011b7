"""What a refusal's message may echo of its input (epochal.wire.status): each run of it without
spaces to its first 200 characters then "…", the whole to 2 KiB of UTF-8 — so that a status,
whose details travel percent-encoded in gRPC metadata (refused by a client past 16 KiB, maybe
past 8 KiB), reaches the caller as the refusal it is, not as RESOURCE_EXHAUSTED "received
metadata size exceeds hard limit". ``abort`` (every status a service answers) and the in-band
encoders (a forwarded commit's outcome here) bound it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.cms.codec import outcome_to_proto
from epochal.errors import InvalidRequest, Rejected
from epochal.replica import status as replica_status
from epochal.wire import status
from epochal.wire.status import abort, trailers_of

LONG = "k" * 65_536
ELLIPSIS = "\u2026"


def test_a_short_message_is_kept_whole() -> None:
    message = "keyspace 'ks' does not exist at epoch 7; create it first"
    assert status.bounded_message(message) == message


def test_an_echoed_name_keeps_its_start_and_the_message_keeps_its_own_words() -> None:
    shown = status.bounded_message(f"keyspace {LONG!r} does not exist at epoch 7; create it first")
    assert shown == f"keyspace '{'k' * 199}{ELLIPSIS} does not exist at epoch 7; create it first"


@pytest.mark.parametrize(
    "message",
    ["a " * 40_000, "\u00e9 " * 40_000, "\U0001f600 " * 40_000, "\u00e9" * 40_000],
    ids=["ascii words", "accented words", "emoji words", "one accented run"],
)
def test_the_whole_message_stays_under_2_kib_of_utf8_whatever_it_echoes(message: str) -> None:
    shown = status.bounded_message(message)
    assert len(shown.encode("utf-8")) <= status.MAX_MESSAGE_BYTES == 2048
    assert shown.endswith(ELLIPSIS) and message.startswith(shown[:100])


@given(st.text())
def test_any_message_is_bounded_and_encodable(message: str) -> None:
    shown = status.bounded_message(message)
    # Encoded strictly: nothing unencodable (a lone surrogate) is left.
    assert len(shown.encode("utf-8")) <= status.MAX_MESSAGE_BYTES == 2048


class Context:
    """A servicer context that records the status it is ended with."""

    def __init__(self) -> None:
        self.trailers: tuple[tuple[str, str], ...] = ()
        self.status: tuple[grpc.StatusCode, str] | None = None

    def set_trailing_metadata(self, trailers: tuple[tuple[str, str], ...]) -> None:
        self.trailers = trailers

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.status = (code, details)
        raise grpc.aio.AbortError()


def test_a_status_echoes_at_most_the_start_of_its_input() -> None:
    context = Context()
    error = Rejected("unknown_keyspace", f"keyspace {LONG!r} does not exist at epoch 7")
    with pytest.raises(grpc.aio.AbortError):
        asyncio.run(abort(context, error, replica_status.STATUS, 7))  # type: ignore[arg-type]
    assert context.status is not None
    code, details = context.status
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert details == f"keyspace '{'k' * 199}{ELLIPSIS} does not exist at epoch 7"
    assert context.trailers == trailers_of(error, 7)  # the rule and the epoch, as before


def test_a_forwarded_commits_refusal_echoes_at_most_the_start_of_its_input() -> None:
    outcome = outcome_to_proto(InvalidRequest(f"name {LONG!r} is not valid"), 0)
    assert outcome.error.code == "INVALID_ARGUMENT"
    assert outcome.error.message == f"name '{'k' * 199}{ELLIPSIS} is not valid"


ROOT = Path(__file__).resolve().parents[2]
ENDS_A_CALL = re.compile(r"\bcontext\.(abort|set_details|set_code)\(")


def test_every_status_a_server_sets_goes_through_the_bound() -> None:
    """No module but epochal.wire.status sets a status's details itself (``abort_status`` is
    the one place, and it bounds them)."""
    setters = sorted(
        str(path.relative_to(ROOT))
        for source in (ROOT / "libs", ROOT / "services")
        for path in source.rglob("*.py")
        if "wire/v1" not in path.as_posix() and ENDS_A_CALL.search(path.read_text())
    )
    assert setters == ["libs/wire/status.py"]
