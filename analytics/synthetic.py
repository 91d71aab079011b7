"""Span files of a made-up cluster, shaped like a real one's: for benchmarks of the job, and for
tests that need many spans or a known answer without a cluster.

The cluster: an application (the SDK), 3 CMS members, ``replicas`` replicas and a reconciler,
each writing its own ``<service>-<instance>.jsonl`` of OTLP ``TracesData`` lines (batches of up to
``BATCH`` spans, as the batch span processor exports them). Its work, drawn from a seeded random:

- an SDK write at ONE, QUORUM or ALL: ``client.write`` > ``client.attempt`` > ``replica.write``
  > ``replica.apply`` on 3 replicas (6 spans);
- an SDK read: ``client.read`` > ``client.attempt`` > ``replica.read`` > ``replica.local_read`` on
  2 replicas (5 spans);
- now and then a DDL commit: ``client.commit`` > ``client.attempt`` > ``cms.commit`` (the member
  called, forwarding) > ``cms.commit`` (the leader, with its phase events); the ``paxos.round``
  linked to it and a ``cms.step`` on the two others; ``epoch.apply`` on every follower of the log;
- a reconciliation round: ``reconciler.round`` > range summary, fence and low-bound calls on 3
  replicas (10 spans).

Names and attributes come from ``epochal.telemetry.attributes``. ``generate`` returns what it
wrote, by span name, so a test can check the job's counts against it.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochal.telemetry import attributes as attr

BATCH = 512
LEVELS = ("ONE", "QUORUM", "ALL")
MS = 1_000_000
START_NS = 1_800_000_000 * 1_000_000_000
DDL_EVERY = 200  # one DDL commit per this many requests
RECONCILE_EVERY = 20


def any_value(v: Any) -> dict[str, Any]:
    """An OTLP AnyValue in the JSON encoding (64-bit integers as strings)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"stringValue": v}


@dataclass
class _Process:
    service: str
    instance: str
    node: str
    spans: list[dict[str, Any]] = field(default_factory=list)

    def resource(self) -> dict[str, Any]:
        pairs = {attr.SERVICE_NAME: self.service, attr.SERVICE_INSTANCE: self.instance}
        if self.node:
            pairs[attr.NODE_ID] = self.node
        return {"attributes": [{"key": k, "value": any_value(v)} for k, v in pairs.items()]}


class _Cluster:
    def __init__(self, replicas: int, rng: random.Random) -> None:
        self.rng = rng
        self.app = _Process("application", "app-1", "")
        self.cms = [_Process("cms", f"cms{i}", f"cms{i}") for i in (1, 2, 3)]
        self.replicas = [
            _Process("replica", f"127.0.0.1_{9000 + i}", f"node-{i}")
            for i in range(1, replicas + 1)
        ]
        self.reconciler = _Process("reconciler", "127.0.0.1_8999", "reconciler1")
        self.now = START_NS
        self.epoch = 1
        self.written: Counter[str] = Counter()
        self._ids = rng.getrandbits(48)

    def processes(self) -> list[_Process]:
        return [self.app, *self.cms, *self.replicas, self.reconciler]

    def _id(self) -> str:
        self._ids += 1
        return f"{self._ids:016x}"

    def _ms(self, mean: float) -> int:
        """A duration around ``mean`` ms, with a long tail (log-normal)."""
        return int(self.rng.lognormvariate(0, 0.6) * mean * MS) + 1

    def span(
        self,
        process: _Process,
        name: str,
        trace: str,
        parent: str,
        start: int,
        end: int,
        kind: int = 2,
        events: list[tuple[str, int]] | None = None,
        links: list[tuple[str, str]] | None = None,
        **attributes: Any,
    ) -> str:
        span_id = self._id()
        process.spans.append(
            {
                "traceId": trace,
                "spanId": span_id,
                "parentSpanId": parent,
                "name": name,
                "kind": kind,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(end),
                "attributes": [{"key": k, "value": any_value(v)} for k, v in attributes.items()],
                "events": [{"timeUnixNano": str(t), "name": n} for n, t in events or ()],
                "links": [{"traceId": t, "spanId": s} for t, s in links or ()],
                "status": {},
            }
        )
        self.written[name] += 1
        return span_id

    def request(self, write: bool) -> None:
        trace = f"{self.rng.getrandbits(128):032x}"
        level = self.rng.choice(LEVELS)
        coordinator = self.rng.choice(self.replicas)
        start = self.now
        inner = self._ms(2.0 if write else 1.0)
        end = start + inner + self._ms(0.6)
        name, server = (
            ("client.write", attr.REPLICA_WRITE) if write else ("client.read", attr.REPLICA_READ)
        )
        common = {attr.KEYSPACE: "shop", attr.TABLE: "carts", attr.CONSISTENCY: level}
        call = self.span(self.app, name, trace, "", start, end, 3, attempts=1, **common)
        attempt = self.span(
            self.app,
            attr.CLIENT_ATTEMPT,
            trace,
            call,
            start + MS // 10,
            end - MS // 10,
            3,
            **{attr.ATTEMPT: 1, attr.COORDINATOR: coordinator.instance},
        )
        c_start, c_end = start + MS // 5, end - MS // 5
        coordinating = self.span(
            coordinator,
            server,
            trace,
            attempt,
            c_start,
            c_end,
            **common,
            **{attr.EPOCH: self.epoch, attr.NODE_ID: coordinator.node, attr.OUTCOME: attr.OK},
        )
        reached = self.rng.sample(self.replicas, 3 if write else 2)
        for replica in reached:
            work = attr.REPLICA_APPLY if write else attr.REPLICA_LOCAL_READ
            r_start = c_start + self._ms(0.2)
            self.span(
                replica,
                work,
                trace,
                coordinating,
                r_start,
                min(r_start + self._ms(0.5), c_end),
                **{attr.NODE_ID: replica.node, attr.OUTCOME: attr.OK},
            )
        self.now = end + self._ms(0.3)

    def commit(self) -> None:
        trace = f"{self.rng.getrandbits(128):032x}"
        start = self.now
        follower, leader, third = self.cms[1], self.cms[0], self.cms[2]
        queued = start + self._ms(0.3)
        validated = queued + self._ms(0.5)
        accepted = validated + self._ms(3.0)
        applied, answered = accepted + MS // 5, accepted + MS // 2
        end = answered + self._ms(0.5)
        self.epoch += 1
        kind = {attr.TRANSFORMATION: "create_table", attr.EPOCH: self.epoch}
        call = self.span(self.app, "client.commit", trace, "", start, end + MS, 3, attempts=1)
        attempt = self.span(
            self.app, attr.CLIENT_ATTEMPT, trace, call, start, end + MS, 3, **{attr.ATTEMPT: 1}
        )
        called = self.span(
            follower,
            attr.CMS_COMMIT,
            trace,
            attempt,
            start,
            end,
            **kind,
            **{attr.FORWARDED: True, attr.OUTCOME: attr.COMMITTED},
        )
        phases = [
            (attr.PHASE_QUEUED, queued),
            (attr.PHASE_VALIDATED, validated),
            (attr.PHASE_ACCEPTED, accepted),
            (attr.PHASE_APPLIED, applied),
            (attr.PHASE_ANSWERED, answered),
        ]
        led = self.span(
            leader,
            attr.CMS_COMMIT,
            trace,
            called,
            queued - MS // 10,
            answered,
            events=phases,
            **kind,
            **{attr.FORWARDED: False, attr.OUTCOME: attr.COMMITTED},
        )
        round_trace = f"{self.rng.getrandbits(128):032x}"
        paxos = self.span(
            leader,
            attr.PAXOS_ROUND,
            round_trace,
            "",
            validated,
            applied,
            links=[(trace, led)],
            **{attr.OUTCOME: attr.OK},
        )
        for member in (follower, third):
            self.span(member, attr.CMS_STEP, round_trace, paxos, validated + MS, validated + 2 * MS)
        for node in (*self.replicas, self.reconciler):
            at = accepted + self._ms(4.0)
            self.span(
                node,
                attr.EPOCH_APPLY,
                f"{self.rng.getrandbits(128):032x}",
                "",
                at,
                at,
                **{attr.EPOCH: self.epoch, attr.NODE_ID: node.node},
            )
        self.now = end + self._ms(0.3)

    def reconcile(self) -> None:
        trace = f"{self.rng.getrandbits(128):032x}"
        start = self.now
        end = start + self._ms(6.0)
        reached_ms = (start // MS) - 5_000 - self.rng.randrange(500)
        round_ = self.span(
            self.reconciler,
            attr.RECONCILE_ROUND,
            trace,
            "",
            start,
            end,
            **{
                attr.KEYSPACE: "shop",
                attr.RANGE: f"({self.rng.randrange(8)}, 8]",
                attr.OUTCOME: attr.ROUND_ADVANCED,
                attr.RECONCILIATION_TIME: reached_ms << 16,
                attr.DELIVERED: 0,
                attr.UNREACHABLE: [],
            },
        )
        step = (end - start) // 3
        for i, method in enumerate(("RangeSummary", "Fence", "AdvanceLowBound")):
            for replica in self.replicas[:3]:
                at = start + i * step + MS // 10
                self.span(
                    replica,
                    f"{attr.RPC_PREFIX}epochal.v1.ReplicaReconcile/{method}",
                    trace,
                    round_,
                    at,
                    at + step // 2,
                )
        self.now = end


def _lines(process: _Process) -> Iterator[str]:
    resource = process.resource()
    for i in range(0, len(process.spans), BATCH):
        batch = process.spans[i : i + BATCH]
        yield json.dumps(
            {
                "resourceSpans": [
                    {
                        "resource": resource,
                        "scopeSpans": [
                            {"scope": {"name": f"epochal.{process.service}"}, "spans": batch}
                        ],
                    }
                ]
            },
            separators=(",", ":"),
        )


def generate(folder: Path, spans: int, *, replicas: int = 6, seed: int = 0) -> Counter[str]:
    """Write at least ``spans`` spans (a whole request more at most) to ``folder``; spans written
    by name."""
    cluster = _Cluster(replicas, random.Random(seed))
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        p.instance: (folder / f"{p.service}-{p.instance}.jsonl").open("w")
        for p in cluster.processes()
    }
    try:
        requests = 0
        while sum(cluster.written.values()) < spans:
            requests += 1
            if requests % DDL_EVERY == 0:
                cluster.commit()
            elif requests % RECONCILE_EVERY == 0:
                cluster.reconcile()
            else:
                cluster.request(write=cluster.rng.random() < 0.6)
            if requests % 1000 == 0:
                _flush(cluster, files)
        _flush(cluster, files)
    finally:
        for handle in files.values():
            handle.close()
    return cluster.written


def _flush(cluster: _Cluster, files: dict[str, Any]) -> None:
    for process in cluster.processes():
        for line in _lines(process):
            files[process.instance].write(line + "\n")
        process.spans.clear()
