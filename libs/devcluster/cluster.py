"""A local cluster of real processes on 127.0.0.1: a CMS, replicas and reconcilers, for
``epochal dev``, ``make run``, tests and benchmarks.

The ring forms by itself: every replica starts with the join setting on (``--auto-join``, the
replica's default) and joins once registered (``epochal.replica.auto_join``); ``wait_joined``
waits for that. A replica marked ``auto_join=False`` starts with ``--no-auto-join`` and stays
out of the ring until something drives its operation (``bootstrap``, ``operation``: a replace,
say). ``tokens`` gives a replica explicit tokens (``--initial-tokens``), else it allocates
``num_tokens``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochal.admin import (
    JOIN_REFUSED,
    Bootstrap,
    CleanupResult,
    OperationRequest,
    OperationStatus,
    ReplicaDescription,
    TestHooks,
)
from epochal.admin_client import OPERATION_TIMEOUT_S, AdminClient
from epochal.devcluster.cms import LocalCMS
from epochal.devcluster.pki import TLS_DIR, TLS_ENV, DevPki, process_pki, security_flags
from epochal.errors import EpochalError
from epochal.runtime.processes import (
    STOP_TIMEOUT_S,
    LocalProcess,
    free_address,
    stop_all,
    tail,
)
from epochal.tcm.allocation import DEFAULT_NUM_TOKENS
from epochal.wire.roles import RECONCILER, REPLICA

JOINED = "joined"
# The states a replica's automatic join ends in (a node that left stays out).
SETTLED = (JOINED, "left")


@dataclass
class LocalReplica(LocalProcess):
    datacenter: str = "dc1"
    rack: str = "r1"
    node_id: str = ""
    auto_join: bool = True
    tokens: tuple[int, ...] = ()  # explicit tokens for its join (else num_tokens allocated)


@dataclass
class LocalCluster:
    data_dir: Path
    replicas: int = 3
    cms_size: int = 3
    # Per replica (by index), else dc1/r1 for all.
    locations: Sequence[tuple[str, str]] = ()
    replica_args: tuple[str, ...] = ()
    cms_args: tuple[str, ...] = ("--election-timeout-ms", "400", "--heartbeat-interval-ms", "50")
    env: Mapping[str, str] = field(default_factory=dict)
    test_hooks: bool = False
    num_tokens: int = DEFAULT_NUM_TOKENS
    cms: LocalCMS = field(init=False)
    nodes: dict[str, LocalReplica] = field(default_factory=dict, init=False)
    reconcilers: dict[str, LocalProcess] = field(default_factory=dict, init=False)
    reconciler_args: tuple[str, ...] = ()
    # Every process serves Prometheus metrics (--metrics-listen) on a port of its own.
    metrics: bool = False
    # Mutual TLS with certificates of this PKI (default: the process's, epochal.devcluster.pki),
    # or plain text when ``insecure``.
    pki: DevPki | None = None
    insecure: bool = False

    def __post_init__(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.pki is None and not self.insecure:
            self.pki = process_pki(self.data_dir / TLS_DIR)
        if self.insecure:
            # not the TLS files this process's environment may name: plain text, as asked
            self.env = {**dict.fromkeys(TLS_ENV, ""), **self.env}
        self.cms = LocalCMS(
            self.data_dir / "cms",
            size=self.cms_size,
            extra_args=self.cms_args,
            env=self.env,
            metrics=self.metrics,
            pki=self.pki,
            insecure=self.insecure,
        )
        for index in range(self.replicas):
            self.add_replica(index)

    def add_replica(self, index: int | None = None, *, auto_join: bool = True) -> LocalReplica:
        """A replica (not started): ``replica<n>``; ``auto_join=False`` for one whose operation
        the caller drives (a bootstrap, a replace)."""
        index = len(self.nodes) if index is None else index
        name = f"replica{index + 1}"
        datacenter, rack = self.locations[index] if index < len(self.locations) else ("dc1", "r1")
        replica = LocalReplica(
            name,
            free_address(self.taken()),
            self.data_dir / f"{name}.log",
            datacenter=datacenter,
            rack=rack,
            auto_join=auto_join,
        )
        if self.metrics:
            replica.metrics_address = free_address({*self.taken(), replica.address})
        self.nodes[name] = replica
        return replica

    def sdk_options(self) -> dict[str, Any]:
        """The SDK's keyword arguments to call this cluster with the admin certificate (or in
        plain text): whatever the environment's ``EPOCHAL_TLS_*`` name."""
        return {"tls": self.pki.admin()} if self.pki is not None else {"insecure": True}

    def taken(self) -> set[str]:
        """Every address a process of this cluster holds (or will, once started)."""
        return {a for p in self.processes for a in (p.address, p.metrics_address) if a}

    def add_reconciler(self) -> LocalProcess:
        """A reconciler (not started): ``reconciler<n>``, its state in the data folder."""
        name = f"reconciler{len(self.reconcilers) + 1}"
        address = free_address(self.taken())
        reconciler = LocalProcess(name, address, self.data_dir / f"{name}.log")
        if self.metrics:
            reconciler.metrics_address = free_address({*self.taken(), address})
        self.reconcilers[name] = reconciler
        return reconciler

    def reconciler_command(self, name: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "epochal.reconciler",
            "--listen",
            self.reconcilers[name].address,
            "--cms",
            ",".join(self.cms.addresses),
            "--data-dir",
            str(self.data_dir / name),
            "--id",
            name,
            *security_flags(self.pki, name, RECONCILER),
            *_metrics_flag(self.reconcilers[name]),
            *self.reconciler_args,
        ]

    def start_reconciler(self, name: str) -> None:
        self.reconcilers[name].start(self.reconciler_command(name), self.env)

    @property
    def addresses(self) -> list[str]:
        return [r.address for r in self.nodes.values()]

    def command(self, name: str) -> list[str]:
        replica = self.nodes[name]
        args = [
            sys.executable,
            "-m",
            "epochal.replica",
            "--listen",
            replica.address,
            "--cms",
            ",".join(self.cms.addresses),
            "--data-dir",
            str(self.data_dir / name),
            "--datacenter",
            replica.datacenter,
            "--rack",
            replica.rack,
            "--num-tokens",
            str(self.num_tokens),
            *security_flags(self.pki, name, REPLICA),
            *_metrics_flag(replica),
            *self.replica_args,
        ]
        if replica.tokens:
            args += ["--initial-tokens", ",".join(map(str, replica.tokens))]
        if not replica.auto_join:
            args.append("--no-auto-join")
        if self.test_hooks:
            args.append("--enable-test-hooks")
        return args

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.cms.start()
        for name in self.nodes:
            self.start_replica(name)

    def start_replica(self, name: str) -> None:
        self.nodes[name].start(self.command(name), self.env)

    def stop_replica(self, name: str, timeout_s: float = STOP_TIMEOUT_S) -> None:
        self.nodes[name].stop(timeout_s)

    def kill_replica(self, name: str) -> None:
        self.nodes[name].kill()

    @property
    def processes(self) -> list[LocalProcess]:
        """Every reconciler, replica and CMS member."""
        return [*self.reconcilers.values(), *self.nodes.values(), *self.cms.members.values()]

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to every process at once, SIGKILL to those still running ``timeout_s``
        later."""
        stop_all(self.processes, timeout_s)

    def close(self) -> None:
        for process in [*self.reconcilers.values(), *self.nodes.values()]:
            process.kill()
        self.cms.close()

    async def wait_ready(self, names: Sequence[str] | None = None, timeout_s: float = 60.0) -> None:
        """Until the CMS and each selected replica answer SERVING; learns their node ids."""
        deadline = time.monotonic() + timeout_s
        await self.cms.wait_serving(timeout_s=timeout_s)
        for name in names or list(self.nodes):
            replica = self.nodes[name]
            await replica.wait_serving(deadline, self.cms.client_security)
            replica.node_id = (await self.describe(name)).node_id

    # ------------------------------------------------------------------ the ring

    async def wait_joined(
        self, names: Sequence[str] | None = None, timeout_s: float = 120.0
    ) -> int:
        """Until each selected replica (every one with the join setting on, if none are named)
        has joined the ring by itself (or, having left it, stays out) and every running replica
        has applied the last of those joins; returns that epoch. Raises when a replica exits
        or its join is refused for good."""
        deadline = time.monotonic() + timeout_s
        selected = list(names or [n for n, r in self.nodes.items() if r.auto_join])
        epoch = 0
        for name in selected:
            replica = self.nodes[name]
            while True:
                if not replica.running:
                    raise RuntimeError(
                        f"{name} exited while joining; log:\n{tail(replica.log_path)}"
                    )
                with contextlib.suppress(EpochalError):
                    described = await self.describe(name)
                    replica.node_id = described.node_id
                    if described.state in SETTLED:
                        epoch = max(epoch, described.epoch)
                        break
                    status = await self.status(name, timeout_s=5.0)
                    if status.state == JOIN_REFUSED:
                        raise RuntimeError(f"{name} will not join: {status.message}")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{name} did not join in {timeout_s} s; log:\n{tail(replica.log_path)}"
                    )
                await asyncio.sleep(0.1)
        await self.wait_for_epoch(epoch, timeout_s=max(deadline - time.monotonic(), 1.0))
        return epoch

    async def wait_for_epoch(
        self, epoch: int, names: Sequence[str] | None = None, timeout_s: float = 30.0
    ) -> None:
        deadline = time.monotonic() + timeout_s
        for name in names or [n for n, r in self.nodes.items() if r.running]:
            while (await self.describe(name)).epoch < epoch:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} did not reach epoch {epoch} in {timeout_s} s")
                await asyncio.sleep(0.02)

    # ------------------------------------------------------------------ RPCs

    def admin(self, name: str) -> AdminClient:
        """A client of the replica's admin calls (``async with``: closed after)."""
        return AdminClient(self.nodes[name].address, self.cms.client_security)

    async def describe(self, name: str, timeout_s: float = 5.0) -> ReplicaDescription:
        async with self.admin(name) as admin:
            return await admin.describe(timeout_s=timeout_s)

    async def metric(self, name: str, metric: str) -> float:
        """The replica's sample ``metric`` (``epochal_x_total``, ``epochal_y{label="v"}``, a
        histogram's ``_count`` or ``_sum``). KeyError when the replica exports no such sample:
        a renamed or misspelled metric must not read as 0."""
        metrics = (await self.describe(name)).metrics
        if metric not in metrics:
            family = metric.partition("{")[0]
            alike = sorted(k for k in metrics if family in k) or sorted(metrics)  # renamed?
            raise KeyError(f"{name} exports no metric {metric!r} (it has {alike[:8]}…)")
        return metrics[metric]

    async def operation(
        self, name: str, request: OperationRequest, timeout_s: float = OPERATION_TIMEOUT_S
    ) -> OperationStatus:
        """Run the topology operation ``request`` on the replica (Bootstrap, Decommission,
        Replace, ...); its status once it has finished, failed or been aborted."""
        async with self.admin(name) as admin:
            return await admin.run(request, timeout_s=timeout_s)

    async def status(self, name: str, timeout_s: float = 120.0) -> OperationStatus:
        """What the replica's topology operation is doing."""
        async with self.admin(name) as admin:
            return await admin.status(timeout_s=timeout_s)

    async def cleanup(self, name: str, timeout_s: float = OPERATION_TIMEOUT_S) -> CleanupResult:
        async with self.admin(name) as admin:
            return await admin.cleanup(timeout_s=timeout_s)

    async def bootstrap(
        self,
        name: str,
        tokens: Sequence[int] = (),
        num_tokens: int = 16,
        timeout_s: float = OPERATION_TIMEOUT_S,
    ) -> OperationStatus:
        """Have the replica join the ring, streaming and waiting for barriers (it drives it)."""
        request = Bootstrap(tokens=tuple(tokens), num_tokens=num_tokens)
        return await self.operation(name, request, timeout_s)

    async def set_hooks(self, name: str, **hooks: bool | int | float) -> None:
        async with self.admin(name) as admin:
            await admin.set_hooks(TestHooks(**hooks))  # type: ignore[arg-type]


def _metrics_flag(process: LocalProcess) -> list[str]:
    return ["--metrics-listen", process.metrics_address] if process.metrics_address else []
