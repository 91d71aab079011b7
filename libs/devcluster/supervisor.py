"""The dev cluster's supervisor: the one process that owns a local cluster's servers.

It starts the CMS members, the replicas (which join a new ring by themselves) and the
reconcilers as its children on 127.0.0.1 with SQLite, each logging to a file in the data
directory; records them there (``epochal.devcluster.state``); and answers ``epochal dev``
commands from any terminal on a loopback control port: ``status``, ``add-replica``, ``add-cms``
and ``down``. The servers die with it, even if it is killed outright
(``epochal.runtime.processes``). It stops them all at once — SIGTERM, SIGKILL to any still
running after their grace period — on ``down``, SIGTERM or Ctrl-C, and then exits.

A data directory that holds a stopped cluster starts again as it was: the same processes at
the same addresses, with their data (a replica that joined does not join again).

Control protocol: one JSON object per line each way, one request per connection; every request
carries the token from ``control.token``; answers are ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.state import ClusterRecord, DataDir, ProcessRecord
from epochal.errors import EpochalError
from epochal.runtime.flags import SHARED_ENV
from epochal.runtime.processes import STOP_TIMEOUT_S, LocalProcess, free_address

log = logging.getLogger(__name__)

# A round of each range every half second. The write timeout and the slack are not shortened:
# --write-timeout-ms must be the replicas' (their default, 2000) and --slack-ms at least their
# --max-skew-ms (5000), else a write still in flight could carry an id below the new low bound.
RECONCILER_ARGS = ("--interval-ms", "500", "--write-timeout-ms", "2000", "--slack-ms", "5000")
START_WAIT_S = 180.0  # for every server to serve and every replica to join
ADD_WAIT_S = 60.0  # for an added process to serve
DESCRIBE_TIMEOUT_S = 1.0
MAX_REQUEST_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class Shape:
    """How many of each a new cluster starts with."""

    cms: int = 3
    replicas: int = 3
    reconcilers: int = 1

    def __post_init__(self) -> None:
        if self.cms < 1 or self.replicas < 1 or self.reconcilers < 0:
            raise ValueError("a cluster needs at least 1 CMS member and 1 replica")


class Supervisor:
    def __init__(
        self, data_dir: Path, shape: Shape = Shape(), trace_dir: Path | None = None
    ) -> None:
        """``trace_dir``: where every process writes its span file (None: none does, whatever
        EPOCHAL_TRACE_DIR says)."""
        self.files = DataDir(data_dir.resolve())
        self.shape = shape
        self.trace_dir = trace_dir
        self.cluster = self._build()
        self.record = ClusterRecord()
        self.stopped = asyncio.Event()
        self._lock = asyncio.Lock()  # one change of the cluster at a time
        self._token = ""
        self._server: asyncio.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle = False  # run() only waits for the stop now
        self._stopping = False

    # ------------------------------------------------------------------ building

    def _build(self) -> LocalCluster:
        """The cluster the data directory records (stopped), else a new one of ``shape``; its
        processes, the CMS members too, write spans to ``trace_dir``."""
        cluster = self._recorded_or_new()
        env = {SHARED_ENV["trace_dir"]: str(self.trace_dir or "")}
        cluster.env = cluster.cms.env = env
        return cluster

    def _recorded_or_new(self) -> LocalCluster:
        previous = self.files.read()
        root = self.files.path
        if previous is None or not previous.processes:
            cluster = LocalCluster(
                root,
                replicas=self.shape.replicas,
                cms_size=self.shape.cms,
                reconciler_args=RECONCILER_ARGS,
                metrics=True,
            )
            for _ in range(self.shape.reconcilers):
                cluster.add_reconciler()
            return cluster
        voters = [p for p in previous.of_kind("cms") if not p.candidate]
        replicas = previous.of_kind("replica")
        cluster = LocalCluster(
            root,
            replicas=len(replicas),
            cms_size=len(voters),
            reconciler_args=RECONCILER_ARGS,
            metrics=True,
        )
        for _ in previous.of_kind("cms")[len(voters) :]:
            cluster.cms.add_member()
        for _ in previous.of_kind("reconciler"):
            cluster.add_reconciler()
        processes = {p.name: p for p in cluster.processes}
        for recorded in previous.processes:
            process = processes.get(recorded.name)
            if process is None:
                raise RuntimeError(f"{root} records {recorded.name}, which the cluster lacks")
            process.address = recorded.address
            process.metrics_address = recorded.metrics
        for process in cluster.processes:  # recorded before metrics were on: new endpoints
            if not process.metrics_address:
                process.metrics_address = free_address(cluster.taken())
        for recorded in replicas:
            replica = cluster.nodes[recorded.name]
            replica.datacenter, replica.rack = recorded.datacenter, recorded.rack
        return cluster

    def _records(self) -> list[ProcessRecord]:
        cluster = self.cluster
        candidates = set(cluster.cms.candidates())

        def record(process: LocalProcess, kind: str, **more: Any) -> ProcessRecord:
            pid = (process.pid or 0) if process.running else 0
            return ProcessRecord(
                process.name,
                kind,
                process.address,
                str(process.log_path),
                pid,
                metrics=process.metrics_address,
                **more,
            )

        return [
            *(
                record(m, "cms", candidate=m.name in candidates)
                for m in cluster.cms.members.values()
            ),
            *(
                record(r, "replica", datacenter=r.datacenter, rack=r.rack)
                for r in cluster.nodes.values()
            ),
            *(record(r, "reconciler") for r in cluster.reconcilers.values()),
        ]

    def _save(self, phase: str | None = None, message: str = "") -> None:
        if phase is not None:
            self.record.phase, self.record.message = phase, message
        self.record.processes = self._records()
        self.files.write(self.record)

    # ------------------------------------------------------------------ running

    async def start(self, pid: int) -> None:
        """Start every process and return once the cluster serves: every server answers its
        health check and every replica has joined the ring. Raises (after recording why) when
        it does not within ``START_WAIT_S``; ``stop`` stops what started."""
        self._token = self.files.new_token()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.record = ClusterRecord(
            supervisor_pid=pid, control=f"{host}:{port}", traces=str(self.trace_dir or "")
        )
        self._save("starting", "starting the CMS and the replicas")  # its pid file first
        cluster = self.cluster
        try:
            cluster.cms.start()
            for name in cluster.nodes:
                cluster.start_replica(name)
            self._save("starting", "waiting for the CMS and the replicas to serve")
            await cluster.wait_ready(timeout_s=START_WAIT_S)
            self._save("starting", "waiting for the replicas to join the ring")
            epoch = await cluster.wait_joined(timeout_s=START_WAIT_S)
            deadline = time.monotonic() + START_WAIT_S
            for name in cluster.reconcilers:
                cluster.start_reconciler(name)
            for reconciler in cluster.reconcilers.values():
                await reconciler.wait_serving(deadline)
        except Exception as error:
            self._save("failed", f"{type(error).__name__}: {error}")
            raise
        self._save("serving", f"every replica joined the ring; epoch {epoch}")

    async def run(
        self, serving: Callable[[Supervisor], Awaitable[None]] | None = None, *, stay: bool = True
    ) -> None:
        """Start the cluster, call ``serving`` once it serves, then (``stay``) keep it until
        ``down``, SIGTERM or SIGINT; every process is stopped on the way out, however it
        ends (a failed start, a signal during the start, an error in ``serving``)."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self._task = task  # `down` while starting cancels it, as a signal does
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        try:
            await self.start(os.getpid())
            if serving is not None:
                await serving(self)
            if stay:
                for signum in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(signum, self.stopped.set)
                self._idle = True
                await self.stopped.wait()
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Every process at once: SIGTERM, SIGKILL to those still running after their grace.
        It does not wait for an add in progress (which then fails: its process is stopped
        too, or dies with this one)."""
        self._stopping = True
        failed = self.record.phase == "failed"  # keep why for `epochal dev up` to show
        if not failed:
            self._save("stopping", "stopping every process")
        await asyncio.to_thread(self.cluster.stop, STOP_TIMEOUT_S)
        if self._server is not None:
            self._server.close()
        self.record.supervisor_pid = 0
        self.record.control = ""
        self._save("failed" if failed else "stopped", self.record.message if failed else "")

    # ------------------------------------------------------------------ control

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            answer = await self._answer(line)
        except Exception as error:  # a bad request or a failed action: say so, keep serving
            log.exception("control request failed")
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        with contextlib.suppress(ConnectionError):
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
            writer.close()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        if len(line) > MAX_REQUEST_BYTES:
            return {"ok": False, "error": "request too long"}
        request = json.loads(line or b"{}")
        if not isinstance(request, dict) or not secrets.compare_digest(
            str(request.get("token", "")), self._token
        ):
            return {"ok": False, "error": "bad or missing control token"}
        action = self._actions().get(str(request.get("action", "")))
        if action is None:
            return {"ok": False, "error": f"unknown action {request.get('action')!r}"}
        return {"ok": True, **await action(request)}

    def _actions(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]]:
        return {
            "status": self._status,
            "add-replica": self._add_replica,
            "add-cms": self._add_cms,
            "down": self._down,
        }

    async def _status(self, _: dict[str, Any]) -> dict[str, Any]:
        self._save()
        names = list(self.cluster.nodes)
        states = await asyncio.gather(*(self._replica_state(name) for name in names))
        return {
            "cluster": asdict(self.record),
            "replicas": dict(zip(names, states, strict=True)),
            "cms_roles": await self._cms_roles(),
        }

    async def _cms_roles(self) -> dict[str, str]:
        """Member id -> role (voter, joining, candidate), as a running member says."""
        cms = self.cluster.cms
        for member_id, member in cms.members.items():
            if member.running:
                with contextlib.suppress(EpochalError):
                    view = await cms.describe(member_id, timeout_s=DESCRIBE_TIMEOUT_S)
                    return {m.member_id: m.role for m in view.members}
        return {}

    async def _replica_state(self, name: str) -> dict[str, Any]:
        if not self.cluster.nodes[name].running:
            return {}
        try:
            described = await self.cluster.describe(name, timeout_s=DESCRIBE_TIMEOUT_S)
        except EpochalError as error:
            return {"error": str(error)}
        return {
            "node_id": described.node_id,
            "state": described.state,
            "epoch": described.epoch,
            "ready": described.ready,
        }

    def _check_serving(self) -> None:
        if self._stopping or self.record.phase != "serving":
            raise RuntimeError(f"the cluster is {self.record.phase}, not serving")

    async def _add_replica(self, request: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            self._check_serving()
            replica = self.cluster.add_replica()
            replica.datacenter = str(request.get("datacenter") or replica.datacenter)
            replica.rack = str(request.get("rack") or replica.rack)
            self.cluster.start_replica(replica.name)
            self._save()
            await replica.wait_serving(time.monotonic() + ADD_WAIT_S)
            self._save()
            return {"process": asdict(self._record_of(replica.name))}

    async def _add_cms(self, _: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            self._check_serving()
            member = self.cluster.cms.add_member(self.cluster.taken())
            self.cluster.cms.start(member.member_id)
            self._save()
            await member.wait_serving(time.monotonic() + ADD_WAIT_S)
            return {"process": asdict(self._record_of(member.name))}

    async def _down(self, _: dict[str, Any]) -> dict[str, Any]:
        if self._task is not None and not self._idle:
            self._task.cancel()  # stop the start (or the demo); run() then stops what started
        self.stopped.set()
        return {"pid": self.record.supervisor_pid}

    def _record_of(self, name: str) -> ProcessRecord:
        return next(p for p in self.record.processes if p.name == name)
