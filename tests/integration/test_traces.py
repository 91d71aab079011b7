"""Traces across processes (issue 33), on a real cluster — 3 CMS members, 3 replicas, 1
reconciler — writing OTLP JSON lines, and an application (a separate process with a tracer
provider of its own) using the SDK:

- one SDK write is one trace: the client's call and attempt spans, the coordinator's span, a
  child span on every replica the write reached, each with its outcome;
- a DDL commit sent to a CMS follower is one trace with the leader's commit span, and the
  Paxos round that carried it links to that span;
- a reconciliation round's calls to replicas are its children.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from epochal.devcluster.cluster import LocalCluster
from epochal.telemetry import attributes as attr
from tests.harness import QUICK_RECONCILER, run, run_application, start_ring, until
from tests.harness.otlp import ReceivedSpan, folder_spans, otlp_receiver
from tests.harness.ring import low_bounds_everywhere

pytestmark = pytest.mark.integration

SERVER, CLIENT = 2, 3  # OTLP SpanKind

# The application: its own tracer provider (the SDK creates none), a span around a DDL commit
# sent to one CMS follower, and an ALL write through the sync client. Prints the trace ids.
APPLICATION = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    spans, replicas, follower = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
    provider = TracerProvider(resource=Resource.create({"service.name": "application"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(spans)))
    trace.set_tracer_provider(provider)

    import asyncio
    import epochal
    from epochal.cms_client import CMSClient
    from epochal.tcm import CreateKeyspace, ReplicationParams, ReplicationType

    tracer = trace.get_tracer("application")

    async def ddl():
        async with CMSClient([follower]) as cms:
            await cms.commit(
                CreateKeyspace(
                    name="traced",
                    replication=ReplicationParams.simple(3),
                    replication_type=ReplicationType.UNTRACKED,
                )
            )

    with tracer.start_as_current_span("application.ddl") as span:
        asyncio.run(ddl())
        ddl_trace = format(span.get_span_context().trace_id, "032x")

    with epochal.Client(replicas) as client:
        client.create_keyspace("shop", replication_factor=3, tracked=True)
        client.create_table(
            "shop", "carts", {"user": "text", "qty": "int"}, partition_key=["user"]
        )
        with tracer.start_as_current_span("application.order") as span:
            client.write("shop", "carts", {"user": "ann", "qty": 2}, consistency="ALL")
            write_trace = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    print(json.dumps({"ddl": ddl_trace, "write": write_trace}))
    """
)

# An application that samples nothing of its own (parent-based ratio 0) but one write, under a
# span of a provider that samples everything; another write under a span it does not sample.
SAMPLING_APPLICATION = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    trace.set_tracer_provider(TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.0))))
    sampling = TracerProvider(sampler=ALWAYS_ON).get_tracer("application")
    not_sampling = trace.get_tracer("application")

    import epochal

    ids = {}
    with epochal.Client(sys.argv[1].split(",")) as client:
        client.create_keyspace("shop", replication_factor=3)
        client.create_table("shop", "carts", {"user": "text", "qty": "int"}, partition_key=["user"])
        for name, tracer in (("sampled", sampling), ("not_sampled", not_sampling)):
            with tracer.start_as_current_span("application.order") as span:
                client.write("shop", "carts", {"user": name, "qty": 1}, consistency="ALL")
                ids[name] = format(span.get_span_context().trace_id, "032x")
    print(json.dumps(ids))
    """
)


def one(spans: list[ReceivedSpan], what: str) -> ReceivedSpan:
    assert len(spans) == 1, f"{len(spans)} spans of {what}: {spans}"
    return spans[0]


def test_an_sdk_write_a_forwarded_commit_and_a_reconciliation_round_are_each_one_trace(
    tmp_path: Path,
) -> None:
    traces = tmp_path / "traces"
    cluster = LocalCluster(tmp_path / "cluster", env={"EPOCHAL_TRACE_DIR": str(traces)})
    cluster.reconciler_args = QUICK_RECONCILER
    ids: dict[str, str] = {}
    members: dict[str, str] = {}

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        members["leader"] = leader = await cluster.cms.leader()
        members["follower"] = follower = next(m for m in cluster.cms.members if m != leader)
        cluster.start_reconciler(cluster.add_reconciler().name)
        ids.update(
            await run_application(
                APPLICATION,
                tmp_path,
                str(traces / "application.jsonl"),
                ",".join(cluster.addresses),
                cluster.cms.members[follower].address,
            )
        )

        await until(
            "a reconciliation round reaches every replica",
            lambda: low_bounds_everywhere(cluster, "shop"),
            60,
        )
        cluster.stop()  # gracefully: every process flushes its spans

    run(cluster, scenario, timeout_s=240)
    spans = folder_spans(traces)
    by_id = {s.span_id: s for s in spans}

    # One SDK write: application span > client.write > client.attempt > replica.write (the
    # coordinator) > replica.apply on each of the three replicas.
    write = [s for s in spans if s.trace_id == ids["write"]]
    order = one([s for s in write if s.name == "application.order"], "the application's span")
    call = one([s for s in write if s.name == "client.write"], "the SDK call")
    assert call.parent_span_id == order.span_id and call.kind == CLIENT
    assert call.attributes[attr.CONSISTENCY] == "ALL"
    assert call.attributes[attr.OUTCOME] == attr.OK
    attempt = one([s for s in write if s.name == attr.CLIENT_ATTEMPT], "the attempt")
    assert attempt.parent_span_id == call.span_id and attempt.attributes[attr.ATTEMPT] == 1
    coordinator = one([s for s in write if s.name == attr.REPLICA_WRITE], "the coordinator")
    assert coordinator.parent_span_id == attempt.span_id and coordinator.kind == SERVER
    assert coordinator.service == "replica"
    assert coordinator.attributes[attr.OUTCOME] == attr.OK
    assert coordinator.attributes[attr.KEYSPACE] == "shop"
    assert coordinator.attributes[attr.TABLE] == "carts"
    assert coordinator.attributes[attr.CONSISTENCY] == "ALL"
    assert coordinator.attributes[attr.EPOCH] > 0 and coordinator.attributes[attr.REQUEST_BYTES] > 0
    applies = [s for s in write if s.name == attr.REPLICA_APPLY]
    assert {s.parent_span_id for s in applies} == {coordinator.span_id}
    node_ids = {node.node_id for node in cluster.nodes.values()}
    assert {s.attributes[attr.NODE_ID] for s in applies} == node_ids, applies
    assert len(applies) == 3 and all(s.attributes[attr.OUTCOME] == attr.OK for s in applies)
    assert len({s.resource[attr.SERVICE_INSTANCE] for s in applies}) == 3  # three processes
    assert set(coordinator.attributes[attr.REPLICAS_ANSWERED]) == node_ids
    # and nothing else: no background work (a shared catch-up's fetches and epoch applies, a
    # stream's writer) that the write happened to start joins its trace
    expected = {"application.order", "client.write", attr.CLIENT_ATTEMPT, attr.REPLICA_WRITE}
    assert {s.name for s in write} <= expected | {attr.REPLICA_APPLY, attr.CATCH_UP}, write

    # One DDL commit sent to a follower: its span, the leader's as its child, the round's link.
    ddl = [s for s in spans if s.trace_id == ids["ddl"]]
    commits = {s.attributes[attr.MEMBER]: s for s in ddl if s.name == attr.CMS_COMMIT}
    assert set(commits) == {members["follower"], members["leader"]}, ddl
    forwarded, led = commits[members["follower"]], commits[members["leader"]]
    assert by_id[forwarded.parent_span_id].name == "application.ddl"
    assert forwarded.attributes[attr.FORWARDED] is True
    assert forwarded.attributes[attr.LEADER] == members["leader"]
    assert led.parent_span_id == forwarded.span_id and led.kind == SERVER
    assert led.attributes[attr.OUTCOME] == "committed"
    assert attr.PHASE_QUEUED in led.events and attr.PHASE_ANSWERED in led.events
    assert led.events.index(attr.PHASE_QUEUED) < led.events.index(attr.PHASE_APPLIED)
    rounds = [
        s for s in spans if s.name == attr.PAXOS_ROUND and (led.trace_id, led.span_id) in s.links
    ]
    paxos_round = one(rounds, "the Paxos round carrying the commit")
    assert {s.name for s in ddl} == {"application.ddl", attr.CMS_COMMIT}, ddl  # nothing else
    assert paxos_round.attributes[attr.MEMBER] == members["leader"]
    assert paxos_round.attributes[attr.SLOT] > 0

    # A reconciliation round's calls to replicas are its children, on the replicas.
    round_ids = {s.span_id for s in spans if s.name == attr.RECONCILE_ROUND}
    assert round_ids, "no reconciliation round was traced"
    children = [s for s in spans if s.parent_span_id in round_ids and s.service == "replica"]
    assert children, "no replica call of a reconciliation round was its child"
    assert {s.name.rpartition("/")[0] for s in children} == {
        f"{attr.RPC_PREFIX}epochal.v1.ReplicaReconcile"
    }
    assert all(s.trace_id == by_id[s.parent_span_id].trace_id for s in children)


def test_the_spans_reach_a_collector_and_at_ratio_zero_only_a_sampled_parents_children_do(
    tmp_path: Path,
) -> None:
    """Every service exports to an OTLP gRPC receiver (and to files) with the default sampler
    at ratio 0: nothing of their own is exported, but the spans of a write whose client span
    was sampled are (children follow their parent's decision), and those of a write whose
    client span was not sampled are not."""
    traces = tmp_path / "traces"
    ids: dict[str, str] = {}
    with otlp_receiver() as receiver:
        env = {
            "EPOCHAL_TRACE_DIR": str(traces),
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_TRACES_SAMPLER_ARG": "0",
        }
        cluster = LocalCluster(tmp_path / "cluster", env=env)
        cluster.reconciler_args = QUICK_RECONCILER

        async def scenario() -> None:
            await start_ring(cluster, num_tokens=4)
            cluster.start_reconciler(cluster.add_reconciler().name)
            ids.update(
                await run_application(SAMPLING_APPLICATION, tmp_path, ",".join(cluster.addresses))
            )
            cluster.stop()  # gracefully: every process flushes its spans to both

        run(cluster, scenario, timeout_s=240)
        received = receiver.spans()
    services = [s for s in received if s.service in ("cms", "replica", "reconciler")]
    assert {s.trace_id for s in services} == {ids["sampled"]}, "a span not of the sampled write"
    names = Counter(s.name for s in services)
    assert names[attr.REPLICA_WRITE] == 1 and names[attr.REPLICA_APPLY] == 3, names
    # and the coordinator's wait for the epoch the client named, if it had to (the fetch it
    # shares with any other waiter is a trace of its own, not sampled at ratio 0)
    assert set(names) - {attr.REPLICA_WRITE, attr.REPLICA_APPLY} <= {attr.CATCH_UP}, names
    in_files = folder_spans(traces)
    assert sorted((s.name, s.span_id) for s in in_files) == sorted(
        (s.name, s.span_id) for s in services
    ), "the files and the collector got different spans"
