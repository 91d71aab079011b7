"""The operator's `epochal` command line against a real dev cluster (`epochal dev up`: 3 CMS
members, 3 replicas, 2 reconcilers — two, so that one can be stopped — plus two CMS candidates
from `epochal dev add-cms`), run as a user runs it: the installed script, in its own process,
finding the cluster through EPOCHAL_CLUSTER (or --cluster, or a config file).

Every command's `--output json` is parsed and checked against what the cluster is, as the SDK
and the CMS's own FetchLog see it: node count and states, each node's applied epoch equal to the
log's last, effective ownership per keyspace summing to RF x 100 %, `endpoints` equal to the
SDK's routing for 100 keys, `placements` equal to the metadata's, `log` equal to FetchLog,
`cms reconfigure` 3 -> 5 -> 3 seen in `cms describe`, `health` 0 then 1 once a process is
SIGSTOPped, and `reconcile status` with one reconciler stopped showing the other's table and
naming the stopped one. Then the error cases: their one-line message and exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from epochal.client import AsyncClient
from epochal.cms_client import CMSClient
from epochal.runtime.processes import free_ports
from epochal.tcm import ClusterMetadata, Register, StartAddToCMS
from epochal.tcm.reconcilers import RegisterReconciler
from epochal.wire.metadata import metadata_to_json
from epochal.wire.tls import TlsFiles
from tests.harness import Pid, block_until

EPOCHAL = str(Path(sys.executable).with_name("epochal"))
pytestmark = pytest.mark.timeout(900)
LAST_TABLE_KEYS = 100


@dataclass
class Dev:
    data_dir: Path
    cluster: str  # EPOCHAL_CLUSTER, the replicas' addresses
    processes: dict[str, dict[str, Any]]  # by name: kind, address, pid
    tls: dict[str, str]  # EPOCHAL_TLS_*: the certificate `dev up` says to call it with

    @property
    def files(self) -> TlsFiles:
        return TlsFiles(*(self.tls[f"EPOCHAL_TLS_{part}"] for part in ("CA", "CERT", "KEY")))

    def address(self, name: str) -> str:
        return str(self.processes[name]["address"])

    def of_kind(self, kind: str) -> list[str]:
        return [p["address"] for p in self.processes.values() if p["kind"] == kind]


def dev(data_dir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EPOCHAL, "dev", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    data_dir = tmp_path_factory.mktemp("cli") / "dev"
    started: list[Pid] = []
    try:
        up = dev(data_dir, "up", "--reconcilers", "2")
        assert up.returncode == 0, up.stdout + up.stderr
        tls = dict(re.findall(r"^  export (EPOCHAL_TLS_\w+)=(\S+)$", up.stdout, re.M))
        assert len(tls) == 3, up.stdout
        for _ in range(2):
            added = dev(data_dir, "add-cms")
            assert added.returncode == 0, added.stdout + added.stderr
        status = dev(data_dir, "status", "--output", "json")
        assert status.returncode == 0, status.stderr
        record = json.loads(status.stdout)["cluster"]
        processes = {p["name"]: p for p in record["processes"]}
        started += [Pid.of(p["pid"]) for p in processes.values()]
        replicas = [p["address"] for p in processes.values() if p["kind"] == "replica"]
        found = Dev(data_dir, ",".join(replicas), processes, tls)
        asyncio.run(_schema(found.of_kind("replica"), found.files))
        yield found
    finally:
        if (data_dir / "supervisor.pid").exists():
            dev(data_dir, "down", timeout=120)
        for pid in started:
            pid.kill()


async def _schema(replicas: list[str], files: TlsFiles) -> None:
    async with AsyncClient(replicas, tls=files) as client:
        await client.create_keyspace("shop", replication_factor=3, tracked=True)
        await client.create_table(
            "shop",
            "carts",
            {"user": "text", "item": "text", "qty": "int"},
            partition_key=["user"],
            clustering_key=["item"],
        )
        await client.create_keyspace("metrics", replication_factor=2)
        await client.create_table(
            "metrics",
            "samples",
            {"day": "int", "host": "text", "at": "bigint", "value": "double"},
            partition_key=["day", "host"],
            clustering_key=["at"],
        )
        for user in ("ann", "bob", "cy"):
            await client.write("shop", "carts", {"user": user, "item": "tea", "qty": 1})


def epochal(
    cluster: Dev | None, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EPOCHAL_")}
    environment["XDG_CONFIG_HOME"] = "/nonexistent"  # no config file of the machine's
    if cluster is not None:
        environment["EPOCHAL_CLUSTER"] = cluster.cluster
        environment.update(cluster.tls)
    environment.update(env or {})
    return subprocess.run(
        [EPOCHAL, *args], capture_output=True, text=True, timeout=timeout, env=environment
    )


def json_of(cluster: Dev | None, *args: str, **kw: Any) -> Any:
    done = epochal(cluster, *args, "--output", "json", **kw)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def sdk(cluster: Dev, call: Any) -> Any:
    async def run() -> Any:
        async with AsyncClient(cluster.of_kind("replica"), tls=cluster.files) as client:
            return await call(client)

    return asyncio.run(run())


def log_of(cluster: Dev) -> list[Any]:
    """The whole metadata log, from a CMS member's FetchLog."""

    async def read() -> list[Any]:
        records: list[Any] = []
        async with CMSClient(cluster.of_kind("cms"), security=cluster.files) as cms:
            while True:
                page = await cms.fetch_log(len(records), entries_only=True)
                records += [r for r in page.records if r.epoch > len(records)]
                if not page.has_more:
                    return records

    return asyncio.run(read())


# ---------------------------------------------------------------------- the cluster at a glance


def test_status_shows_every_node_at_the_logs_last_epoch_owning_rf_times_100(cluster: Dev) -> None:
    def settled() -> Any:
        last = log_of(cluster)[-1].epoch
        answer = json_of(cluster, "status")
        return answer if all(n["epoch"] == last for n in answer["nodes"]) else None

    answer = block_until("every node at the log's last epoch", settled, 30, 0.5)
    assert len(answer["nodes"]) == 3
    assert {(n["state"], n["up"], n["status"]) for n in answer["nodes"]} == {("normal", True, "UN")}
    assert all(n["tokens"] == 16 and n["load_bytes"] > 0 for n in answer["nodes"])
    assert answer["keyspaces"]["shop"]["replication_factor"] == 3
    for keyspace, factor in (("shop", 3), ("metrics", 2)):
        total = sum(n["ownership"][keyspace] for n in answer["nodes"])
        assert abs(total - factor * 100) < 0.01, (keyspace, total)
    addresses = sorted(n["address"] for n in answer["nodes"])
    assert addresses == sorted(cluster.of_kind("replica"))


def test_ring_and_placements_are_the_metadatas(cluster: Dev) -> None:
    metadata = sdk(cluster, _metadata)
    ring = json_of(cluster, "ring")
    owned = sorted((t, node) for node, tokens in metadata.tokens.owners.items() for t in tokens)
    assert [(r["token"], r["node"]) for r in ring["tokens"]] == owned
    for keyspace in ("shop", "metrics"):
        placement = metadata.placements[metadata.keyspaces[keyspace].replication]
        shown = json_of(cluster, "placements", keyspace)
        assert shown["keyspace"] == keyspace
        assert [
            ((r["left"], r["right"]), set(r["reads"]), set(r["writes"])) for r in shown["ranges"]
        ] == [
            ((rng.left, rng.right), set(reads), set(writes))
            for rng, reads, writes in placement.ranges()
        ]


async def _metadata(client: AsyncClient) -> Any:
    await client.refresh()
    return client.metadata


def test_endpoints_are_where_the_sdk_routes(cluster: Dev) -> None:
    users = [f"user{i}" for i in range(LAST_TABLE_KEYS)]
    shown = json_of(cluster, "endpoints", "shop", "carts", *users)
    routed = sdk(
        cluster,
        lambda client: _endpoints(client, "shop", "carts", [{"user": u} for u in users]),
    )
    assert [r["key"] for r in shown["keys"]] == users
    assert [sorted(r["replicas"]) for r in shown["keys"]] == routed
    assert all(len(r["replicas"]) == 3 for r in shown["keys"])
    composite = json_of(cluster, "endpoints", "metrics", "samples", "20260101:web1", "7:db")
    routed = sdk(
        cluster,
        lambda client: _endpoints(
            client,
            "metrics",
            "samples",
            [{"day": 20260101, "host": "web1"}, {"day": 7, "host": "db"}],
        ),
    )
    assert [sorted(r["replicas"]) for r in composite["keys"]] == routed


async def _endpoints(client: AsyncClient, keyspace: str, table: str, keys: list[Any]) -> list[Any]:
    return [sorted(client.endpoints(keyspace, table, key)) for key in keys]


def test_describe_shows_the_schema(cluster: Dev) -> None:
    every = json_of(cluster, "describe")
    assert {k["name"] for k in every["keyspaces"]} == {"shop", "metrics"}
    one = json_of(cluster, "describe", "metrics.samples")
    [keyspace] = one["keyspaces"]
    [table] = keyspace["tables"]
    assert table["partition_key"] == ["day", "host"] and table["clustering_key"] == ["at"]
    assert {c["name"]: c["type"] for c in table["columns"]}["value"] == "double"
    as_yaml = epochal(cluster, "describe", "shop", "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout)["keyspaces"][0]["replication_type"] == "tracked"


def test_log_and_metadata_dump_are_the_cms_log(cluster: Dev) -> None:
    records = log_of(cluster)  # reconcilers may commit lease grants meanwhile: compare to --to
    shown = json_of(cluster, "log", "--to", str(records[-1].epoch))
    assert [(e["epoch"], e["kind"], e["entry_id"]) for e in shown] == [
        (r.epoch, r.transformation.kind, r.entry_id) for r in records
    ]
    assert [e["text"] for e in shown] == [str(r.transformation) for r in records]
    whole = json_of(cluster, "log")
    assert whole[: len(shown)] == shown and len(whole) >= len(shown)
    part = json_of(cluster, "log", "--from", "2", "--to", "4")
    assert [e["epoch"] for e in part] == [2, 3, 4]
    dump = json_of(cluster, "metadata", "dump")
    assert dump["epoch"] >= records[-1].epoch
    assert len(dump["nodes"]) == 3 and len(dump["cms_members"]) == 5
    early = json_of(cluster, "metadata", "dump", "--epoch", "4")
    metadata = ClusterMetadata.empty()
    for record in records[:4]:
        metadata = record.transformation.execute(metadata)
    assert early == metadata_to_json(metadata) and early["epoch"] == 4


def test_log_follow_prints_new_epochs_as_they_come(cluster: Dev) -> None:
    last = log_of(cluster)[-1].epoch
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EPOCHAL_")}
    follow = subprocess.Popen(
        [EPOCHAL, "log", "--follow", "--from", str(last), "-o", "json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**environment, "EPOCHAL_CLUSTER": cluster.cluster, **cluster.tls},
    )
    try:
        assert follow.stdout is not None
        assert json.loads(line_of(follow, 30))["epoch"] == last
        sdk(cluster, lambda client: client.create_keyspace("followed", replication_factor=1))
        seen = [json.loads(line_of(follow, 30))]
        while seen[-1]["kind"] != "create_keyspace":  # a lease grant may come first
            assert len(seen) < 50, seen
            seen.append(json.loads(line_of(follow, 30)))
        assert [e["epoch"] for e in seen] == list(range(last + 1, last + 1 + len(seen)))
        assert "CreateKeyspace(followed" in seen[-1]["text"]
    finally:
        follow.send_signal(signal.SIGINT)
        follow.wait(timeout=30)
    assert follow.returncode == 130


def line_of(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The next line ``process`` prints, within ``timeout_s``."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    assert ready, f"no line within {timeout_s} s"
    line = process.stdout.readline()
    assert line, "the process ended"
    return line


# ---------------------------------------------------------------------- the CMS


def test_cms_describe_and_reconfigure_3_5_3(cluster: Dev) -> None:
    described = json_of(cluster, "cms", "describe")
    assert len(described["members"]) == 5 and len(described["voters"]) == 3
    assert described["leader"] in described["voters"]
    assert {m["role"] for m in described["members"]} == {"voter", "learner"}
    last = log_of(cluster)[-1].epoch
    assert all(m["epoch"] >= last - 1 for m in described["members"])

    grown = json_of(cluster, "cms", "reconfigure", "5", timeout=300)
    assert len(grown["voters"]) == 5
    assert len(json_of(cluster, "-o", "json", "cms", "describe")["voters"]) == 5
    shrunk = json_of(cluster, "cms", "reconfigure", "3", timeout=300)
    assert len(shrunk["voters"]) == 3 and shrunk["leader"] in shrunk["voters"]
    seen = json_of(cluster, "cms", "-o", "json", "describe")
    assert len(seen["voters"]) == 3 and seen["reconfiguration"] is None
    assert json_of(cluster, "cms", "reconfigure", "--status")["reconfiguration"] is None

    snapshot = json_of(cluster, "cms", "snapshot")

    def snapshotted() -> Any:
        described = json_of(cluster, "cms", "describe")
        return described if snapshot["epoch"] in described["snapshots"] else None

    seen = block_until("the snapshot in cms describe", snapshotted, 30, 0.5)
    assert snapshot["epoch"] in seen["snapshots"]


def test_cms_reconfigure_removes_dead_voters_first_and_resumes_or_cancels(cluster: Dev) -> None:
    grown = json_of(cluster, "cms", "reconfigure", "5", timeout=300)
    others = [v for v in grown["voters"] if v != grown["leader"]]
    stopped = [cluster.processes[name]["pid"] for name in others[:2]]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:  # 3 of 5 answer: the two that do not leave first, the CMS keeps a live majority
        shrunk = json_of(cluster, "cms", "reconfigure", "3", timeout=300)
        assert sorted(shrunk["voters"]) == sorted(set(grown["voters"]) - set(others[:2]))
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    # With 2 of its 3 voters stopped the CMS has no quorum: a change is refused at once.
    stopped = [cluster.processes[name]["pid"] for name in shrunk["voters"][:2]]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        refused = epochal(cluster, "cms", "reconfigure", "2")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "1 of 2 voters answering, no majority" in _one_line(refused)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)

    # An addition interrupted between its two steps: --status shows it, a new target is
    # refused, --cancel undoes it, --resume finishes it.
    learner = next(m["id"] for m in shrunk["members"] if m["role"] == "learner")
    start_add(cluster, learner)
    status = json_of(cluster, "cms", "reconfigure", "--status")
    assert status["reconfiguration"] == {"joining": learner}
    busy = epochal(cluster, "cms", "reconfigure", "4")
    assert busy.returncode == 1 and "--resume" in _one_line(busy)
    cancelled = json_of(cluster, "cms", "reconfigure", "--cancel")
    assert cancelled["reconfiguration"] is None and learner not in cancelled["voters"]
    start_add(cluster, learner)
    resumed = json_of(cluster, "cms", "reconfigure", "--resume", timeout=300)
    assert learner in resumed["voters"] and len(resumed["voters"]) == 4
    assert len(json_of(cluster, "cms", "reconfigure", "3", timeout=300)["voters"]) == 3


def start_add(cluster: Dev, member_id: str) -> None:
    """The first step of adding a voter, as a reconfiguration interrupted after it leaves it."""

    async def commit() -> None:
        async with CMSClient(cluster.of_kind("cms"), security=cluster.files) as cms:
            await cms.commit(StartAddToCMS(member_id))

    asyncio.run(commit())


# ---------------------------------------------------------------------- operations


def test_operations_and_the_topology_operations_by_node(cluster: Dev) -> None:
    answer = json_of(cluster, "operations")
    assert answer["in_progress"] == []
    assert len(answer["replicas"]) == 3
    assert {(r["kind"], r["state"]) for r in answer["replicas"]} == {("join", "finished")}
    cleaned = json_of(cluster, "cleanup", "node-1")
    assert cleaned["node"] == "node-1" and cleaned["removed"] >= 0

    # A fourth replica joins by itself; the CLI decommissions it by its node id.
    added = dev(cluster.data_dir, "add-replica")
    assert added.returncode == 0, added.stdout + added.stderr
    assert len(json_of(cluster, "status")["nodes"]) == 4
    left = json_of(cluster, "decommission", "node-4", timeout=300)
    assert (left["node_id"], left["kind"], left["state"]) == ("node-4", "leave", "finished")
    assert [n["id"] for n in json_of(cluster, "status")["nodes"]] == ["node-1", "node-2", "node-3"]

    # A node that registered and never joined is forgotten by its id.
    stray = register_stray(cluster)
    forgotten = json_of(cluster, "unregister", stray)
    assert forgotten["node"] == stray and forgotten["epoch"] > 0
    assert stray not in {n["id"] for n in json_of(cluster, "status")["nodes"]}


def register_stray(cluster: Dev) -> str:
    """A node registered at an address nothing serves; its id."""

    async def commit() -> str:
        async with CMSClient(cluster.of_kind("cms"), security=cluster.files) as cms:
            committed = await cms.commit(
                Register(address="10.9.9.9:2", datacenter="dc1", rack="r1", version="1.0.0")
            )
        async with AsyncClient(cluster.of_kind("replica"), tls=cluster.files) as client:
            await client.refresh(committed.epoch)
            return next(
                n.node_id for n in client.metadata.nodes.values() if n.address == "10.9.9.9:2"
            )

    return asyncio.run(commit())


# ---------------------------------------------------------------------- health, reconcilers


def test_health_and_reconcile_status_with_a_stopped_reconciler(cluster: Dev) -> None:
    healthy = epochal(cluster, "health", "-o", "json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    processes = json.loads(healthy.stdout)["processes"]
    assert len(processes) == 10 and {p["health"] for p in processes} == {"SERVING"}

    def both_answer() -> Any:
        answer = json_of(cluster, "reconcile", "status")
        return answer if len(answer["reconcilers"]) == 2 else None

    both = block_until("both reconcilers registered and answering", both_answer, 60, 0.5)
    assert {r["address"] for r in both["reconcilers"]} == set(cluster.of_kind("reconciler"))

    stopped = cluster.processes["reconciler2"]
    os.kill(stopped["pid"], signal.SIGSTOP)
    try:
        sick = epochal(cluster, "health", "-o", "json")
        assert sick.returncode == 1, sick.stdout + sick.stderr
        [down] = [p for p in json.loads(sick.stdout)["processes"] if p["health"] != "SERVING"]
        assert down["address"] == stopped["address"] and down["kind"] == "reconciler"

        partial = epochal(cluster, "reconcile", "status", "-o", "json")
        assert partial.returncode == 1, partial.stdout + partial.stderr
        answer = json.loads(partial.stdout)
        assert [r["address"] for r in answer["reconcilers"]] == [cluster.address("reconciler1")]
        assert [u["address"] for u in answer["unreachable"]] == [stopped["address"]]
        assert answer["ranges"], answer
        table = epochal(cluster, "reconcile", "status")
        assert table.returncode == 1
        assert f"did not answer: {stopped['address']}" in table.stdout
        assert "KEYSPACE  RANGE" in table.stdout
    finally:
        os.kill(stopped["pid"], signal.SIGCONT)

    # A reconciler registered where nothing answers (one killed for good) is not healthy until
    # it is deregistered.
    asyncio.run(register_reconciler(cluster, "ghost", "127.0.0.1:1"))
    ghost = epochal(cluster, "health", "-o", "json")
    assert ghost.returncode == 1
    [down] = [p for p in json.loads(ghost.stdout)["processes"] if p["health"] != "SERVING"]
    assert (down["kind"], down["name"]) == ("reconciler", "ghost")
    gone = json_of(cluster, "reconcile", "deregister", "ghost")
    assert gone["reconciler"] == "ghost"
    assert epochal(cluster, "health").returncode == 0
    again = epochal(cluster, "reconcile", "deregister", "ghost")
    assert again.returncode == 1 and "no reconciler 'ghost' is registered" in _one_line(again)


async def register_reconciler(cluster: Dev, reconciler_id: str, address: str) -> None:
    async with CMSClient(cluster.of_kind("cms"), security=cluster.files) as cms:
        await cms.commit(RegisterReconciler(reconciler_id=reconciler_id, address=address))


# ---------------------------------------------------------------------- options


def test_global_options_after_the_command_and_from_a_config_file(
    cluster: Dev, tmp_path: Path
) -> None:
    files = cluster.files
    tls = ["--tls-ca", files.ca, "--tls-cert", files.cert, "--tls-key", files.key]
    after = epochal(None, "status", "--output", "json", "--cluster", cluster.cluster, *tls)
    assert after.returncode == 0, after.stderr
    assert len(json.loads(after.stdout)["nodes"]) == 3
    config = tmp_path / "config.toml"
    certs = tmp_path / "certs"  # the config file names them relative to its folder
    certs.mkdir()
    for name in ("ca", "cert", "key"):
        (certs / f"{name}.pem").write_bytes(Path(getattr(files, name)).read_bytes())
    config.write_text(
        f'cluster = ["{cluster.address("cms2")}"]\noutput = "json"\n'
        'tls_ca = "certs/ca.pem"\ntls_cert = "certs/cert.pem"\ntls_key = "certs/key.pem"\n'
    )
    from_file = epochal(None, "ring", "--config", str(config))
    assert from_file.returncode == 0, from_file.stderr
    assert len(json.loads(from_file.stdout)["tokens"]) == 48
    version = epochal(None, "--version")
    assert version.returncode == 0 and version.stdout.startswith("epochal, version ")


# ---------------------------------------------------------------------- errors


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_errors_are_one_line_with_their_exit_code(cluster: Dev, tmp_path: Path) -> None:
    reconciler = cluster.address("reconciler1")
    cms = cluster.address("cms2")
    wrong = epochal(None, "status", "--cluster", reconciler, env=cluster.tls)
    assert wrong.returncode == 2
    assert f"{reconciler} is a reconciler, not a replica or CMS member" in _one_line(wrong)

    not_replica = epochal(cluster, "decommission", cms)
    assert not_replica.returncode == 2
    assert f"{cms} is a CMS member (cms2), not a replica" in _one_line(not_replica)

    nobody = f"127.0.0.1:{free_ports(1)[0]}"
    unreachable = epochal(None, "status", "--cluster", nobody, env=cluster.tls)
    assert unreachable.returncode == 2
    assert f"{nobody} did not answer" in _one_line(unreachable)

    unknown = epochal(cluster, "placements", "nope")
    assert unknown.returncode == 1
    assert "nope" in _one_line(unknown)

    bad_flag = epochal(cluster, "status", "--bogus")
    assert bad_flag.returncode == 2
    assert "--bogus" in _one_line(bad_flag)

    no_cluster = epochal(None, "status")
    assert no_cluster.returncode == 2
    assert "EPOCHAL_CLUSTER" in _one_line(no_cluster)

    refused = epochal(cluster, "removenode", "node-2")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "node-2 is alive" in _one_line(refused)

    broken = tmp_path / "broken.toml"
    broken.write_text("cluster = [\n")
    config = epochal(cluster, "status", "--config", str(broken))
    assert config.returncode == 2
    assert "is not TOML" in _one_line(config)
