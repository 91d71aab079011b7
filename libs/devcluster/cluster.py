"""A local cluster of real processes on 127.0.0.1: a CMS and replicas, for ``make run``, tests
and benchmarks.

``form_ring`` makes the registered replicas owners of tokens by committing each one's join
(PREPARE, START, MID, FINISH) through the CMS, one node after another. That is how a *new, empty*
cluster is formed; it streams nothing and waits for no progress barrier, so it must not be used
to add a node to a ring that holds data (``bootstrap`` has the node drive its own join, with
barriers and streaming).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from epochal.admin import (
    Bootstrap,
    CleanupResult,
    OperationRequest,
    OperationStatus,
    ReplicaDescription,
    TestHooks,
)
from epochal.admin_client import OPERATION_TIMEOUT_S, AdminClient
from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.runtime.processes import STOP_TIMEOUT_S, LocalProcess, free_ports, stop_all
from epochal.tcm import AdvanceSequence, PrepareJoin, Step

JOIN_STEPS = (Step.START, Step.MID, Step.FINISH)


@dataclass
class LocalReplica(LocalProcess):
    datacenter: str = "dc1"
    rack: str = "r1"
    node_id: str = ""


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
    cms: LocalCMS = field(init=False)
    nodes: dict[str, LocalReplica] = field(default_factory=dict, init=False)
    reconcilers: dict[str, LocalProcess] = field(default_factory=dict, init=False)
    reconciler_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cms = LocalCMS(self.data_dir / "cms", size=self.cms_size, extra_args=self.cms_args)
        for index in range(self.replicas):
            self.add_replica(index)

    def add_replica(self, index: int | None = None) -> LocalReplica:
        index = len(self.nodes) if index is None else index
        name = f"replica{index + 1}"
        # A port picked earlier is free until its replica starts: never hand it out twice.
        taken = {p.address for p in [*self.nodes.values(), *self.reconcilers.values()]}
        taken |= set(self.cms.addresses)
        port = next(
            p for p in iter(lambda: free_ports(1)[0], None) if f"127.0.0.1:{p}" not in taken
        )
        datacenter, rack = self.locations[index] if index < len(self.locations) else ("dc1", "r1")
        replica = LocalReplica(
            name,
            f"127.0.0.1:{port}",
            self.data_dir / f"{name}.log",
            datacenter=datacenter,
            rack=rack,
        )
        self.nodes[name] = replica
        return replica

    def add_reconciler(self) -> LocalProcess:
        """A reconciler (not started): ``reconciler<n>``, its state in the data folder."""
        name = f"reconciler{len(self.reconcilers) + 1}"
        taken = {p.address for p in self.processes}
        port = next(
            p for p in iter(lambda: free_ports(1)[0], None) if f"127.0.0.1:{p}" not in taken
        )
        reconciler = LocalProcess(name, f"127.0.0.1:{port}", self.data_dir / f"{name}.log")
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
            *self.replica_args,
        ]
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
            await replica.wait_serving(deadline)
            replica.node_id = (await self.describe(name)).node_id

    # ------------------------------------------------------------------ the ring

    async def form_ring(
        self, tokens: Mapping[str, Sequence[int]] | None = None, num_tokens: int = 16
    ) -> int:
        """Join every replica (explicit ``tokens`` by name, else ``num_tokens`` each), in name
        order, into a new empty ring; returns the epoch of the last FINISH."""
        epoch = 0
        async with CMSClient(self.cms.addresses) as cms:
            for name, replica in self.nodes.items():
                chosen = tuple(tokens.get(name, ())) if tokens else ()
                await cms.commit(
                    PrepareJoin(node_id=replica.node_id, tokens=chosen, num_tokens=num_tokens)
                )
                for step in JOIN_STEPS:
                    epoch = (
                        await cms.commit(AdvanceSequence(node_id=replica.node_id, step=step))
                    ).epoch
        await self.wait_for_epoch(epoch)
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
        return AdminClient(self.nodes[name].address)

    async def describe(self, name: str, timeout_s: float = 5.0) -> ReplicaDescription:
        async with self.admin(name) as admin:
            return await admin.describe(timeout_s=timeout_s)

    async def metric(self, name: str, metric: str) -> float:
        return (await self.describe(name)).metrics.get(metric, 0.0)

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
