"""The ``epochal`` command line without a cluster: where its options come from (flag, then
environment, then the config file), global options before or after the command, one-line usage
errors with exit code 2, ``--version``, an address nothing answers at, the progress and final
lines of an operation, and ``epochal reconcile status`` against stand-in reconcilers on 127.0.0.1
(each a grpc.aio server answering ``Reconciler/Status``): every range by keyspace then range, as
its owner reports it, and a summary; those that answered when another did not, and exit code 1.
The commands against a real cluster: tests/e2e/test_cli.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
import pytest

from epochal.admin import OperationStatus
from epochal.cli import main
from epochal.cli.app import cli
from epochal.cli.operations import describe_status, progress_line
from epochal.cli.options import DEFAULT_TIMEOUT_S, Options, UsageProblem, resolve
from epochal.mtrack import make_hlc
from epochal.runtime.processes import free_ports
from epochal.wire.v1 import reconciler_pb2 as pb

from .fake_reconciler import reconciler, report

NO_CONFIG = {"XDG_CONFIG_HOME": "/nonexistent"}


def options_of(argv: list[str], env: dict[str, str]) -> Options:
    """The options ``epochal <argv>`` resolves, under ``env``."""
    seen: list[Options] = []
    command = cli.get_command(click.Context(cli), "ring")
    assert command is not None
    original = command.callback

    def capture() -> int:
        seen.append(resolve(click.get_current_context(), env))
        return 0

    command.callback = capture
    try:
        cli.main(args=argv, prog_name="epochal", standalone_mode=False)
    finally:
        command.callback = original
    return seen[0]


def test_an_option_comes_from_the_flag_then_the_environment_then_the_config_file(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('cluster = ["f:1", "f:2"]\noutput = "yaml"\ntimeout_s = 7\n')
    env = {**NO_CONFIG, "EPOCHAL_CONFIG": str(config)}
    assert options_of(["ring"], env) == Options(("f:1", "f:2"), "yaml", 7.0, False, str(config))
    env["EPOCHAL_CLUSTER"] = "e:1"
    assert options_of(["ring"], env).cluster == ("e:1",)
    assert options_of(["--cluster", "g:1", "ring"], env).cluster == ("g:1",)
    assert options_of(["ring", "--cluster", "g:2", "-o", "json"], env).output == "json"
    # Given before and after the command: the later one wins.
    assert options_of(["-c", "a:1", "ring", "-c", "b:1"], env).cluster == ("b:1",)
    defaults = options_of(["ring", "-q"], NO_CONFIG)
    assert defaults == Options((), "table", DEFAULT_TIMEOUT_S, True, "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cluster = [", "is not TOML"),
        ('clusters = "a:1"', "unknown key 'clusters'"),
        ('cluster = "nohost"', "expected host:port"),
        ('output = "xml"', "output is one of table, json, yaml"),
        ("timeout_s = -1", "more than 0 seconds"),
        ("cluster = 5", "expected host:port,... or a list"),
    ],
)
def test_a_bad_config_file_is_a_usage_error(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text + "\n")
    with pytest.raises(UsageProblem, match=message):
        options_of(["ring", "--config", str(config)], NO_CONFIG)
    with pytest.raises(UsageProblem, match="does not exist"):
        options_of(["ring", "--config", str(tmp_path / "missing.toml")], NO_CONFIG)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["fly"], "No such command 'fly'"),
        (["status", "--bogus"], "No such option '--bogus'"),
        (["move", "node-1"], "Missing option '--tokens'"),
        (["status", "-o", "xml"], "'xml' is not one of"),
        (["status"], "name the cluster: --cluster"),
        (["cms", "reconfigure"], "give VOTERS"),
        (["cms", "reconfigure", "3", "--cancel"], "not ['--cancel']"),
        (["log", "--from", "5", "--to", "2"], "--to 2 is before --from 5"),
        (["status", "--cluster", "nohost"], "bad --cluster address 'nohost'"),
        (["bootstrap", "node-1", "--tokens", "1,x"], "tokens are integers"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_code_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in NO_CONFIG.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("EPOCHAL_CLUSTER", raising=False)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert said in line and line.startswith("epochal"), line


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("epochal, version ")
    assert main(["status", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--cluster" in shown and "--output" in shown


def test_an_address_nothing_answers_at_is_exit_code_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = f"127.0.0.1:{free_ports(1)[0]}"
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    assert main(["ring", "--cluster", nobody, "--timeout-s", "2"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"epochal: {nobody} did not answer (UNAVAILABLE"), line


def test_the_progress_and_final_status_of_an_operation() -> None:
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
    shown = describe_status(status)
    assert "3/8 ranges, 2.5 MB" in shown and "reconciled  5 log entries" in shown
    failed = describe_status(OperationStatus(node_id="node-4", state="failed", message="why"))
    assert "message     why" in failed and "operation   - (step -, failed)" in failed


# --------------------------------------------------------------------- epochal reconcile status

BOUND = make_hlc(1_700_000_000_123, 2)  # 2023-11-14T22:13:20.123Z, logical 2


async def reconcile_status(*addresses: str, output: str = "table") -> tuple[int, list[str], str]:
    """``epochal reconcile status --reconciler <addresses>`` run in a thread (it runs its own
    event loop) while the stand-ins serve on this one: exit code, stdout lines, stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return main(["reconcile", "status", "--reconciler", ",".join(addresses), "-o", output])

    code = await asyncio.to_thread(call)
    return code, out.getvalue().splitlines(), err.getvalue()


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
    assert (code, err) == (0, "")
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


def test_reconcile_status_shows_those_that_answered_and_names_the_others() -> None:
    nobody = f"127.0.0.1:{free_ports(1)[0]}"
    answer = pb.ReconcilerStatus(
        reconciler_id="r1", epoch=30, ranges=[report("ks", -100, 0, "r1", 11, rounds=3)]
    )

    async def serve(output: str) -> tuple[int, list[str], str]:
        async with reconciler(answer) as one:
            return await reconcile_status(one, nobody, output=output)

    code, lines, err = asyncio.run(serve("table"))
    assert (code, err) == (1, ""), (code, lines, err)
    assert lines[0].startswith("reconcilers: r1 at 127.0.0.1:")
    assert lines[1].startswith(f"did not answer: {nobody} (UNAVAILABLE: ")
    assert lines[2].startswith("KEYSPACE  RANGE")
    assert lines[-1] == "1 ranges: 1 owned (r1 1), 0 unowned; max lag -"
    code, lines, err = asyncio.run(serve("json"))
    shown = json.loads("\n".join(lines))
    assert code == 1 and [u["address"] for u in shown["unreachable"]] == [nobody]
    assert [(r["keyspace"], r["left"], r["right"], r["owner"]) for r in shown["ranges"]] == [
        ("ks", -100, 0, "r1")
    ]


def test_reconcile_status_exits_1_when_no_reconciler_answers() -> None:
    nobody = f"127.0.0.1:{free_ports(1)[0]}"
    code, lines, err = asyncio.run(reconcile_status(nobody))
    assert code == 1 and err == ""
    assert lines[:2] == [
        "reconcilers: none answered",
        f"did not answer: {nobody} (UNAVAILABLE: " + lines[1].split("(UNAVAILABLE: ", 1)[1],
    ]


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
    assert (code, err) == (0, "")
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


# --------------------------------------------------------------------- printing


def test_tables_print_text_as_it_is_and_whole_lines_when_not_a_terminal() -> None:
    from epochal.cli.output import render, table

    wide = "x" * 300
    shown = render(
        ["[bold]not markup[/bold] (0, 5]", table(["NAME", "> N"], [["[red]a", 7], [wide, None]])]
    )
    lines = shown.splitlines()
    assert lines[0] == "[bold]not markup[/bold] (0, 5]"
    assert lines[2].split() == ["NAME", "N"]
    assert lines[3].split() == ["[red]a", "7"]
    assert lines[4].split() == [wide, "-"]  # not wrapped, an empty cell shown as "-"
    assert all(line == line.rstrip() for line in lines)


def test_json_and_yaml_have_the_same_shape() -> None:
    import yaml

    from epochal.cli.output import emit

    data = {"epoch": 7, "nodes": [{"id": "node-1", "up": True, "epoch": None}]}
    printed: list[str] = []
    emit("json", data, lambda: [], printed.append)
    emit("yaml", data, lambda: [], printed.append)
    assert json.loads(printed[0]) == data == yaml.safe_load(printed[1])


def test_replaying_the_log_refuses_a_gap_and_an_entry_it_cannot_apply() -> None:
    from epochal.cli.failures import Refused
    from epochal.cli.log_commands import replay
    from epochal.tcm import CMSMember, InitializeCMS
    from epochal.wire.log import LogRecord

    first = LogRecord(1, "e1", b"", InitializeCMS(members=(CMSMember("cms1", "127.0.0.1:1"),)))
    assert replay([first]).epoch == 1
    with pytest.raises(Refused, match="skips from epoch 1 to 3"):
        replay([first, LogRecord(3, "e3", b"", None, "unknown kind")])
    with pytest.raises(Refused, match=r"cannot be applied by this CLI \(unknown kind\)"):
        replay([first, LogRecord(2, "e2", b"", None, "unknown kind")])


# --------------------------------------------------------------------- cms reconfigure's steps


def test_reconfigure_grows_with_answering_candidates_in_id_order() -> None:
    from epochal.cli.reconfigure import ADD, next_change

    voters, learners = ["cms1", "cms2", "cms3"], ["cms10", "cms4", "cms9"]
    live = {"cms1", "cms2", "cms3", "cms9", "cms10"}  # cms4 does not answer
    assert next_change(voters, learners, live, "cms1", 4) == (ADD, "cms9")
    assert next_change(voters, learners, live, "cms1", 3) is None


def test_reconfigure_shrinks_dead_voters_first_then_the_highest_id_and_the_leader_last() -> None:
    from epochal.cli.reconfigure import REMOVE, next_change

    voters = ["cms1", "cms2", "cms3", "cms9", "cms10"]
    assert next_change(voters, [], {"cms1", "cms3", "cms10"}, "cms1", 3) == (REMOVE, "cms9")
    assert next_change(voters, [], set(voters), "cms10", 4) == (REMOVE, "cms9")
    assert next_change(["cms1", "cms2"], [], {"cms1", "cms2"}, "cms2", 1) == (REMOVE, "cms1")
    assert next_change(["cms1"], [], {"cms1"}, "cms1", 1) is None


@pytest.mark.parametrize(
    ("voters", "learners", "live", "target", "said"),
    [
        (["cms1", "cms2", "cms3"], [], {"cms1"}, 2, "1 of 2 voters answering, no majority"),
        (["cms1", "cms2", "cms3"], ["cms4"], {"cms1", "cms4"}, 4, "2 of 4 voters answering"),
        (["cms1", "cms2", "cms3"], ["cms4"], {"cms1", "cms2", "cms3"}, 4, "no CMS candidate"),
    ],
)
def test_reconfigure_refuses_a_step_without_a_live_majority_or_a_candidate(
    voters: list[str], learners: list[str], live: set[str], target: int, said: str
) -> None:
    from epochal.cli.failures import Refused
    from epochal.cli.reconfigure import next_change

    with pytest.raises(Refused, match=said):
        next_change(voters, learners, live, "cms1", target)
