"""A service's transport security: the same flags in every service, its ports, and what it says
about them at start.

Every service takes ``--tls-ca``, ``--tls-cert`` and ``--tls-key`` (or ``EPOCHAL_TLS_CA``,
``EPOCHAL_TLS_CERT``, ``EPOCHAL_TLS_KEY``, shared by all services; a service's own
``EPOCHAL_<SERVICE>_TLS_*`` wins), or ``--insecure`` (``EPOCHAL_INSECURE``) for plain text, and
``--health-listen host:port``: a plaintext port that serves gRPC health and nothing else, for
probes that cannot present a certificate (Docker's HEALTHCHECK, a kubelet's gRPC probe). The
security chosen is also the process's for the channels it opens (``epochal.wire.channels.use``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import grpc
from cryptography import x509

from epochal.runtime.flags import parse_addresses
from epochal.telemetry.metrics import Metrics
from epochal.wire import channels
from epochal.wire.handlers import add_servicer
from epochal.wire.roles import ROLE_URI_PREFIX, Guard
from epochal.wire.standard import HEALTH_SERVICE, HealthServicer
from epochal.wire.tls import Insecure, Security, TlsFiles, security_from

log = logging.getLogger(__name__)


def security_of(settings: Any) -> Security:
    """The security a service's settings chose, its files loaded and checked (``ValueError``
    naming the flag or file that is wrong; also for a bad ``--health-listen``)."""
    if settings.health_listen:
        parse_addresses(settings.health_listen, "--health-listen")
    return security_from(settings.tls_ca, settings.tls_cert, settings.tls_key, settings.insecure)


def listen(
    server: grpc.aio.Server, address: str, security: Security, *, role: str, name: str
) -> int:
    """Listen on ``address`` with ``security`` and say so in the log; the port bound (0: it
    could not be)."""
    port = channels.add_port(server, address, security)
    if isinstance(security, Insecure):
        log.warning(
            "%s serves in PLAIN TEXT on %s (--insecure): no certificates, no role checks; "
            "anyone who reaches the port may call every method",
            name,
            address,
        )
    else:
        log.info("%s serves mutual TLS on %s: %s", name, address, describe(security, role))
    return port


def describe(files: TlsFiles, role: str) -> str:
    """The certificate a process presents: subject, roles, expiry (and a warning in the log
    when it lacks the role the process needs, or has expired)."""
    certificate = x509.load_pem_x509_certificates(files.load()[1])[0]
    roles = certificate_roles(certificate)
    expires = certificate.not_valid_after_utc
    if role not in roles:
        log.warning(
            "the certificate %s has no %s role (it has %s): its calls that need one will be "
            "refused",
            files.cert,
            role,
            ", ".join(sorted(roles)) or "none",
        )
    if expires <= datetime.now(UTC):
        log.warning("the certificate %s expired at %s", files.cert, expires.isoformat())
    return (
        f"certificate {files.cert} ({certificate.subject.rfc4514_string()}, roles "
        f"{', '.join(sorted(roles)) or 'none'}, until {expires.isoformat()}), CA {files.ca}"
    )


def certificate_roles(certificate: x509.Certificate) -> frozenset[str]:
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return frozenset()
    uris = names.value.get_values_for_type(x509.UniformResourceIdentifier)
    return frozenset(u[len(ROLE_URI_PREFIX) :] for u in uris if u.startswith(ROLE_URI_PREFIX))


def guard(metrics: Metrics, security: Security) -> Guard:
    """The process's check of its callers' roles, its refusals counted in ``metrics``; with
    TLS, a call that did not come over it is refused too."""
    refused = metrics.counter(
        "epochal_rpc_refused_total",
        "calls refused PERMISSION_DENIED: the caller's certificate lacks the role needed",
        ["method"],
    )
    return Guard(refused, require_tls=isinstance(security, TlsFiles))


class HealthPort:
    """A plaintext server with the health service only (``--health-listen``)."""

    def __init__(self) -> None:
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self, address: str, health: HealthServicer) -> None:
        if not address:
            return
        server = self.server = grpc.aio.server()
        add_servicer(server, HEALTH_SERVICE, health)
        self.port = server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen on {address} (--health-listen)")
        await server.start()
        log.info("health (plain text, health only) on %s", address)

    async def stop(self, grace_s: float | None) -> None:
        if self.server is not None:
            await self.server.stop(grace_s)
