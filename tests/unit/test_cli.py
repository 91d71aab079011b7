"""The ``epochal`` command line: what each command asks of the replica, and what it prints;
``epochal reconcile status`` against stand-in reconcilers on 127.0.0.1 (each a grpc.aio server
answering ``Reconciler/Status``): every range by keyspace then range, as its owner reports it,
and a summary; exit status 2 when a reconciler cannot be reached."""

from __future__ import annotations

import asyncio

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
from epochal.cli import call_for, describe, main, parser, progress_line, run
from epochal.mtrack import make_hlc
from epochal.runtime.processes import free_ports
from epochal.wire.v1 import reconciler_pb2 as pb

from .fake_reconciler import reconciler, report


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


# --------------------------------------------------------------------- epochal reconcile status


def test_reconcile_status_takes_reconcilers_from_the_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flagged = parser().parse_args(["reconcile", "status", "--reconciler", "a:1, b:2"])
    assert (flagged.command, flagged.reconcile_command) == ("reconcile", "status")
    assert flagged.reconciler == ("a:1", "b:2")
    monkeypatch.setenv("EPOCHAL_RECONCILER", "c:3")
    assert parser().parse_args(["reconcile", "status"]).reconciler == ("c:3",)


@pytest.mark.parametrize(
    "argv",
    [
        ["reconcile", "status"],  # none named
        ["reconcile", "status", "--reconciler", "nohost"],
        ["reconcile"],
        ["reconcile", "start"],
    ],
)
def test_a_malformed_reconcile_command_line_is_refused(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EPOCHAL_RECONCILER", raising=False)
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2


BOUND = make_hlc(1_700_000_000_123, 2)  # 2023-11-14T22:13:20.123Z, logical 2


async def reconcile_status(*addresses: str) -> tuple[int, list[str], list[str]]:
    """``epochal reconcile status --reconciler <addresses>``: exit status, stdout, stderr."""
    args = parser().parse_args(["reconcile", "status", "--reconciler", ",".join(addresses)])
    out: list[str] = []
    err: list[str] = []
    code = await run(args, out.append, err.append)
    return code, "\n".join(out).splitlines(), err


def test_reconcile_status_shows_each_range_as_its_owner_reports_it() -> None:
    """r1 owns (-100, 0] of ks, r2 owns (0, 100]; each reports both, knowing only its own bound;
    (100, -100] and the range of keyspace ab are nobody's."""
    first = pb.ReconcilerStatus(
        reconciler_id="r1",
        epoch=30,
        ranges=[
            report("ks", 100, -100),
            report("ks", 0, 100, "r2", 12),
            report(
                "ks",
                -100,
                0,
                "r1",
                11,
                low_bound=BOUND,
                lag_ms=650,
                last_outcome="advanced",
                rounds=14,
            ),
            report("ab", 5, 6),
        ],
    )
    second = pb.ReconcilerStatus(
        reconciler_id="r2",
        epoch=30,
        ranges=[
            report("ks", -100, 0, "r1", 11),
            report("ks", 0, 100, "r2", 12, last_outcome="refused", rounds=2),
        ],
    )

    async def serve_both() -> tuple[int, list[str], list[str]]:
        async with reconciler(first) as one, reconciler(second) as two:
            return await reconcile_status(one, two)

    code, lines, err = asyncio.run(serve_both())
    assert (code, err) == (0, [])
    assert lines[0].startswith("reconcilers: r1 at 127.0.0.1:") and "r2 at 127.0.0.1:" in lines[0]
    assert "(epoch 30)" in lines[0]
    assert lines[1:] == [
        "KEYSPACE  RANGE        OWNER  LEASE  LOW BOUND                      LAG  OUTCOME   ROUNDS",
        "ab        (5, 6]       -          -  -                                -  -              0",
        "ks        (-100, 0]    r1        11  2023-11-14T22:13:20.123Z+2  650 ms  advanced      14",
        "ks        (0, 100]     r2        12  -                                -  refused        2",
        "ks        (100, -100]  -          -  -                                -  -              0",
        "4 ranges: 2 owned (r1 1, r2 1), 2 unowned; max lag 650 ms",
    ]


def test_reconcile_status_exits_2_naming_a_reconciler_it_cannot_reach() -> None:
    nobody = f"127.0.0.1:{free_ports(1)[0]}"
    code, lines, err = asyncio.run(reconcile_status(nobody))
    assert (code, lines) == (2, [])
    assert err[0].startswith(f"epochal reconcile status: reconciler {nobody}: "), err


def test_reconcile_status_lists_cohorts_and_the_replicas_left_out() -> None:
    """r1's range (-100, 0] has a cohort of node-2 and node-3 (node-1 cut off): a cohorts table
    follows the ranges, and the summary counts cohorts and names who did not answer."""
    ranged = report("ks", -100, 0, "r1", 11, last_outcome="cohort", rounds=9)
    ranged.unreachable.append("node-1")
    ranged.cohorts.append(
        pb.CohortReport(
            id="2a",
            members=["node-2", "node-3"],
            low=0,
            high=BOUND,
            mutations=1500,
            bytes=2_500_000,
            formed_unix_ms=1_000,
            holders=["node-2", "node-3"],
        )
    )
    status = pb.ReconcilerStatus(reconciler_id="r1", epoch=30, ranges=[ranged])

    async def serve() -> tuple[int, list[str], list[str]]:
        async with reconciler(status) as one:
            return await reconcile_status(one)

    code, lines, err = asyncio.run(serve())
    assert (code, err) == (0, [])
    header = next(i for i, line in enumerate(lines) if "COHORT" in line)
    assert lines[header].split() == [
        "KEYSPACE", "RANGE", "COHORT", "MEMBERS", "HIGH", "FOLDED", "AGE", "HELD", "BY",
    ]  # fmt: skip
    row = lines[header + 1]
    assert row.split()[:5] == ["ks", "(-100,", "0]", "2a", "node-2,node-3"]
    assert "2023-11-14T22:13:20.123Z+2" in row
    assert "1500 (2.5 MB)" in row and row.endswith("node-2,node-3")
    assert lines[-1] == (
        "1 ranges: 1 owned (r1 1), 0 unowned; max lag -; 1 cohorts; unreachable: node-1"
    )
