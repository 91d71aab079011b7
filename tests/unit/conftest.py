"""Fixtures the unit tests share. Their servers run in the test's own process, in plain text:
every channel a unit test opens is plain text (the real-process tests run with mutual TLS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.devcluster.pki import TLS_ENV
from epochal.replica.storage import ReplicaStorage
from epochal.wire import channels
from epochal.wire.tls import INSECURE


@pytest.fixture(autouse=True)
def plain_text(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = channels.process_security() if channels.has_process_security() else None
    channels.use(INSECURE)
    for name in TLS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EPOCHAL_INSECURE", "true")  # the SDK's and the CLI's too
    yield
    channels.use(before)


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[ReplicaStorage]:
    """A replica's storage on a fresh SQLite file (``local_node``'s tests drive a replica on it)."""
    opened = ReplicaStorage(f"sqlite:///{tmp_path}/replica.db")
    yield opened
    opened.close()
