"""Fixtures of the integration tests, built from the harness (tests/harness)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.devcluster.cms import LocalCMS
from tests.harness import local_cms


@pytest.fixture
def cms(tmp_path: Path) -> Iterator[LocalCMS]:
    """Three CMS members on SQLite with quick elections, started; all killed afterwards."""
    with local_cms(tmp_path / "cms") as started:
        yield started
