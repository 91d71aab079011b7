"""`make run`'s program, end to end: 3 CMS members and 3 replicas up, the ring formed, rows
written and read back at QUORUM through the SDK, the status and the metadata log printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_dev_cluster_forms_a_ring_writes_reads_and_reports(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochal.replica.devcluster",
            "--exit",
            "--data-dir",
            str(tmp_path / "dc"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "the replicas joined a new ring" in out
    assert out.count("wrote 3 rows of") == 3
    assert "read 3 rows of grace at QUORUM" in out
    assert out.count("  joined   epoch") == 3 and out.count("ready=True") == 3
    assert out.count(" leader ") == 1 and out.count(" follower ") == 2
    assert "InitializeCMS(cms1, cms2, cms3)" in out
    assert "CreateKeyspace(demo, SimpleStrategy(rf=3), tracked)" in out
    assert out.count("AdvanceSequence(node-") == 9  # three joins, START, MID and FINISH each
