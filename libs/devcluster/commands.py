"""``epochal dev``: a local cluster you start, grow, look at and stop like a service.

Every command works on one data directory (``--data-dir``, ``EPOCHAL_DEV_DATA_DIR``, default
``var/devcluster``), from any terminal:

- ``up``: start a supervisor in the background (``epochal.devcluster.supervisor``) that starts
  the CMS members, replicas and reconcilers on 127.0.0.1 with SQLite; return once the cluster
  serves (every replica joined the ring by itself), with where everything is. On a data
  directory whose cluster was stopped, the same cluster starts again with its data (``--fresh``
  wipes it first). On one whose cluster runs, it says so.
- ``status``: what runs, where, its pid and its log; the replicas' node ids and ring states.
- ``add-replica``: a replica that joins the ring by itself; waits until it has joined.
- ``add-cms``: a CMS member that starts as a candidate (``--voter``: and becomes a voter).
- ``down``: stop every process at once, bounded; none is left running.
- ``run``: ``up`` of a new cluster (the data directory is wiped first) in the foreground plus a
  demo workload (``make run``; ``python -m epochal.devcluster`` alone); Ctrl-C stops it.

Every process writes its spans (OTLP-JSON lines, a file per process) to ``traces/`` in the data
directory, or to the folder ``EPOCHAL_TRACE_DIR`` names when the environment sets it; ``up`` and
``run`` say where. ``--no-traces`` turns the files off. The standard ``OTEL_*`` variables reach
the processes too (an OTLP endpoint, the sampler).

Exit status: 0 when done (``up`` on a running cluster too), 1 when it failed or (``status``)
the cluster is not running, 2 for a bad command line (``epochal dev`` alone prints the help).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from epochal.admin_client import AdminClient
from epochal.cms_admin import add_voter
from epochal.cms_client import CMSClient
from epochal.devcluster.pki import TLS_DIR, DevPki, use_pki
from epochal.devcluster.state import ClusterRecord, DataDir, RecordedPid, started
from epochal.devcluster.supervisor import Shape, Supervisor
from epochal.errors import EpochalError
from epochal.runtime.flags import SHARED_ENV
from epochal.runtime.processes import PARENT_PID_ENV, STOP_TIMEOUT_S, tail

DEFAULT_DATA_DIR = "var/devcluster"
DATA_DIR_ENV = "EPOCHAL_DEV_DATA_DIR"
TRACE_DIR_ENV = SHARED_ENV["trace_dir"]
TRACES = "traces"  # the span files' folder in the data directory
UP_TIMEOUT_S = 240.0
JOIN_TIMEOUT_S = 600.0
DOWN_TIMEOUT_S = STOP_TIMEOUT_S + 10.0
CONTROL_TIMEOUT_S = 90.0  # an add waits for the new process to serve
POLL_S = 0.2


class Failed(Exception):
    """The command failed; the message says why (exit status 1)."""


def parser(prog: str = "epochal dev") -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=prog,
        description="A local Epochal cluster on 127.0.0.1 with SQLite that you start, grow, "
        "look at and stop like a service, from any terminal. Exit status: 0 done, 1 failed "
        "(or, for status, not running), 2 bad usage.",
    )
    top.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR),
        help=f"the cluster's data, logs and pid files [{DATA_DIR_ENV}] (default "
        f"{DEFAULT_DATA_DIR})",
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    for name, what in (
        ("run", "up in the foreground plus a demo workload (make run); Ctrl-C stops it"),
        ("up", "start the cluster in the background; return once it serves"),
    ):
        command = commands.add_parser(name, help=what, description=what)
        command.add_argument("--cms", type=int, help="CMS members (default 3)")
        command.add_argument("--replicas", type=int, help="replicas (default 3)")
        command.add_argument("--reconcilers", type=int, help="(default 1)")
        command.add_argument(
            "--fresh", action="store_true", help="wipe the data directory first (run always does)"
        )
        command.add_argument("--timeout-s", type=float, default=UP_TIMEOUT_S)
    commands.choices["run"].add_argument("--exit", action="store_true", help="stop after the demo")
    status = commands.add_parser("status", help="what runs, where, and its logs")
    status.add_argument("--output", choices=("table", "json"), default="table")
    add = commands.add_parser("add-replica", help="a replica that joins the ring by itself")
    add.add_argument("--datacenter", default="dc1")
    add.add_argument("--rack", default="r1")
    add.add_argument("--no-wait", action="store_true", help="return once it serves, not joined")
    add.add_argument("--timeout-s", type=float, default=JOIN_TIMEOUT_S)
    add_cms = commands.add_parser("add-cms", help="a CMS member that starts as a candidate")
    add_cms.add_argument("--voter", action="store_true", help="then make it a voter")
    down = commands.add_parser("down", help="stop every process of the cluster")
    down.add_argument("--timeout-s", type=float, default=DOWN_TIMEOUT_S)
    # The detached supervisor `up` starts (not for people).
    supervise = commands.add_parser("supervise")
    supervise.add_argument("--cms", type=int, default=3)
    supervise.add_argument("--replicas", type=int, default=3)
    supervise.add_argument("--reconcilers", type=int, default=1)
    for name in ("run", "up", "supervise"):
        commands.choices[name].add_argument(
            "--no-traces",
            action="store_true",
            help=f"no span files (default: {TRACES}/ in the data directory, or {TRACE_DIR_ENV})",
        )
    commands.metavar = "{run,up,status,add-replica,add-cms,down}"
    for command in commands.choices.values():  # --data-dir after the command works too
        command.add_argument("--data-dir", type=Path, default=argparse.SUPPRESS, help="as above")
    return top


def main(
    argv: Sequence[str] | None = None, prog: str = "epochal dev", default: str | None = None
) -> int:
    """``default``: the command run when none is given (``python -m epochal.devcluster``:
    ``run``, for ``make run``); without one, the help."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser(prog).parse_args(arguments)
    if args.command is None:
        if default is None:
            parser(prog).print_help()
            return 2
        args = parser(prog).parse_args([*arguments, default])
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    data_dir = DataDir(args.data_dir.resolve())
    command = args.command
    try:
        if command == "run":
            from epochal.devcluster.demo import run_in_foreground

            return run_in_foreground(
                data_dir, _shape(args), exit_after=args.exit, trace_dir=trace_dir(data_dir, args)
            )
        if command == "supervise":
            return _supervise(data_dir, _shape(args), trace_dir(data_dir, args))
        handler = {
            "up": _up,
            "status": _status,
            "add-replica": _add_replica,
            "add-cms": _add_cms,
            "down": _down,
        }[command]
        return handler(data_dir, args)
    except Failed as failure:
        print(f"epochal dev {command}: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 1


def _shape(args: argparse.Namespace) -> Shape:
    given = {k: getattr(args, k) for k in ("cms", "replicas", "reconcilers")}
    try:
        return Shape(**{k: v for k, v in given.items() if v is not None})
    except ValueError as error:
        raise Failed(str(error)) from None


# ---------------------------------------------------------------------- up


def trace_dir(data_dir: DataDir, args: argparse.Namespace) -> Path | None:
    """Where the cluster's processes write their span files: the folder EPOCHAL_TRACE_DIR
    names if the environment sets it, else ``traces/`` in the data directory; None with
    ``--no-traces``."""
    if args.no_traces:
        return None
    given = os.environ.get(TRACE_DIR_ENV, "")
    return Path(given).resolve() if given else data_dir.path / TRACES


def _supervise(data_dir: DataDir, shape: Shape, traces: Path | None) -> int:
    try:
        asyncio.run(Supervisor(data_dir.path, shape, traces).run())
    except asyncio.CancelledError:
        return 0  # a signal during the start
    except Exception as error:
        print(f"the cluster did not start: {error}", file=sys.stderr)
        return 1
    return 0


def _up(data_dir: DataDir, args: argparse.Namespace) -> int:
    shape = _shape(args)
    running = data_dir.supervisor_pid()
    if running:
        print(f"already up: {data_dir.path} is supervised by pid {running}")
        return _status(data_dir, argparse.Namespace(output="table"))
    _wait_for_leftovers(data_dir)
    if args.fresh and data_dir.path.exists():
        shutil.rmtree(data_dir.path)
    previous = data_dir.read()
    if previous is not None and previous.processes:
        counts = {k: len(previous.of_kind(k)) for k in ("cms", "replica", "reconciler")}
        if any(getattr(args, k) is not None for k in ("cms", "replicas", "reconcilers")):
            print(
                f"{data_dir.path} holds a stopped cluster ({counts['cms']} CMS members, "
                f"{counts['replica']} replicas, {counts['reconciler']} reconcilers): starting it "
                "as it was; --fresh starts a new one of the size asked",
                file=sys.stderr,
            )
    data_dir.path.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != PARENT_PID_ENV}
    command = [
        sys.executable,
        "-m",
        "epochal.devcluster",
        "--data-dir",
        str(data_dir.path),
        "supervise",
        f"--cms={shape.cms}",
        f"--replicas={shape.replicas}",
        f"--reconcilers={shape.reconcilers}",
        *(["--no-traces"] if args.no_traces else []),  # it reads EPOCHAL_TRACE_DIR itself
    ]
    with data_dir.supervisor_log.open("ab") as log, open(os.devnull, "rb") as nothing:
        supervisor = subprocess.Popen(
            command,
            stdin=nothing,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    print(
        f"starting the cluster in {data_dir.path} (supervisor pid {supervisor.pid})",
        file=sys.stderr,
    )
    record = _wait_serving(data_dir, supervisor, args.timeout_s)
    for line in listing(record, data_dir):
        print(line)
    return 0


def _wait_for_leftovers(data_dir: DataDir) -> None:
    """Servers of a supervisor that was killed stop within their grace period (they get
    SIGTERM when it dies); a new start at their addresses waits for them."""
    deadline = time.monotonic() + STOP_TIMEOUT_S + 2.0
    while left := [n for n, p in data_dir.pid_files().items() if p.runs()]:
        if time.monotonic() > deadline:
            raise Failed(
                f"processes of an earlier start still run ({', '.join(left)}): "
                "`epochal dev down` stops them"
            )
        time.sleep(POLL_S)


def _wait_serving(
    data_dir: DataDir, supervisor: subprocess.Popen[bytes], timeout_s: float
) -> ClusterRecord:
    deadline = time.monotonic() + timeout_s
    shown = ""
    while True:
        record = data_dir.read()
        mine = record is not None and record.supervisor_pid == supervisor.pid
        if mine and record is not None:
            if record.phase == "serving":
                return record
            if record.message and record.message != shown:
                print(f"  {record.message}", file=sys.stderr)
                shown = record.message
        if supervisor.poll() is not None:
            why = record.message if record is not None and record.phase == "failed" else ""
            raise Failed(
                f"the supervisor exited ({why or f'status {supervisor.returncode}'}); its log "
                f"({data_dir.supervisor_log}):\n{tail(data_dir.supervisor_log, 20)}"
            )
        if time.monotonic() > deadline:
            supervisor.send_signal(signal.SIGTERM)  # it stops what it started
            raise Failed(
                f"the cluster did not serve within {timeout_s:.0f} s; stopping it. Logs are in "
                f"{data_dir.path}"
            )
        time.sleep(POLL_S)


def listing(record: ClusterRecord, data_dir: DataDir) -> list[str]:
    """Where everything is and how to reach it."""
    lines = [f"the cluster serves ({record.message}); data, logs and pid files in {data_dir.path}"]
    lines.append(f"  {'NAME':<12} {'KIND':<11} {'ADDRESS':<16} {'METRICS':<16} {'PID':>7}  LOG")
    for p in record.processes:
        lines.append(
            f"  {p.name:<12} {p.kind:<11} {p.address:<16} {p.metrics or '-':<16} "
            f"{p.pid or '-':>7}  {_shown(p.log)}"
        )
    if record.supervisor_pid == os.getpid():
        lines.append(f"  supervisor: this process (pid {record.supervisor_pid})")
    else:
        log = _shown(str(data_dir.supervisor_log))
        lines.append(f"  supervisor pid {record.supervisor_pid}, log {log}")
    lines.append(_traces_line(record))
    lines.append(_metrics_line(data_dir))
    lines.append("point the CLI (and the SDK) at it, with a certificate of every role:")
    lines.append(f"  export EPOCHAL_CLUSTER={record.cluster_flag}")
    lines += [f"  export {name}={_shown(value)}" for name, value in _pki(data_dir).items()]
    epochal = epochal_command()
    where = (
        ""
        if str(data_dir.path) == str(Path(DEFAULT_DATA_DIR).resolve())
        else f" --data-dir {data_dir.path}"
    )
    lines.append(
        f"then: {epochal} status | ring | health | cms describe | log | operations | "
        "reconcile status | --help"
    )
    lines.append(f"      {epochal} dev{where} status | add-replica | add-cms | down")
    return lines


def _metrics_line(data_dir: DataDir) -> str:
    return (
        f"  metrics: http://METRICS/metrics of each; Prometheus targets in "
        f"{_shown(str(data_dir.targets_file))} (make prometheus)"
    )


def _traces_line(record: ClusterRecord) -> str:
    if not record.traces:
        return "  spans: no span files (--no-traces)"
    shown = _shown(record.traces)
    return (
        f"  spans in {shown}/ (OTLP-JSON lines, a file per process); analyse them: "
        f"make analyze TRACES={shown}"
    )


def epochal_command() -> str:
    """The ``epochal`` script beside this interpreter, relative to here when it is below (as
    a user types it from the checkout: ``.venv/bin/epochal``)."""
    script = Path(sys.executable).with_name("epochal")
    return _shown(str(script))


def _pki(data_dir: DataDir) -> dict[str, str]:
    """The cluster's certificates (``tls/`` in its data directory: its CA and one certificate
    per process, made by the supervisor): the variables that name the admin's for the CLI."""
    return DevPki(data_dir.path / TLS_DIR).client_env()


def _use_pki(data_dir: DataDir) -> None:
    """This process calls the cluster with its admin certificate."""
    use_pki(DevPki(data_dir.path / TLS_DIR))


def _shown(path: str) -> str:
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


# ---------------------------------------------------------------------- talking to it


def _ask(data_dir: DataDir, action: str, **fields: Any) -> dict[str, Any]:
    """One request to the running supervisor (Failed when it is not up or refuses)."""
    record = data_dir.read()
    if not data_dir.supervisor_pid() or record is None or not record.control:
        raise Failed(f"no cluster runs in {data_dir.path}: `epochal dev up` starts one")
    return asyncio.run(
        _request(record.control, {"action": action, "token": data_dir.token(), **fields})
    )


async def _request(control: str, request: dict[str, Any]) -> dict[str, Any]:
    host, _, port = control.rpartition(":")
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5.0)
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), CONTROL_TIMEOUT_S)
        writer.close()
    except (OSError, TimeoutError) as error:
        raise Failed(f"the supervisor at {control} did not answer: {error}") from None
    answer: dict[str, Any] = json.loads(line or b'{"ok": false, "error": "no answer"}')
    if not answer.get("ok"):
        raise Failed(str(answer.get("error")))
    return answer


# ---------------------------------------------------------------------- status


def _status(data_dir: DataDir, args: argparse.Namespace) -> int:
    if not data_dir.supervisor_pid():
        record = data_dir.read()
        if args.output == "json":
            print(json.dumps({"running": False, "cluster": asdict(record) if record else None}))
        else:
            print(f"not running: no supervisor for {data_dir.path}", end="")
            print(f" (last phase: {record.phase} {record.message})" if record else "")
        return 1
    answer = _ask(data_dir, "status")
    if args.output == "json":
        print(json.dumps({"running": True, **{k: v for k, v in answer.items() if k != "ok"}}))
        return 0
    cluster, replicas, roles = answer["cluster"], answer["replicas"], answer["cms_roles"]
    print(f"{cluster['phase']}: {cluster['message']} (supervisor pid {cluster['supervisor_pid']})")
    print(
        f"  {'NAME':<12} {'KIND':<11} {'ADDRESS':<16} {'METRICS':<16} {'PID':>7}  {'NODE':<8} "
        f"{'STATE':<10} LOG"
    )
    for p in cluster["processes"]:
        described = replicas.get(p["name"], {})
        state = described.get("state") or roles.get(p["name"]) or ""
        state = state if p["pid"] else "exited"
        print(
            f"  {p['name']:<12} {p['kind']:<11} {p['address']:<16} {p.get('metrics') or '-':<16} "
            f"{p['pid'] or '-':>7}  {described.get('node_id', ''):<8} {state:<10} "
            f"{_shown(p['log'])}"
        )
    if cluster["supervisor_pid"] and data_dir.supervisor_log.exists():
        print(f"  supervisor log {_shown(str(data_dir.supervisor_log))}")
    else:  # `run` (make run): its output is its terminal
        print("  supervisor in the foreground (make run): its output is in its terminal")
    print(_traces_line(ClusterRecord(traces=cluster.get("traces", ""))))
    print(_metrics_line(data_dir))
    return 0


# ---------------------------------------------------------------------- growing


def _add_replica(data_dir: DataDir, args: argparse.Namespace) -> int:
    answer = _ask(data_dir, "add-replica", datacenter=args.datacenter, rack=args.rack)
    process = answer["process"]
    print(
        f"started {process['name']} at {process['address']} ({process['datacenter']}/"
        f"{process['rack']}); log {_shown(process['log'])}",
        file=sys.stderr,
    )
    if not args.no_wait:
        _use_pki(data_dir)
        asyncio.run(_wait_joined(process["name"], process["address"], args.timeout_s))
    print(f"{process['name']} {process['address']}")
    return 0


async def _wait_joined(name: str, address: str, timeout_s: float) -> None:
    """Until the replica says it joined, showing its join's progress on stderr."""
    deadline = time.monotonic() + timeout_s
    shown = ""
    async with AdminClient(address) as admin:
        while True:
            try:
                described = await admin.describe()
                if described.state == "joined":
                    print(
                        f"{name} ({described.node_id}) joined at epoch {described.epoch}",
                        file=sys.stderr,
                    )
                    return
                status = await admin.status()
                line = (
                    f"{name} ({described.node_id}): {described.state}, {status.kind} "
                    f"{status.step} {status.state} {status.message}"
                ).rstrip()
            except EpochalError as error:
                line = f"{name}: {error}"
            if line != shown:
                print(f"  {line}", file=sys.stderr)
                shown = line
            if time.monotonic() > deadline:
                raise Failed(
                    f"{name} did not join within {timeout_s:.0f} s; it goes on (see its log)"
                )
            await asyncio.sleep(POLL_S)


def _add_cms(data_dir: DataDir, args: argparse.Namespace) -> int:
    answer = _ask(data_dir, "add-cms")
    process = answer["process"]
    print(
        f"started {process['name']} at {process['address']} as a CMS candidate (a learner: it "
        "follows the log and does not vote); log "
        f"{_shown(process['log'])}"
    )
    if args.voter:
        record = data_dir.read()
        if record is None:
            raise Failed(f"{data_dir.state_file} is gone: is the cluster being stopped?")
        voters = [p.address for p in record.of_kind("cms") if p.name != process["name"]]
        _use_pki(data_dir)
        epoch = asyncio.run(_promote(voters, process["name"], process["address"]))
        print(f"{process['name']} votes from epoch {epoch}")
    return 0


async def _promote(voters: list[str], member_id: str, address: str) -> int:
    try:
        async with CMSClient(voters) as cms:
            return await add_voter(cms, member_id, address)
    except EpochalError as error:
        raise Failed(
            f"{member_id} runs as a candidate but did not become a voter: {error}"
        ) from None


# ---------------------------------------------------------------------- down


def _down(data_dir: DataDir, args: argparse.Namespace) -> int:
    began = time.monotonic()
    deadline = began + args.timeout_s
    supervisor = data_dir.supervisor_pid()
    recorded = RecordedPid(supervisor, started(supervisor))
    if supervisor:
        try:
            _ask(data_dir, "down")
        except Failed as failure:  # it does not answer: the signal does the same
            print(f"{failure}; sending it SIGTERM", file=sys.stderr)
            _signal(supervisor, signal.SIGTERM)
        while recorded.runs() and time.monotonic() < deadline:
            time.sleep(POLL_S)
    # Whatever still runs (a supervisor that hung, a server it could not stop): by pid file.
    left = {n: p for n, p in data_dir.pid_files().items() if p.runs()}
    if recorded.runs():
        left["supervisor"] = recorded
    for process in left.values():
        _signal(process.pid, signal.SIGTERM)
    grace = time.monotonic() + STOP_TIMEOUT_S
    while any(p.runs() for p in left.values()) and time.monotonic() < grace:
        time.sleep(POLL_S)
    for process in left.values():
        if process.runs():
            _signal(process.pid, signal.SIGKILL)
    record = data_dir.read()
    if record is not None and record.phase not in ("stopped", "failed"):
        record.phase, record.message, record.supervisor_pid, record.control = "stopped", "", 0, ""
        for p in record.processes:
            p.pid = 0
        data_dir.write(record)
    if not supervisor and not left:
        print(f"not running: nothing to stop in {data_dir.path}")
        return 0
    forced = f"; {len(left)} stopped by pid file ({', '.join(left)})" if left else ""
    print(f"stopped the cluster in {time.monotonic() - began:.1f} s{forced}")
    return 0


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
