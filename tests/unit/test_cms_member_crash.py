"""A broken invariant of the Paxos core ends the CMS member (TigerBeetle's rule: a broken
invariant is a crash, never a failed call or a task that dies quietly)."""

from __future__ import annotations

import pytest

from epochal.cms import shell_support as member
from epochal.errors import NotLeader
from epochal.paxos import ReadyProtocolError


def test_an_assertion_of_the_core_is_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    ended: list[tuple[str, int]] = []
    monkeypatch.setattr(member, "fatal", lambda message, code: ended.append((message, code)))
    with member.crash_on_broken_invariant():
        raise ReadyProtocolError("take_ready with 256 Readies not advanced")
    assert len(ended) == 1
    message, code = ended[0]
    assert "invariant broke" in message and "256 Readies" in message
    assert code == member.EXIT_INVARIANT_BROKEN


def test_an_expected_error_is_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(member, "fatal", lambda *_: pytest.fail("fatal for an expected error"))
    with pytest.raises(NotLeader), member.crash_on_broken_invariant():
        raise NotLeader("cms2")
