"""Certificates for a cluster: a CA and, signed by it, a certificate per process with its roles
(``epochal certs init|issue`` on the command line; the dev cluster and the tests use the same).

A certificate's roles are URI subject alternative names ``urn:epochal:role:<role>``
(``epochal.wire.roles``); its hosts are DNS or IP SANs, which a client checks the address it
dialled against. Keys are ECDSA P-256, written unencrypted with mode 0600 (a process reads its
key at start and again when it changes). Meant for development and tests: a production cluster
takes its certificates from its own CA (cert-manager, Vault, a corporate PKI) with the same SANs.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from epochal.wire.roles import ROLE_URI_PREFIX, ROLES
from epochal.wire.tls import TlsFiles

CA_CERT, CA_KEY = "ca.pem", "ca-key.pem"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")
CA_DAYS = 3650
CERT_DAYS = 365
_BOTH_ENDS = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]  # a peer is both
BACKDATE = timedelta(minutes=5)  # a certificate valid from a little before now: clock skew


@dataclass(frozen=True, slots=True)
class Authority:
    """A CA's certificate and key files."""

    cert: Path
    key: Path

    @classmethod
    def in_dir(cls, directory: Path) -> Authority:
        return cls(directory / CA_CERT, directory / CA_KEY)

    @property
    def exists(self) -> bool:
        return self.cert.exists() and self.key.exists()


def make_ca(directory: Path, *, name: str = "Epochal CA", days: int = CA_DAYS) -> Authority:
    """A new CA in ``directory`` (``ca.pem``, ``ca-key.pem``); FileExistsError if one is there."""
    authority = Authority.in_dir(directory)
    if authority.cert.exists() or authority.key.exists():
        raise FileExistsError(f"a CA is already in {directory} ({CA_CERT}, {CA_KEY})")
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(authority.key, _key_pem(key), private=True)
    _write(authority.cert, certificate.public_bytes(serialization.Encoding.PEM))
    return authority


def issue(
    authority: Authority,
    cert_path: Path,
    key_path: Path,
    *,
    name: str,
    roles: Sequence[str],
    hosts: Sequence[str] = DEFAULT_HOSTS,
    days: int = CERT_DAYS,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
) -> TlsFiles:
    """A certificate for ``name`` with ``roles`` and ``hosts``, signed by ``authority``, and
    its key; both files written (replaced if there: a rotation). ``not_before``/``not_after``
    override the validity (tests make expired certificates with them)."""
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise ValueError(f"unknown role {unknown[0]!r}: roles are {', '.join(ROLES)}")
    if not name:
        raise ValueError("a certificate needs a name (its common name)")
    ca_cert = x509.load_pem_x509_certificate(authority.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(authority.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{authority.key} is not an EC key made by `epochal certs init`")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    names: list[x509.GeneralName] = [_host_name(host) for host in hosts]
    names += [x509.UniformResourceIdentifier(ROLE_URI_PREFIX + role) for role in roles]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - BACKDATE)
        .not_valid_after(not_after or now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(_BOTH_ENDS), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    certificate = builder.sign(ca_key, hashes.SHA256())
    # the key first, then the certificate: a process that watches them never loads a new
    # certificate with the old key (it would refuse the pair and keep its old one meanwhile)
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, certificate.public_bytes(serialization.Encoding.PEM))
    return TlsFiles(str(authority.cert), str(cert_path), str(key_path))


def _host_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write ``path`` whole, by a rename: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
