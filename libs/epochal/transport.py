"""How the SDK's clients connect: mutual TLS with ``tls=epochal.TlsFiles(ca, cert, key)``, else
the TLS files of the environment (``EPOCHAL_TLS_CA``, ``EPOCHAL_TLS_CERT``, ``EPOCHAL_TLS_KEY``, the
variables every service and the CLI read), else plain text when asked for (``insecure=True`` or
``EPOCHAL_INSECURE=true``), else the security the process chose for its channels (a service, a
dev cluster's commands); never plain text by default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from epochal.errors import InvalidRequest
from epochal.wire import channels
from epochal.wire.tls import INSECURE, TLS_ENV, Security, TlsError, TlsFiles, security_from_env


def client_security(
    tls: TlsFiles | None, insecure: bool, env: Mapping[str, str] | None = None
) -> Security:
    """The security of a client made with ``tls`` and ``insecure`` (``InvalidRequest`` naming
    what to give when there is none, or when what was given cannot be used)."""
    environment = os.environ if env is None else env
    if tls is not None and insecure:
        raise InvalidRequest("tls= and insecure=True were both given: choose one")
    if tls is not None:
        if not isinstance(tls, TlsFiles):
            raise InvalidRequest(f"tls must be an epochal.TlsFiles(ca, cert, key), not {tls!r}")
        return _checked(tls)
    if insecure:
        return INSECURE
    try:
        chosen = security_from_env(environment)
    except ValueError as error:  # TlsError too: a file that cannot be used
        raise InvalidRequest(str(error)) from None
    if chosen is not None:
        return chosen
    if channels.has_process_security():
        return channels.process_security()
    raise InvalidRequest(
        "no TLS files for the client: pass tls=epochal.TlsFiles(ca=..., cert=..., key=...) or "
        f"set {', '.join(TLS_ENV)} (`epochal certs` makes them), or insecure=True for a "
        "cluster started with --insecure"
    )


def _checked(files: TlsFiles) -> TlsFiles:
    try:
        files.load()
    except TlsError as error:
        raise InvalidRequest(str(error)) from None
    return files
