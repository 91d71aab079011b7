"""The parts of trust that need no cluster: the role table against the protos, the guard's
decisions and its log, TLS settings and files, ``epochal certs``, the SDK's and the CLI's choice
of security. (The real cluster: tests/integration/test_trust.py.)"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from epochal.certs import Authority, issue, make_ca
from epochal.cli.app import main as cli_main
from epochal.errors import InvalidRequest
from epochal.runtime.security import certificate_roles
from epochal.transport import client_security
from epochal.wire import channels, roles
from epochal.wire.roles import (
    BY_KIND,
    CLIENT,
    COMMIT_KINDS,
    METHODS,
    OPERATOR,
    REPLICA,
    ROLES,
    Guard,
)
from epochal.wire.tls import INSECURE, ROTATION_CHECK_S, TlsError, TlsFiles, Watched, security_from
from epochal.wire.v1 import cms_pb2, metadata_pb2, reconciler_pb2, replica_pb2


@pytest.fixture
def ca(tmp_path: Path) -> Authority:
    return make_ca(tmp_path / "ca")


def issued(ca: Authority, folder: Path, name: str, *role_names: str) -> TlsFiles:
    return issue(
        ca, folder / f"{name}.pem", folder / f"{name}-key.pem", name=name, roles=role_names
    )


# ---------------------------------------------------------------------- the table


def test_every_method_of_every_service_is_in_the_role_table_and_nothing_else_is() -> None:
    served = {
        f"/{service.full_name}/{method.name}"
        for module in (cms_pb2, replica_pb2, reconciler_pb2, health_pb2, reflection_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert set(METHODS) == served


def test_every_transformation_kind_is_in_the_commit_table_with_known_roles() -> None:
    kinds = {f.name for f in metadata_pb2.Transformation.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert set(COMMIT_KINDS) == kinds
    for needed in (*COMMIT_KINDS.values(), *METHODS.values()):
        assert needed in (BY_KIND, roles.ANY_CERTIFICATE) or needed <= set(ROLES)
    assert not COMMIT_KINDS["initialize_cms"]  # never sent to Commit: no one may


class Context:
    """A servicer context as the guard reads it: the auth context and the peer."""

    def __init__(self, uris: tuple[str, ...] | None, subject: str = "CN=someone") -> None:
        self.auth: dict[str, list[bytes]] = {}
        if uris is not None:
            self.auth = {
                "transport_security_type": [b"ssl"],
                "x509_subject": [subject.encode()],
                "peer_uri": [u.encode() for u in uris],
            }

    def auth_context(self) -> dict[str, list[bytes]]:
        return self.auth

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


def role_uri(role: str) -> str:
    return roles.ROLE_URI_PREFIX + role


def test_the_guard_decides_by_method_then_by_commit_kind_and_not_in_plain_text() -> None:
    guard = Guard()
    client = Context((role_uri(CLIENT), "spiffe://other/thing"))
    decommission = "/epochal.v1.ReplicaAdmin/Decommission"
    refused = guard.method_refusal(decommission, client)  # type: ignore[arg-type]
    assert refused == (
        "permission denied: epochal.v1.ReplicaAdmin/Decommission needs the operator role; "
        "this certificate's roles: client"
    )
    assert guard.method_refusal(decommission, Context((role_uri(OPERATOR),))) is None  # type: ignore[arg-type]
    assert guard.method_refusal(decommission, Context(None)) is None  # type: ignore[arg-type]
    nobody = Context(())
    assert guard.method_refusal("/epochal.v1.CMS/Describe", nobody) is not None  # type: ignore[arg-type]
    assert guard.method_refusal("/grpc.health.v1.Health/Check", nobody) is None  # type: ignore[arg-type]
    # Commit: every role passes the method, the kind decides
    assert guard.method_refusal(roles.COMMIT_METHOD, client) is None  # type: ignore[arg-type]
    join = metadata_pb2.Transformation()
    join.prepare_join.SetInParent()
    request = cms_pb2.CommitRequest(transformation=join)
    refusal = guard.request_refusal(roles.COMMIT_METHOD, request, client)  # type: ignore[arg-type]
    assert refusal is not None and "committing prepare_join needs the replica role" in refusal
    replica = Context((role_uri(REPLICA),))
    assert guard.request_refusal(roles.COMMIT_METHOD, request, replica) is None  # type: ignore[arg-type]
    empty = cms_pb2.CommitRequest()  # no kind: the method refuses it as malformed
    assert guard.request_refusal(roles.COMMIT_METHOD, empty, client) is None  # type: ignore[arg-type]


def test_refusals_are_logged_once_per_caller_and_method_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(roles.time, "monotonic", lambda: now[0])
    guard = Guard()
    caller = Context((role_uri(CLIENT),), subject="CN=app-7")
    method = "/epochal.v1.ReplicaPeer/Exchange"
    with caplog.at_level(logging.WARNING, logger="epochal.wire.roles"):
        for _ in range(5):
            guard.method_refusal(method, caller)  # type: ignore[arg-type]
        now[0] += roles.LOG_EVERY_S
        guard.method_refusal(method, caller)  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith(
        "refused epochal.v1.ReplicaPeer/Exchange to CN=app-7 (roles client) at ipv4:127.0.0.1:50000"
    )
    assert lines[1].endswith("(4 more refused since the last line)")


# ---------------------------------------------------------------------- settings and files


def test_tls_settings_are_all_three_files_or_insecure_and_say_what_is_missing(
    ca: Authority, tmp_path: Path
) -> None:
    files = issued(ca, tmp_path, "p", REPLICA)
    assert security_from(files.ca, files.cert, files.key, False) == files
    assert security_from("", "", "", True) is INSECURE
    with pytest.raises(ValueError, match="no TLS files: give --tls-ca, --tls-cert, --tls-key"):
        security_from("", "", "", False)
    with pytest.raises(ValueError, match="go together: --tls-key missing"):
        security_from(files.ca, files.cert, "", False)
    with pytest.raises(ValueError, match=r"--insecure .* and --tls-ca were both given"):
        security_from(files.ca, "", "", True)


def test_files_that_cannot_be_used_are_named(ca: Authority, tmp_path: Path) -> None:
    one, other = issued(ca, tmp_path, "one", CLIENT), issued(ca, tmp_path, "other", CLIENT)
    with pytest.raises(TlsError, match=f"key file {other.key} is not the key of certificate"):
        TlsFiles(one.ca, one.cert, other.key).load()
    with pytest.raises(TlsError, match=r"cannot read certificate file /nonexistent\.pem"):
        TlsFiles(one.ca, "/nonexistent.pem", one.key).load()
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(TlsError, match=r"CA file .*junk\.pem holds no PEM certificate"):
        TlsFiles(str(tmp_path / "junk.pem"), one.cert, one.key).load()


def test_watched_files_reload_when_changed_and_keep_the_old_ones_while_the_new_do_not_load(
    ca: Authority, tmp_path: Path
) -> None:
    files = issued(ca, tmp_path, "w", CLIENT)
    watched = Watched(files)
    first, now = watched.loaded, 1e9
    watched.refresh(now)
    assert (watched.generation, watched.loaded) == (0, first)  # nothing changed
    other = issued(ca, tmp_path, "elsewhere", CLIENT)
    Path(files.key).write_bytes(Path(other.key).read_bytes())  # a key without its certificate
    watched.refresh(now := now + ROTATION_CHECK_S)
    assert (watched.generation, watched.loaded) == (0, first)
    Path(files.cert).write_bytes(Path(other.cert).read_bytes())  # now the pair
    watched.refresh(now + ROTATION_CHECK_S / 2)
    assert watched.generation == 0  # not read again within the interval
    watched.refresh(now + ROTATION_CHECK_S)
    assert watched.generation == 1 and watched.loaded[1] == Path(other.cert).read_bytes()


# ---------------------------------------------------------------------- epochal certs


def test_issued_certificates_carry_their_roles_and_hosts_and_keys_are_private(
    ca: Authority, tmp_path: Path
) -> None:
    files = issue(
        ca,
        tmp_path / "r.pem",
        tmp_path / "r-key.pem",
        name="r",
        roles=(REPLICA, OPERATOR),
        hosts=("replica-0.replicas.svc", "10.1.2.3"),
    )
    certificate = x509.load_pem_x509_certificate(Path(files.cert).read_bytes())
    assert certificate_roles(certificate) == {REPLICA, OPERATOR}
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["replica-0.replicas.svc"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.1.2.3"]
    assert stat.S_IMODE(os.stat(files.key).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(ca.key).st_mode) == 0o600
    with pytest.raises(ValueError, match="unknown role 'admin'"):
        issue(ca, tmp_path / "x.pem", tmp_path / "x-key.pem", name="x", roles=("admin",))
    with pytest.raises(FileExistsError):
        make_ca(ca.cert.parent)


def test_the_certs_commands_make_a_ca_issue_and_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(tmp_path / "certs")
    assert cli_main(["certs", "issue", "x", "--role", "client", "--dir", folder]) == 1
    assert "no CA in" in capsys.readouterr().err
    assert cli_main(["certs", "init", "--dir", folder]) == 0
    assert cli_main(["certs", "init", "--dir", folder]) == 1  # one is there
    capsys.readouterr()
    assert cli_main(["certs", "issue", "ops", "--role", "operator", "--dir", folder]) == 0
    assert f"--tls-cert {folder}/ops.pem --tls-key {folder}/ops-key.pem" in capsys.readouterr().out
    assert cli_main(["certs", "show", f"{folder}/ops.pem", "-o", "json"]) == 0
    shown = capsys.readouterr().out
    assert '"roles": [\n    "operator"\n  ]' in shown and '"expired": false' in shown
    assert cli_main(["certs", "issue", "y", "--role", "boss", "--dir", folder]) == 2


# ---------------------------------------------------------------------- the SDK and the CLI


def test_the_sdk_takes_tls_files_else_the_environment_else_insecure_and_never_plain_by_default(
    ca: Authority, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = issued(ca, tmp_path, "app", CLIENT)
    monkeypatch.setattr(channels, "_process_security", None)
    assert client_security(files, False, {}) == files
    assert client_security(None, True, {}) is INSECURE
    env = {"EPOCHAL_TLS_CA": files.ca, "EPOCHAL_TLS_CERT": files.cert, "EPOCHAL_TLS_KEY": files.key}
    assert client_security(None, False, env) == files
    assert client_security(None, False, {"EPOCHAL_INSECURE": "true"}) is INSECURE
    with pytest.raises(InvalidRequest, match="no TLS files for the client: pass tls="):
        client_security(None, False, {})
    with pytest.raises(InvalidRequest, match="EPOCHAL_TLS_KEY unset"):
        client_security(None, False, {**env, "EPOCHAL_TLS_KEY": ""})
    with pytest.raises(InvalidRequest, match="choose one"):
        client_security(files, True, {})
    with pytest.raises(InvalidRequest, match="is not the key of certificate"):
        client_security(TlsFiles(files.ca, files.cert, str(ca.key)), False, {})


def test_the_cli_reads_tls_files_from_flags_environment_or_its_config_file(
    ca: Authority, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    files = issued(ca, tmp_path / "certs", "ops", OPERATOR)
    monkeypatch.setattr(channels, "_process_security", None)
    monkeypatch.delenv("EPOCHAL_INSECURE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing"))
    nowhere = "127.0.0.1:1"
    assert cli_main(["ring", "--cluster", nowhere]) == 2
    assert "no TLS files to connect with: --tls-ca, --tls-cert and --tls-key" in (
        capsys.readouterr().err
    )
    config = tmp_path / "config.toml"
    config.write_text(
        'tls_ca = "ca/ca.pem"\ntls_cert = "certs/ops.pem"\ntls_key = "certs/ops-key.pem"\n'
    )
    assert (
        cli_main(["ring", "--cluster", nowhere, "--config", str(config), "--timeout-s", "1"]) == 2
    )
    assert "did not answer" in capsys.readouterr().err  # it got as far as connecting
    assert channels.chosen_security() is None  # and left this process's choice as it was
    partial = ["ring", "--cluster", nowhere, "--tls-ca", files.ca]
    assert cli_main(partial) == 2
    assert "--tls-cert, --tls-key missing" in capsys.readouterr().err
    assert cli_main([*partial, "--insecure"]) == 2
    assert "choose one" in capsys.readouterr().err
