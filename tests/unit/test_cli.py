"""The ``epochal`` command line: what each command asks of the replica, and what it prints."""

from __future__ import annotations

import pytest

from epochal.admin import (
    AdminRequest,
    Bootstrap,
    BootstrapAbort,
    BootstrapResume,
    Cancel,
    Cleanup,
    Decommission,
    DecommissionAbort,
    Move,
    OperationStatus,
    Remove,
    Replace,
    Resume,
    Status,
)
from epochal.cli import call_for, describe, parser, progress_line


def asked(*argv: str) -> AdminRequest:
    return call_for(parser().parse_args(["--replica", "127.0.0.1:1", *argv]))


@pytest.mark.parametrize(
    ("argv", "request_"),
    [
        (["status"], Status()),
        (["bootstrap"], Bootstrap()),
        (["bootstrap", "--num-tokens", "8"], Bootstrap(num_tokens=8)),
        (["bootstrap", "--tokens", "-5", "7"], Bootstrap(tokens=(-5, 7))),
        (["bootstrap", "resume"], BootstrapResume()),
        (["bootstrap", "abort"], BootstrapAbort()),
        (["decommission"], Decommission()),
        (["decommission", "abort"], DecommissionAbort()),
        (["removenode", "node-3"], Remove(node_id="node-3")),
        (["replace", "node-3"], Replace(replaced="node-3")),
        (["move", "1", "-2"], Move(tokens=(1, -2))),
        (["resume"], Resume()),
        (["resume", "node-3"], Resume(node_id="node-3")),
        (["cancel", "node-3"], Cancel(node_id="node-3")),
        (["cleanup"], Cleanup()),
    ],
)
def test_each_command_calls_its_admin_method(argv: list[str], request_: AdminRequest) -> None:
    assert asked(*argv) == request_


@pytest.mark.parametrize("argv", [[], ["move"], ["replace"], ["bootstrap", "again"], ["fly"]])
def test_a_malformed_command_line_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        parser().parse_args(["--replica", "127.0.0.1:1", *argv])
    assert refused.value.code == 2


def test_the_status_shows_progress_and_the_failure() -> None:
    status = OperationStatus(
        node_id="node-4",
        kind="join",
        step="start",
        state="streaming",
        streamed_bytes=2_500_000,
        ranges_done=3,
        ranges_total=8,
        eta_s=12.4,
        reconciled_mutations=5,
        barrier_level="EACH_QUORUM",
        message="",
    )
    line = progress_line(status)
    assert line == "join of node-4: start done, streaming, 3/8 ranges, 2.5 MB, ETA 12 s"
    shown = describe(status)
    assert "3/8 ranges, 2.5 MB" in shown and "reconciled  5 log entries" in shown
    failed = describe(OperationStatus(node_id="node-4", state="failed", message="why"))
    assert "message     why" in failed and "operation   - (step -, failed)" in failed
