"""A recorded-history run against real processes (Jepsen's method), checked by
``epochal.sim.history``.

3 CMS members and 3 replicas on 127.0.0.1; a tracked keyspace with RF 3 and one table whose rows
are written once. Writers (each its own SDK client) write new rows at QUORUM and now and then
delete one they wrote; readers read whole partitions at QUORUM; every operation is recorded with
its invocation and completion time and what the client saw. Meanwhile a nemesis faults one
replica at a time: SIGKILL then restart, or SIGSTOP then SIGCONT. At the end every fault is
healed, each partition is read once through each replica, and the history is checked.

Optionally (``Workload``; off by default) a reconciler runs all along, and the ring changes in
the middle of the run: a new replica bootstraps, later a founder decommissions and is stopped.
A fault and a topology operation never overlap (``Ring.calm``): a replica killed while it streams
fails the operation, which the topology tests check, not this one.

The history (and the faults and operations, with their times) is written as JSON beside the
cluster's logs, so that a violation can be traced to the servers' logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from epochal.admin import Decommission, OperationStatus
from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError
from epochal.sim.history import Kind, Op, Outcome, Verdict, check, to_record
from tests.harness import start_ring

from .partitions import Partition, partitions

KEYSPACE = "hist"
TABLE = "rows"
COLUMNS = {"p": "int", "k": "text", "v": "text"}
NUM_TOKENS = 4  # of each founder, and of a replica that joins


@dataclass(frozen=True, slots=True)
class Workload:
    duration_s: float = 20.0
    writers: int = 6
    readers: int = 4
    partitions: int = 8
    delete_fraction: float = 0.1
    faults: bool = True
    fault_every_s: tuple[float, float] = (1.0, 3.0)  # quiet time between faults
    fault_length_s: tuple[float, float] = (1.0, 4.0)
    client_timeout_s: float = 3.0
    seed: int = 0
    # A reconciler runs all along with these flags (None: none runs).
    reconciler_args: tuple[str, ...] | None = None
    # At these shares of the run a new replica bootstraps, then a founder decommissions.
    join_at: float | None = None
    decommission_at: float | None = None
    # Replicas cut off from their peers and reconcilers for shares of the run (partitions.py).
    partitions_schedule: tuple[Partition, ...] = ()


@dataclass
class Recorder:
    started: float = field(default_factory=time.monotonic)
    ops: list[Op] = field(default_factory=list)
    faults: list[dict[str, object]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.started

    def add(self, **fields: object) -> None:
        self.ops.append(Op(index=len(self.ops), **fields))  # type: ignore[arg-type]

    def fault(self, what: str, replica: str, **more: object) -> None:
        self.faults.append({"at": round(self.now(), 4), "what": what, "replica": replica, **more})


@dataclass
class Ring:
    """The replicas in the ring, which faults and the final reads pick from. A fault and a
    topology operation each hold ``calm``: they never overlap."""

    members: list[str]
    calm: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class RunResult:
    verdict: Verdict
    ops: int
    writes_acknowledged: int
    reads_ok: int
    reads_failed: int
    kills: int
    pauses: int
    history_path: Path
    operations: list[OperationStatus]  # the topology operations' final statuses, in order


async def run_history(cluster: LocalCluster, workload: Workload, out: Path) -> RunResult:
    """Form the ring, run the workload under faults (and topology operations), heal, read
    everything, check."""
    await start_ring(cluster, num_tokens=NUM_TOKENS)
    async with AsyncClient(cluster.addresses) as admin:
        await admin.create_keyspace(KEYSPACE, replication_factor=3, tracked=True)
        await admin.create_table(
            KEYSPACE, TABLE, COLUMNS, partition_key=["p"], clustering_key=["k"]
        )
        epoch = admin.epoch
    await cluster.wait_for_epoch(epoch)
    if workload.reconciler_args is not None:
        cluster.reconciler_args = workload.reconciler_args
        cluster.start_reconciler(cluster.add_reconciler().name)
    ring = Ring(sorted(cluster.nodes))
    recorder = Recorder()
    rng = random.Random(workload.seed)
    deadline = recorder.now() + workload.duration_s
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_writer(cluster, workload, recorder, f"w{i}", rng.random(), deadline))
        for i in range(workload.writers)
    ]
    tasks += [
        asyncio.create_task(_reader(cluster, workload, recorder, f"r{i}", rng.random(), deadline))
        for i in range(workload.readers)
    ]
    nemesis = asyncio.create_task(_nemesis(cluster, workload, recorder, ring, rng.random(), stop))
    topology = asyncio.create_task(_topology(cluster, workload, recorder, ring, rng.random()))
    cuts = asyncio.create_task(partitions(cluster, workload, recorder, KEYSPACE, _read))
    try:
        await asyncio.gather(*tasks)
        operations = await topology
        await cuts
    finally:
        topology.cancel()
        cuts.cancel()
        stop.set()
        await nemesis
    finals = await _final_reads(cluster, workload, recorder, ring)
    verdict = check(recorder.ops, finals)
    path = out / "history.json"
    path.write_text(
        json.dumps(
            {
                "workload": {k: getattr(workload, k) for k in workload.__dataclass_fields__},
                "nodes": {name: r.node_id for name, r in cluster.nodes.items()},
                "faults": recorder.faults,
                "ops": [to_record(op) for op in recorder.ops],
                "final_reads": [to_record(op) for op in finals],
                "violations": [str(v) for v in verdict.violations],
                "counts": dict(verdict.counts),
            },
            indent=1,
            default=str,  # (a workload's partitions)
        )
    )
    return RunResult(
        verdict=verdict,
        ops=len(recorder.ops),
        writes_acknowledged=sum(
            1 for op in recorder.ops if op.kind is Kind.WRITE and op.acknowledged
        ),
        reads_ok=sum(1 for op in recorder.ops if op.kind is Kind.READ and op.acknowledged),
        reads_failed=sum(1 for op in recorder.ops if op.kind is Kind.READ and not op.acknowledged),
        kills=sum(1 for f in recorder.faults if f["what"] == "kill"),
        pauses=sum(1 for f in recorder.faults if f["what"] == "pause"),
        history_path=path,
        operations=operations,
    )


# --------------------------------------------------------------------------- clients


async def _writer(
    cluster: LocalCluster,
    workload: Workload,
    recorder: Recorder,
    name: str,
    seed: float,
    deadline: float,
) -> None:
    rng = random.Random(seed)
    written: list[tuple[int, str]] = []  # acknowledged rows, not deleted yet
    async with AsyncClient(cluster.addresses, timeout_s=workload.client_timeout_s) as client:
        for n in range(1_000_000):
            if recorder.now() >= deadline:
                return
            if written and rng.random() < workload.delete_fraction:
                partition, row = written.pop(rng.randrange(len(written)))
                key = {"p": partition, "k": row}
                await _record(recorder, name, Kind.DELETE, key, client.delete(KEYSPACE, TABLE, key))
                continue
            partition = rng.randrange(workload.partitions)
            key = {"p": partition, "k": f"{name}-{n}"}
            value = f"{name}:{n}:{rng.randrange(1 << 30)}"
            call = client.write(KEYSPACE, TABLE, {**key, "v": value})
            if await _record(recorder, name, Kind.WRITE, key, call, value) is Outcome.OK:
                written.append((partition, key["k"]))


async def _record(
    recorder: Recorder, name: str, kind: Kind, key: dict, call: object, value: str = ""
) -> Outcome:
    """Run a write or delete of the row ``key`` and record it."""
    invoke = recorder.now()
    outcome, detail = await _outcome(call)
    recorder.add(
        process=name,
        kind=kind,
        partition=key["p"],
        invoke=invoke,
        complete=recorder.now(),
        outcome=outcome,
        row=key["k"],
        value=value,
        detail=detail,
    )
    return outcome


async def _outcome(call: object) -> tuple[Outcome, str]:
    """A write's outcome. Every failure is indeterminate: the SDK retries, so even a refusal
    may follow an attempt that stored the mutation."""
    try:
        result = await call  # type: ignore[misc]
    except EpochalError as error:
        return Outcome.INFO, f"{type(error).__name__}: {error}"
    return Outcome.OK, (
        f"{result.coordinator} {result.mutation_id} acked by {','.join(result.acknowledged)} "
        f"after {result.attempts} attempt(s)"
    )


async def _reader(
    cluster: LocalCluster,
    workload: Workload,
    recorder: Recorder,
    name: str,
    seed: float,
    deadline: float,
) -> None:
    rng = random.Random(seed)
    async with AsyncClient(cluster.addresses, timeout_s=workload.client_timeout_s) as client:
        while recorder.now() < deadline:
            partition = rng.randrange(workload.partitions)
            await _read(client, recorder, name, partition, None)


async def _read(
    client: AsyncClient, recorder: Recorder, name: str, partition: int, coordinator: str | None
) -> Op:
    invoke = recorder.now()
    try:
        result = await client.read(
            KEYSPACE,
            TABLE,
            {"p": partition},
            consistency=Consistency.QUORUM,
            coordinator=coordinator,
        )
    except EpochalError as error:
        recorder.add(
            process=name,
            kind=Kind.READ,
            partition=partition,
            invoke=invoke,
            complete=recorder.now(),
            outcome=Outcome.INFO,
            detail=f"{type(error).__name__}: {error}",
        )
        return recorder.ops[-1]
    stats = result.stats
    recorder.add(
        process=name,
        kind=Kind.READ,
        partition=partition,
        invoke=invoke,
        complete=recorder.now(),
        outcome=Outcome.OK,
        rows={str(row["k"]): str(row["v"]) for row in result.rows},
        detail=(
            f"coordinator {result.coordinator}, data {stats.data_replica}, asked "
            f"{','.join(stats.replicas)}, summaries "
            f"{'agreed' if stats.summaries_agreed else 'differed'}"
            + "".join(
                f" {node}:" + ",".join(f"{n}/L{g}" for n, g in logs)
                for node, logs in sorted(stats.differing.items())
            )
            + f", {stats.summary_rounds} round(s), repaired {stats.repaired_mutations}"
        ),
    )
    return recorder.ops[-1]


# --------------------------------------------------------------------------- faults


async def _nemesis(
    cluster: LocalCluster,
    workload: Workload,
    recorder: Recorder,
    ring: Ring,
    seed: float,
    stop: asyncio.Event,
) -> None:
    """One fault at a time, of a ring member: a replica SIGKILLed and restarted, or SIGSTOPped
    and continued."""
    if not workload.faults:
        return
    rng = random.Random(seed)
    kill = rng.random() < 0.5  # the kinds alternate, so a short run has both
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*workload.fault_every_s))
        async with ring.calm:
            if stop.is_set():
                return
            name = rng.choice(ring.members)
            length_s = rng.uniform(*workload.fault_length_s)
            kill = not kill
            await _fault(cluster, recorder, name, kill, length_s, stop)


async def _fault(
    cluster: LocalCluster,
    recorder: Recorder,
    name: str,
    kill: bool,
    length_s: float,
    stop: asyncio.Event,
) -> None:
    """``name`` SIGKILLed, restarted ``length_s`` later (or at ``stop``) and serving again; or
    SIGSTOPped and continued."""
    replica = cluster.nodes[name]
    if kill:
        cluster.kill_replica(name)
        recorder.fault("kill", name)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), length_s)
        cluster.start_replica(name)
        recorder.fault("restart", name)
        await cluster.wait_ready([name], timeout_s=60.0)
        recorder.fault("serving", name)
        return
    assert replica.process is not None
    os.kill(replica.process.pid, signal.SIGSTOP)
    recorder.fault("pause", name)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), length_s)
    finally:
        os.kill(replica.process.pid, signal.SIGCONT)
        recorder.fault("continue", name)


async def _topology(
    cluster: LocalCluster, workload: Workload, recorder: Recorder, ring: Ring, seed: float
) -> list[OperationStatus]:
    """At ``join_at`` of the run a new replica bootstraps into the ring; at ``decommission_at``
    a founder leaves it and is stopped. Each holds ``ring.calm``; their final statuses."""
    rng = random.Random(seed)
    founders = list(ring.members)
    statuses = []
    if workload.join_at is not None:
        await asyncio.sleep(workload.join_at * workload.duration_s - recorder.now())
        async with ring.calm:
            name = cluster.add_replica(auto_join=False).name
            cluster.start_replica(name)
            await cluster.wait_ready([name], timeout_s=60.0)
            recorder.fault("bootstrap", name)
            statuses.append(await cluster.bootstrap(name, num_tokens=NUM_TOKENS))
            recorder.fault("bootstrapped", name, state=statuses[-1].state)
            ring.members.append(name)
    if workload.decommission_at is not None:
        await asyncio.sleep(workload.decommission_at * workload.duration_s - recorder.now())
        async with ring.calm:
            name = rng.choice(founders)
            ring.members.remove(name)
            recorder.fault("decommission", name)
            statuses.append(await cluster.operation(name, Decommission()))
            recorder.fault("decommissioned", name, state=statuses[-1].state)
            cluster.stop_replica(name)
            recorder.fault("stop", name)
    return statuses


async def _final_reads(
    cluster: LocalCluster, workload: Workload, recorder: Recorder, ring: Ring
) -> list[Op]:
    """Once every ring member serves again: each partition read once through each of them."""
    for name in ring.members:
        if not cluster.nodes[name].running:
            cluster.start_replica(name)
    await cluster.wait_ready(ring.members, timeout_s=60.0)
    addresses = [cluster.nodes[name].address for name in ring.members]
    finals = []
    async with AsyncClient(addresses, timeout_s=10.0) as client:
        for partition in range(workload.partitions):
            for address in addresses:
                finals.append(await _read(client, recorder, "final", partition, address))
    # Final reads are checked as reads too; they are kept apart so that the end is checked
    # against them.
    del recorder.ops[len(recorder.ops) - len(finals) :]
    return finals
