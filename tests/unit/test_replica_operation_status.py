"""What a failed topology operation's status says (epochal.replica.operations): an expected
error's own message, and of a bug only that it was one — its Python text stays in the log."""

from __future__ import annotations

from epochal.errors import OperationRefused
from epochal.replica.operations import _why


def test_a_refusal_is_said_as_it_is_and_a_bug_without_its_text() -> None:
    assert "no sequence to resume" in _why(OperationRefused("no sequence to resume"))
    said = _why(OverflowError("Python int too large to convert to SQLite INTEGER"))
    assert "internal error" in said and "SQLite" not in said and "OverflowError" not in said
