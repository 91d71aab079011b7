"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.replica.storage import ReplicaStorage


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[ReplicaStorage]:
    """A replica's storage on a fresh SQLite file (``local_node``'s tests drive a replica on it)."""
    opened = ReplicaStorage(f"sqlite:///{tmp_path}/replica.db")
    yield opened
    opened.close()
