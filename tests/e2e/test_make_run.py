"""`make run`'s program, end to end: 3 members up, schema changes committed, the report printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_dev_cluster_commits_schema_changes_and_reports(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochal.cms.devcluster",
            "--exit",
            "--data-dir",
            str(tmp_path / "dc"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for kind in ("create_keyspace", "create_table", "alter_table", "drop_table"):
        assert f"committed {kind}" in out
    assert "leader: cms" in out
    assert out.count(" follower ") == 2 and out.count(" leader ") >= 1
    assert "epoch 6    slot" in out  # InitializeCMS + five schema changes, in the log
    assert "InitializeCMS(cms1, cms2, cms3)" in out
