"""``epochal certs``: a CA for a cluster and certificates signed by it, one per process, each with
its roles (``init``, ``issue``, ``show``). Files are PEM in one folder (``--dir``, default
``./certs``): ``ca.pem`` and ``ca-key.pem``, ``<name>.pem`` and ``<name>-key.pem``; keys are mode
0600. For development and tests; in production a cluster's own CA issues certificates with the
same subject alternative names (``urn:epochal:role:<role>`` URIs, the hosts as DNS or IP names).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from cryptography import x509

from epochal.certs import CA_DAYS, CERT_DAYS, DEFAULT_HOSTS, Authority, issue, make_ca
from epochal.cli.failures import Failure
from epochal.cli.options import global_options, resolve
from epochal.cli.output import emit
from epochal.runtime.security import certificate_roles
from epochal.wire.roles import ROLES

DIR_HELP = "the folder of the CA and the certificates [EPOCHAL_CERTS_DIR] (default ./certs)"


@click.group("certs")
@global_options
def certs() -> None:
    """A CA and certificates with roles for mutual TLS (init, issue, show)."""


@certs.command("init")
@click.option("--dir", "directory", envvar="EPOCHAL_CERTS_DIR", default="certs", help=DIR_HELP)
@click.option("--name", default="Epochal CA", show_default=True, help="the CA's common name")
@click.option("--days", type=click.IntRange(min=1), default=CA_DAYS, show_default=True)
@global_options
def init(directory: str, name: str, days: int) -> None:
    """Make a CA in --dir (refused if one is there)."""
    options = resolve(click.get_current_context())
    try:
        authority = make_ca(Path(directory), name=name, days=days)
    except FileExistsError as error:
        raise Failure(f"{error}: issue certificates with it, or choose another --dir") from None
    data = {"ca": str(authority.cert), "ca_key": str(authority.key)}
    emit(
        options.output,
        data,
        lambda: [
            f"CA {name!r} in {authority.cert} (key {authority.key}, keep it private)",
            f"next: epochal certs issue NAME --role ROLE --dir {directory}",
        ],
    )


@certs.command("issue")
@click.argument("name")
@click.option(
    "--role",
    "roles",
    multiple=True,
    required=True,
    type=click.Choice(ROLES),
    help="a role the certificate carries (repeat for more)",
)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    help=f"a DNS name or IP address it serves on (repeat; default {', '.join(DEFAULT_HOSTS)})",
)
@click.option("--dir", "directory", envvar="EPOCHAL_CERTS_DIR", default="certs", help=DIR_HELP)
@click.option("--days", type=click.IntRange(min=1), default=CERT_DAYS, show_default=True)
@global_options
def issue_command(
    name: str, roles: tuple[str, ...], hosts: tuple[str, ...], directory: str, days: int
) -> None:
    """Issue NAME's certificate and key (replaced if there: a rotation), signed by the CA."""
    options = resolve(click.get_current_context())
    authority = Authority.in_dir(Path(directory))
    if not authority.exists:
        raise Failure(f"no CA in {directory}: make one with `epochal certs init --dir {directory}`")
    folder = Path(directory)
    files = issue(
        authority,
        folder / f"{name}.pem",
        folder / f"{name}-key.pem",
        name=name,
        roles=roles,
        hosts=hosts or DEFAULT_HOSTS,
        days=days,
    )
    data = {"name": name, "roles": list(roles), "hosts": list(hosts or DEFAULT_HOSTS)}
    data |= {"ca": files.ca, "cert": files.cert, "key": files.key}
    emit(
        options.output,
        data,
        lambda: [
            f"{name}: roles {', '.join(roles)}, hosts {', '.join(data['hosts'])}, {days} days",
            f"  --tls-ca {files.ca} --tls-cert {files.cert} --tls-key {files.key}",
        ],
    )


@certs.command("show")
@click.argument("certificate", type=click.Path(exists=True, dir_okay=False))
@global_options
def show(certificate: str) -> None:
    """What a certificate says: subject, roles, hosts, validity."""
    options = resolve(click.get_current_context())
    try:
        loaded = x509.load_pem_x509_certificates(Path(certificate).read_bytes())[0]
    except ValueError as error:
        raise Failure(f"{certificate} holds no PEM certificate: {error}") from None
    try:
        names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        hosts = [*names.get_values_for_type(x509.DNSName)]
        hosts += [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        hosts = []
    roles = sorted(certificate_roles(loaded))
    expired = loaded.not_valid_after_utc <= datetime.now(UTC)
    data = {
        "subject": loaded.subject.rfc4514_string(),
        "issuer": loaded.issuer.rfc4514_string(),
        "roles": roles,
        "hosts": hosts,
        "not_before": loaded.not_valid_before_utc.isoformat(),
        "not_after": loaded.not_valid_after_utc.isoformat(),
        "expired": expired,
    }
    emit(
        options.output,
        data,
        lambda: [
            f"{data['subject']} (issued by {data['issuer']})",
            f"  roles: {', '.join(roles) or 'none'}",
            f"  hosts: {', '.join(hosts) or 'none'}",
            f"  valid: {data['not_before']} to {data['not_after']}"
            + ("  EXPIRED" if expired else ""),
        ],
    )
