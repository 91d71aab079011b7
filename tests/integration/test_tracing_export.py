"""A real CMS member's spans reach a collector over OTLP gRPC, each with the member's resource,
and the span file of the same run holds the very same spans; at sampling ratio 0 (the default
sampler, parent-based ratio, with OTEL_TRACES_SAMPLER_ARG=0) neither the collector nor the
file gets one. A member flushes on SIGTERM: it is stopped gracefully right after its commits
are acknowledged — well within the batch processor's 5 s delay — and every span is there once
it has exited; a collector that does not answer delays neither the stop past the grace period
nor the file. A replica's spans carry its datacenter and rack, and its node id from the start
that knows it (the instance id before it has registered). A wrong sampling variable stops a
member before it starts, naming the variable.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.cms import LocalCMS
from epochal.runtime.processes import free_address
from tests.harness import (
    FAST_ELECTIONS,
    ReceivedSpan,
    TraceReceiver,
    assert_quiet,
    file_spans,
    keyspace,
    otlp_receiver,
    run,
)

pytestmark = pytest.mark.integration
COMMITS = 3
SCENARIO_TIMEOUT_S = 120


def member_with_collector(tmp_path: Path, receiver: TraceReceiver, ratio: str) -> LocalCMS:
    """One CMS member (its own leader) sending spans to ``receiver`` and to a span file, with
    the default sampler at ``ratio``; the tracing variables of whoever runs the tests do not
    reach it."""
    return LocalCMS(
        tmp_path / "cms",
        size=1,
        extra_args=FAST_ELECTIONS,
        env={
            **collector_env(receiver.endpoint),
            "EPOCHAL_TRACE_DIR": str(tmp_path / "spans"),
            "OTEL_TRACES_SAMPLER_ARG": ratio,
        },
    )


def collector_env(endpoint: str) -> dict[str, str]:
    """Spans to the collector at ``endpoint`` alone, sampled by default (an empty variable
    counts as unset)."""
    return {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",
        "EPOCHAL_TRACE_DIR": "",
        "OTEL_TRACES_SAMPLER": "",
        "OTEL_TRACES_SAMPLER_ARG": "",
        "OTEL_SDK_DISABLED": "",
        "OTEL_PROPAGATORS": "",
        "OTEL_RESOURCE_ATTRIBUTES": "",
    }


async def commit_then_stop_gracefully(local: LocalCMS) -> None:
    """Commit COMMITS keyspaces (each acknowledged), then SIGTERM the member and wait for its
    exit, which must be its own (status 0), not the SIGKILL after the grace period."""
    await local.wait_serving()
    async with CMSClient(local.addresses) as cms:
        for n in range(COMMITS):
            await cms.commit(keyspace(f"traced{n}"))
    await asyncio.to_thread(local.stop)
    member = local.members["cms1"]
    assert member.process is not None and member.process.returncode == 0, member.log_path


def test_a_members_spans_reach_the_collector_with_its_resource_and_match_its_file(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        local = member_with_collector(tmp_path, receiver, ratio="")
        local.start()
        run(local, lambda: commit_then_stop_gracefully(local), SCENARIO_TIMEOUT_S)
        received = receiver.spans()
    log = local.members["cms1"].log_path.read_text()
    file = tmp_path / "spans" / "cms-cms1.jsonl"
    assert (
        f"spans to {file} and OTLP gRPC {receiver.endpoint}, sampler parentbased_traceidratio(1.0)"
    ) in log
    commits = [s for s in received if s.name == "cms.commit"]
    assert len(commits) >= COMMITS, sorted({s.name for s in received})
    assert "paxos.round" in {s.name for s in received}
    for span in received:
        assert span.resource["service.name"] == "cms"
        assert span.resource["service.instance.id"] == "cms1"
        assert span.resource["epochal.node.id"] == "cms1"
        assert span.resource["service.version"] == metadata.version("epochal")
        assert "epochal.datacenter" not in span.resource  # a member has none
    # The file of the same run: the same spans, with the same resource.
    written = file_spans([file])
    assert sorted((s.trace_id, s.span_id, s.name) for s in written) == sorted(
        (s.trace_id, s.span_id, s.name) for s in received
    )
    assert {tuple(sorted(s.resource.items())) for s in written} == {
        tuple(sorted(s.resource.items())) for s in received
    }


def test_at_ratio_zero_neither_the_collector_nor_the_file_gets_a_span(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        local = member_with_collector(tmp_path, receiver, ratio="0")
        local.start()
        run(local, lambda: commit_then_stop_gracefully(local), SCENARIO_TIMEOUT_S)
        requests = receiver.requests
    log = local.members["cms1"].log_path.read_text()
    assert "sampler parentbased_traceidratio(0.0)" in log
    assert_quiet(log.splitlines(), "cms1")
    assert requests == []
    assert (tmp_path / "spans" / "cms-cms1.jsonl").read_text() == ""


def test_a_collector_that_does_not_answer_holds_neither_the_stop_nor_the_file(
    tmp_path: Path,
) -> None:
    """Its exporter would retry for 10 s, past the 5 s grace period (an overrun, exit status
    70); the stop gives the collector at most OTLP_FLUSH_MAX_S."""
    nobody = f"http://{free_address(set())}"  # nothing listens there
    local = LocalCMS(
        tmp_path / "cms",
        size=1,
        extra_args=FAST_ELECTIONS,
        env={
            **collector_env(nobody),
            "EPOCHAL_TRACE_DIR": str(tmp_path / "spans"),
        },
    )
    local.start()
    run(local, lambda: commit_then_stop_gracefully(local), SCENARIO_TIMEOUT_S)
    names = {s.name for s in file_spans([tmp_path / "spans" / "cms-cms1.jsonl"])}
    assert {"cms.commit", "paxos.round"} <= names


def test_a_replicas_spans_carry_its_location_and_its_node_id_once_known(tmp_path: Path) -> None:
    """Its first start knows no node id (it registers after the server runs): the instance id
    stands for it; a restart knows the stored one."""
    with otlp_receiver() as receiver:
        cluster = LocalCluster(
            tmp_path / "cluster",
            replicas=1,
            cms_size=1,
            locations=[("dc2", "r7")],
            env=collector_env(receiver.endpoint),
        )
        replica = cluster.nodes["replica1"]
        instance = replica.address.replace(":", "_")

        async def scenario() -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
            cluster.start()
            await cluster.wait_joined()
            await asyncio.to_thread(cluster.stop_replica, "replica1")
            first = replica_spans(receiver)
            cluster.start_replica("replica1")
            await cluster.wait_ready(["replica1"])
            async with CMSClient(cluster.cms.addresses) as cms:  # an epoch for it to apply
                committed = await cms.commit(keyspace("after_restart"))
            await cluster.wait_for_epoch(committed.epoch)
            await asyncio.to_thread(cluster.stop_replica, "replica1")
            return first, replica_spans(receiver)[len(first) :]

        first, second = run(cluster, scenario, SCENARIO_TIMEOUT_S)
    assert first and second, "the replica sent no span"
    expected = {
        "service.name": "replica",
        "service.instance.id": instance,
        "service.version": metadata.version("epochal"),
        "epochal.node.id": instance,
        "epochal.datacenter": "dc2",
        "epochal.rack": "r7",
    }
    assert all(s.resource.items() >= expected.items() for s in first), first[0].resource
    restarted = expected | {"epochal.node.id": replica.node_id}
    assert replica.node_id.startswith("node-")
    assert all(s.resource.items() >= restarted.items() for s in second), second[0].resource


def replica_spans(receiver: TraceReceiver) -> list[ReceivedSpan]:
    """(The CMS members inherit the test's own environment: they may export too.)"""
    return [s for s in receiver.spans() if s.resource["service.name"] == "replica"]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("OTEL_TRACES_SAMPLER", "parentbased_sometimes", "OTEL_TRACES_SAMPLER='parentbased_some"),
        ("OTEL_TRACES_SAMPLER_ARG", "10%", "OTEL_TRACES_SAMPLER_ARG='10%' is not a sampling ratio"),
    ],
)
def test_a_wrong_sampling_variable_stops_a_member_before_it_starts(
    tmp_path: Path, variable: str, value: str, said: str
) -> None:
    address = free_address(set())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochal.cms",
            "--member-id",
            "cms1",
            "--members",
            f"cms1={address}",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_without_tracing(), variable: value},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"epochal-cms: {said}"), done.stderr
    assert not list(tmp_path.iterdir())  # nothing was started or written


def _without_tracing() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EPOCHAL_TRACE"))}
