"""The dev cluster supervisor's control requests that fail say why (no process is started:
these are refused before any action)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from epochal.devcluster.supervisor import MAX_REQUEST_BYTES, Supervisor


def answer(supervisor: Supervisor, request: object) -> dict[str, object]:
    line = request if isinstance(request, bytes) else json.dumps(request).encode()
    return asyncio.run(supervisor._answer(line))


def test_requests_without_the_token_unknown_actions_and_adds_before_serving_are_refused(
    tmp_path: Path,
) -> None:
    supervisor = Supervisor(tmp_path / "dev")
    supervisor._token = "secret"
    assert answer(supervisor, {"action": "status"}) == {
        "ok": False,
        "error": "bad or missing control token",
    }
    assert answer(supervisor, {"action": "status", "token": "guess"})["ok"] is False
    assert answer(supervisor, {"action": "reboot", "token": "secret"}) == {
        "ok": False,
        "error": "unknown action 'reboot'",
    }
    assert answer(supervisor, b"x" * (MAX_REQUEST_BYTES + 1)) == {
        "ok": False,
        "error": "request too long",
    }
    # The control server answers this refusal as {"ok": false, "error": "RuntimeError: ..."}.
    with pytest.raises(RuntimeError, match=r"^the cluster is starting, not serving$"):
        answer(supervisor, {"action": "add-replica", "token": "secret"})
