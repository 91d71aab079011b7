"""The local clusters' certificates: a CA in a folder and a certificate per process, made on first
use and kept (a restarted dev cluster presents the same ones).

A process that runs local clusters has one ``DevPki`` (``process_pki``): its clusters' servers
and the process itself trust the same CA, and the process calls them with a certificate that
has every role (``ADMIN``: the dev cluster's commands and the tests drive every kind of call;
the trust tests make certificates of one role each).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from epochal.certs import DEFAULT_HOSTS, Authority, issue, make_ca
from epochal.wire import channels
from epochal.wire.roles import ROLES
from epochal.wire.tls import TLS_ENV, TlsFiles

TLS_DIR = "tls"  # a local cluster's certificates: in its data directory, unless it is given some
ADMIN = "local-admin"  # the certificate of the process that runs the clusters: every role


class DevPki:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.authority = Authority.in_dir(directory)
        if not self.authority.exists:
            make_ca(directory, name=f"Epochal dev CA ({directory.name})")

    def files(
        self, name: str, roles: Sequence[str], hosts: Sequence[str] = DEFAULT_HOSTS
    ) -> TlsFiles:
        """``name``'s certificate and key, issued now unless already there."""
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}-key.pem"
        if cert.exists() and key.exists():
            return TlsFiles(str(self.authority.cert), str(cert), str(key))
        return issue(self.authority, cert, key, name=name, roles=roles, hosts=hosts)

    def admin(self) -> TlsFiles:
        return self.files(ADMIN, ROLES)

    def flags(self, name: str, role: str) -> list[str]:
        """A server's TLS flags with a certificate of ``role``."""
        files = self.files(name, (role,))
        return ["--tls-ca", files.ca, "--tls-cert", files.cert, "--tls-key", files.key]

    def client_env(self) -> dict[str, str]:
        """The variables that give the CLI or the SDK the admin certificate."""
        files = self.admin()
        return dict(zip(TLS_ENV, (files.ca, files.cert, files.key), strict=True))


def security_flags(pki: DevPki | None, name: str, role: str) -> list[str]:
    """A server's flags: TLS with ``name``'s certificate of ``role``, or ``--insecure``."""
    return pki.flags(name, role) if pki is not None else ["--insecure"]


_process_pki: DevPki | None = None


def process_pki(default_directory: Path) -> DevPki:
    """This process's PKI: the one set with ``use_pki``, else one made in ``default_directory``
    (and then kept for the process). The process's own channels present its admin certificate
    unless it chose another security already."""
    global _process_pki
    if _process_pki is None:
        use_pki(DevPki(default_directory))
    assert _process_pki is not None
    return _process_pki


def use_pki(pki: DevPki) -> None:
    global _process_pki
    _process_pki = pki
    if not channels.has_process_security():
        channels.use(pki.admin())
