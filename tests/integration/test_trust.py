"""Trust against a real cluster with mutual TLS: a CMS member, a replica and a reconciler on
127.0.0.1, their certificates and the test's from the run's CA (``cluster_pki``).

Proves:
- a connection without a certificate, in plain text, with a certificate of another CA, or with
  an expired certificate is refused (while the same call with a good certificate is answered);
- every method of the role table, called by a certificate of each role: a role the table does
  not name is answered PERMISSION_DENIED naming the role needed — before anything else is said —
  and a role it names is never; ``CMS.Commit`` likewise for every transformation kind. So a
  client certificate cannot call Paxos, peer, reconcile or admin methods, nor commit a join, a
  lease grant or a CMS change; the refusal is logged with the caller's certificate and counted;
- a client certificate writes, reads and runs DDL through the SDK; an operator's runs admin
  calls (the CLI's too);
- certificates are picked up when their files change, without a restart: a client's new
  certificate (a new role) on its next call, a server's on the next connection;
- the plaintext health port serves health to a probe without a certificate, and nothing else.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from google.protobuf import message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

import epochal
from epochal.admin_client import AdminClient
from epochal.certs import issue
from epochal.cli.app import main as cli_main
from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.cms import LocalCMS
from epochal.devcluster.pki import TLS_ENV, DevPki
from epochal.runtime.processes import free_ports
from epochal.wire.channels import channel as open_channel
from epochal.wire.roles import (
    ANY_CERTIFICATE,
    BY_KIND,
    CLIENT,
    COMMIT_KINDS,
    COMMIT_METHOD,
    METHODS,
    OPERATOR,
    REPLICA,
    ROLES,
    allowed,
    needed_text,
)
from epochal.wire.tls import ROTATION_CHECK_S, TlsFiles
from epochal.wire.v1 import cms_pb2, cms_pb2_grpc, metadata_pb2, reconciler_pb2, replica_pb2
from tests.harness import start_ring

pytestmark = pytest.mark.integration

TIMEOUT_S = 300.0
CALL_S = 5.0
DENIED = grpc.StatusCode.PERMISSION_DENIED
# Admin calls that would start or stop an operation when allowed: tried only where refused
# (the operator's admin calls are run for real below, through the client and the CLI)
ACTS = frozenset(
    f"/epochal.v1.ReplicaAdmin/{name}"
    for name in (
        "Bootstrap",
        "BootstrapResume",
        "BootstrapAbort",
        "Decommission",
        "DecommissionAbort",
        "Remove",
        "Replace",
        "Move",
        "Resume",
        "Cancel",
    )
)
SERVICES = {
    service.full_name: service
    for module in (cms_pb2, replica_pb2, reconciler_pb2, health_pb2, reflection_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, cluster_pki: DevPki) -> Iterator[Any]:
    """Started once for the module: 1 CMS member, 1 replica (test hooks on, a plaintext health
    port), 1 reconciler."""
    health_port = free_ports(1)[0]
    local = LocalCluster(
        tmp_path_factory.mktemp("trust") / "cluster",
        replicas=1,
        cms_size=1,
        test_hooks=True,
        pki=cluster_pki,
        replica_args=("--health-listen", f"127.0.0.1:{health_port}"),
    )

    async def start() -> None:
        await start_ring(local)
        reconciler = local.add_reconciler()
        local.start_reconciler(reconciler.name)
        await reconciler.wait_serving(time.monotonic() + 60)

    try:
        asyncio.run(asyncio.wait_for(start(), 120))
        local.health_address = f"127.0.0.1:{health_port}"  # type: ignore[attr-defined]
        yield local
    finally:
        local.stop()
        local.close()


def role_files(pki: DevPki, *roles: str) -> TlsFiles:
    return pki.files(f"trust-{'-'.join(roles)}", roles)


def address_of(cluster: LocalCluster, service: str) -> str:
    if service.startswith("epochal.v1.CMS"):
        return cluster.cms.addresses[0]
    if service == "epochal.v1.Reconciler":
        return next(iter(cluster.reconcilers.values())).address
    return cluster.addresses[0]


async def _nothing() -> AsyncIterator[Any]:
    return
    yield


async def status_of(channel: grpc.aio.Channel, full_name: str, request: Any = None) -> Any:
    """Call ``full_name`` (an empty request, or ``request``; an empty stream of requests) and
    return the status code it ended with (OK once it answered or streamed a first reply)."""
    service_name, _, method_name = full_name.lstrip("/").partition("/")
    method = SERVICES[service_name].methods_by_name[method_name]
    request_class = message_factory.GetMessageClass(method.input_type)
    reply_class = message_factory.GetMessageClass(method.output_type)
    kind = ("stream" if method.client_streaming else "unary") + "_"
    kind += "stream" if method.server_streaming else "unary"
    callable_ = getattr(channel, kind)(
        full_name,
        request_serializer=request_class.SerializeToString,
        response_deserializer=reply_class.FromString,
    )
    sent = _nothing() if method.client_streaming else (request or request_class())
    try:
        call = callable_(sent, timeout=CALL_S)
        if method.server_streaming:
            async for _ in call:
                break
            call.cancel()
        else:
            await call
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def test_connections_without_a_good_certificate_are_refused(
    cluster: LocalCluster, cluster_pki: DevPki, tmp_path: Path
) -> None:
    ca = Path(cluster_pki.authority.cert).read_bytes()
    other = DevPki(tmp_path / "other-ca").files("intruder", (OPERATOR,))
    now = datetime.now(UTC)
    expired = issue(
        cluster_pki.authority,
        tmp_path / "expired.pem",
        tmp_path / "expired-key.pem",
        name="expired",
        roles=(OPERATOR,),
        not_before=now - timedelta(days=2),
        not_after=now - timedelta(days=1),
    )

    async def check(channel: grpc.aio.Channel) -> grpc.StatusCode:
        async with channel:
            try:
                await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=CALL_S
                )
            except grpc.aio.AioRpcError as error:
                return error.code()
            return grpc.StatusCode.OK

    async def scenario() -> None:
        servers = [address_of(cluster, s) for s in ("epochal.v1.CMS", "", "epochal.v1.Reconciler")]
        for server in servers:
            # the control: a certificate of this CA, valid, is answered
            assert await check(open_channel(server, role_files(cluster_pki, CLIENT))) == (
                grpc.StatusCode.OK
            )
            refused = {  # each differs from the control in one thing
                "no certificate": grpc.aio.secure_channel(
                    server, grpc.ssl_channel_credentials(root_certificates=ca)
                ),
                "plain text": grpc.aio.insecure_channel(server),
                "another CA": open_channel(
                    server, TlsFiles(str(cluster_pki.authority.cert), other.cert, other.key)
                ),
                "expired": open_channel(server, expired),
            }
            for why, channel in refused.items():
                assert await check(channel) == grpc.StatusCode.UNAVAILABLE, (server, why)

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_a_client_certificate_writes_reads_and_runs_ddl_and_an_operator_runs_admin_calls(
    cluster: LocalCluster, cluster_pki: DevPki, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    client = role_files(cluster_pki, CLIENT)
    operator = role_files(cluster_pki, OPERATOR)

    async def scenario() -> None:
        async with epochal.AsyncClient(cluster.addresses, tls=client) as sdk:
            await sdk.create_keyspace("trusted", replication_factor=1)
            await sdk.create_table(
                "trusted", "notes", {"id": "text", "body": "text"}, partition_key=["id"]
            )
            await sdk.write("trusted", "notes", {"id": "a", "body": "hello"})
            read = await sdk.read("trusted", "notes", {"id": "a"})
            assert [row["body"] for row in read.rows] == ["hello"]
        async with AdminClient(cluster.addresses[0], security=client) as admin:
            with pytest.raises(epochal.PermissionDenied, match="needs the operator role"):
                await admin.status()
        async with AdminClient(cluster.addresses[0], security=operator) as admin:
            await admin.status()
            await admin.cleanup()

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    for name, value in zip(TLS_ENV, (operator.ca, operator.cert, operator.key), strict=True):
        monkeypatch.setenv(name, value)
    assert cli_main(["operations", "--cluster", cluster.addresses[0], "--output", "json"]) == 0
    capsys.readouterr()
    for name, value in zip(TLS_ENV, (client.ca, client.cert, client.key), strict=True):
        monkeypatch.setenv(name, value)
    assert cli_main(["cleanup", cluster.addresses[0], "--cluster", cluster.addresses[0]]) == 1
    refused = capsys.readouterr().err
    assert "permission denied: epochal.v1.ReplicaAdmin/Cleanup needs the operator" in refused


def test_every_method_and_commit_kind_answers_each_role_as_the_table_says(
    cluster: LocalCluster, cluster_pki: DevPki
) -> None:
    def commit_of(kind: str) -> cms_pb2.CommitRequest:
        transformation = metadata_pb2.Transformation()
        getattr(transformation, kind).SetInParent()
        return cms_pb2.CommitRequest(transformation=transformation, entry_id=f"trust-{kind}")

    refusals = 0

    async def scenario() -> list[str]:
        nonlocal refusals
        wrong: list[str] = []
        for role in (*ROLES, None):  # None: a certificate of the CA with no role
            files = role_files(cluster_pki, role) if role else cluster_pki.files("trust-none", ())
            held = {role} if role else set()
            opened = {s: open_channel(address_of(cluster, s), files) for s in SERVICES}
            try:
                for full_name, needed in METHODS.items():
                    service = full_name.lstrip("/").partition("/")[0]
                    may = needed in (BY_KIND, ANY_CERTIFICATE) or allowed(needed, held)
                    if may and full_name in ACTS:
                        continue
                    code, details = await status_of(opened[service], full_name)
                    refusals += code is DENIED
                    if may and code is DENIED:
                        wrong.append(f"{role} refused {full_name}: {details}")
                    if not may and (code is not DENIED or needed_text(needed) not in details):
                        wrong.append(f"{role} not refused {full_name}: {code} {details}")
                for kind, needed in COMMIT_KINDS.items():
                    code, details = await status_of(
                        opened["epochal.v1.CMS"], COMMIT_METHOD, commit_of(kind)
                    )
                    may = allowed(needed, held)
                    refusals += code is DENIED
                    if may and code is DENIED:
                        wrong.append(f"{role} refused a commit of {kind}: {details}")
                    if not may and (code is not DENIED or f"committing {kind}" not in details):
                        wrong.append(f"{role} not refused a commit of {kind}: {code} {details}")
            finally:
                for channel in opened.values():
                    await channel.close()
        return wrong

    wrong = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    assert not wrong, "\n".join(wrong)
    expected = sum(
        not (needed in (BY_KIND, ANY_CERTIFICATE) or allowed(needed, held))
        for held in (*({role} for role in ROLES), set())
        for needed in (*METHODS.values(), *COMMIT_KINDS.values())
    )
    assert refusals == expected > 100  # every refusal the table makes, and no other
    log = cluster.nodes["replica1"].log_path.read_text()
    assert "refused epochal.v1.ReplicaAdmin/Status to CN=trust-client (roles client)" in log
    refused = asyncio.run(
        cluster.metric(
            "replica1", 'epochal_rpc_refused_total{method="epochal.v1.ReplicaAdmin/Status"}'
        )
    )
    assert refused >= 1


def test_rotated_certificates_are_used_without_a_restart(
    cluster: LocalCluster, cluster_pki: DevPki, tmp_path: Path
) -> None:
    address = cluster.addresses[0]
    ca = cluster_pki.authority.cert
    cert, key = tmp_path / "rotating.pem", tmp_path / "rotating-key.pem"
    files = issue(cluster_pki.authority, cert, key, name="rotating", roles=(CLIENT,))

    async def client_side() -> None:
        watching = open_channel(cluster.cms.addresses[0], files)
        epoch = (await cms_pb2_grpc.CMSStub(watching).Describe(cms_pb2.DescribeRequest())).epoch
        stream = cms_pb2_grpc.CMSStub(watching).Watch(cms_pb2.WatchRequest(since_epoch=epoch))
        async with AdminClient(address, security=files) as admin:
            with pytest.raises(epochal.PermissionDenied):
                await admin.status()
            issue(cluster_pki.authority, cert, key, name="rotating", roles=(OPERATOR,))
            deadline = time.monotonic() + 10 * ROTATION_CHECK_S
            while True:  # the same client: its next call after the check presents the new one
                try:
                    await admin.status()
                    return
                except epochal.PermissionDenied:
                    assert time.monotonic() < deadline, "the new certificate was not picked up"
                    await asyncio.sleep(0.1)
        # the stream opened before the rotation goes on, on the connection it started on
        async with epochal.AsyncClient(cluster.addresses) as sdk:
            committed = await sdk.create_keyspace("rotated", replication_factor=1)
        async for event in stream:
            if any(entry.epoch == committed for entry in event.entries):
                break
        await watching.close()

    asyncio.run(asyncio.wait_for(client_side(), TIMEOUT_S))

    admin_files = cluster_pki.admin()
    host, _, port = address.rpartition(":")

    def served_serial() -> int:
        context = ssl.create_default_context(cafile=str(ca))
        context.load_cert_chain(admin_files.cert, admin_files.key)
        context.set_alpn_protocols(["h2"])
        with (
            socket.create_connection((host, int(port)), timeout=CALL_S) as raw,
            context.wrap_socket(raw, server_hostname=host) as wrapped,
        ):
            der = wrapped.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    replica_cert = Path(cluster_pki.directory / "replica1.pem")
    before = served_serial()
    assert before == x509.load_pem_x509_certificate(replica_cert.read_bytes()).serial_number
    rotated = issue(
        cluster_pki.authority,
        replica_cert,
        cluster_pki.directory / "replica1-key.pem",
        name="replica1",
        roles=(REPLICA,),
    )
    deadline = time.monotonic() + 10 * ROTATION_CHECK_S
    while (after := served_serial()) == before:  # read again at a handshake a second later
        assert time.monotonic() < deadline, "the server did not present its new certificate"
        time.sleep(0.1)
    assert after == x509.load_pem_x509_certificate(Path(rotated.cert).read_bytes()).serial_number
    assert cluster.nodes["replica1"].running  # no restart


def test_the_plaintext_health_port_serves_health_and_nothing_else(cluster: LocalCluster) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(cluster.health_address) as channel:  # type: ignore[attr-defined]
            answer = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=CALL_S
            )
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            code, _ = await status_of(channel, "/epochal.v1.Replica/Describe")
            assert code is grpc.StatusCode.UNIMPLEMENTED

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))


def test_a_cluster_started_insecure_says_so_and_takes_plain_text_only(tmp_path: Path) -> None:
    cms = LocalCMS(tmp_path / "plain", size=1, insecure=True)

    async def scenario() -> None:
        cms.start()
        await cms.wait_serving(timeout_s=60)
        assert await cms.leader() == "cms1"  # it answers this process, in plain text
        tls = open_channel(cms.addresses[0])  # this process's: the run's TLS certificate
        async with tls:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health_pb2_grpc.HealthStub(tls).Check(
                    health_pb2.HealthCheckRequest(), timeout=CALL_S
                )
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE

    try:
        asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    finally:
        cms.stop()
        cms.close()
    log = cms.members["cms1"].log_path.read_text()
    assert "serves in PLAIN TEXT" in log and "no certificates, no role checks" in log
