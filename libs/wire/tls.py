"""Transport security: mutual TLS from three PEM files, for every server and every channel.

A process is given a CA certificate (the authority it trusts, for peers and clients alike), its
own certificate and its private key — ``TlsFiles`` — or, explicitly, ``INSECURE`` (plain text,
for a cluster started with ``--insecure`` on both sides). Servers require a client certificate
signed by the CA; clients check the server's certificate against the CA and the address's host.
What a certificate may call is its roles' (``epochal.wire.roles``).

**Rotation without a restart.** Every server and channel of a process that uses the same files
shares one watcher of them (``watched``), which reads them again at most once a second, when
asked, and keeps the last set that loaded:

- a server's credentials ask it at every new connection's handshake
  (``grpc.dynamic_ssl_server_credentials``) and present the new certificate once it changed;
- a channel (``SecureChannel``) asks it at a call, and once the files changed opens a new
  connection with them for the calls that follow; calls and streams already running go on on
  the old connection, which is closed when the last of them ends (never cut short).

New files that do not load — a certificate without its key yet, half written — are not used: the
process logs why, once, and keeps the files it has until they do (write the key before the
certificate, or move both into place). A certificate that expires is not refused by the process
holding it; its peers refuse it at the next handshake.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

log = logging.getLogger(__name__)

ROTATION_CHECK_S = 1.0  # how often the files are read again, at most


class TlsError(ValueError):
    """TLS files that cannot be used: missing, unreadable, not PEM, or a key not the
    certificate's. The message names the file."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """The CA certificate trusted, this process's certificate (PEM; intermediates after it) and
    its private key (PEM, unencrypted)."""

    ca: str
    cert: str
    key: str

    def load(self) -> tuple[bytes, bytes, bytes]:
        """The files' bytes (CA, certificate, key), checked: each parses, the key is the
        certificate's. ``TlsError`` names the file that is wrong."""
        loaded = self.read()
        self.check(loaded)
        return loaded

    def read(self) -> tuple[bytes, bytes, bytes]:
        ca, cert, key = (_read(path, what) for path, what in self._named())
        return ca, cert, key

    def check(self, loaded: tuple[bytes, bytes, bytes]) -> None:
        """``TlsError`` unless the bytes read from the files can be used together."""
        ca, cert, key = loaded
        try:
            x509.load_pem_x509_certificates(ca)
        except ValueError as error:
            raise TlsError(f"CA file {self.ca} holds no PEM certificate: {error}") from None
        try:
            chain = x509.load_pem_x509_certificates(cert)
        except ValueError as error:
            raise TlsError(
                f"certificate file {self.cert} holds no PEM certificate: {error}"
            ) from None
        try:
            private = serialization.load_pem_private_key(key, password=None)
        except (ValueError, TypeError) as error:
            raise TlsError(f"key file {self.key} holds no unencrypted PEM key: {error}") from None
        if _public(private.public_key()) != _public(chain[0].public_key()):
            raise TlsError(f"key file {self.key} is not the key of certificate {self.cert}")

    def _named(self) -> Sequence[tuple[str, str]]:
        return ((self.ca, "CA file"), (self.cert, "certificate file"), (self.key, "key file"))


@dataclass(frozen=True, slots=True)
class Insecure:
    """Plain text: no certificate, no role check. Only for a cluster that runs without TLS on
    every side (``--insecure``)."""


INSECURE = Insecure()
Security = TlsFiles | Insecure


def security_from(
    ca: str, cert: str, key: str, insecure: bool, *, flags: str = "--tls"
) -> Security:
    """The security a process was given: the three files, or ``INSECURE`` when asked for
    explicitly. ``ValueError`` (naming the flags, ``<flags>-ca`` …) for a partial set, for files
    given together with insecure, and for neither; the files are checked by ``load``."""
    given = {f"{flags}-ca": ca, f"{flags}-cert": cert, f"{flags}-key": key}
    if insecure:
        named = [name for name, value in given.items() if value]
        if named:
            raise ValueError(
                f"--insecure (plain text) and {', '.join(named)} were both given: choose one"
            )
        return INSECURE
    missing = [name for name, value in given.items() if not value]
    if len(missing) == len(given):
        raise ValueError(
            f"no TLS files: give {', '.join(given)} (a CA, this process's certificate and key; "
            "`epochal certs` makes them), or --insecure for a cluster that runs in plain text"
        )
    if missing:
        raise ValueError(f"{', '.join(given)} go together: {', '.join(missing)} missing")
    files = TlsFiles(ca, cert, key)
    files.load()
    return files


TLS_ENV = ("EPOCHAL_TLS_CA", "EPOCHAL_TLS_CERT", "EPOCHAL_TLS_KEY")
INSECURE_ENV = "EPOCHAL_INSECURE"


def security_from_env(env: Mapping[str, str]) -> Security | None:
    """The security the shared variables choose (``EPOCHAL_TLS_CA``, ``_CERT``, ``_KEY`` or
    ``EPOCHAL_INSECURE``), None when they choose none; ``ValueError`` naming the variables when
    they are partial, contradict each other or name files that cannot be used."""
    given = [env.get(name, "") for name in TLS_ENV]
    plain_text = env.get(INSECURE_ENV, "").strip().lower()
    if plain_text not in _TRUE | _FALSE:
        raise ValueError(f"{INSECURE_ENV}: expected true or false, got {plain_text!r}")
    plain = plain_text in _TRUE
    if any(given):
        missing = [name for name, value in zip(TLS_ENV, given, strict=True) if not value]
        if missing:
            raise ValueError(f"{', '.join(TLS_ENV)} go together: {', '.join(missing)} unset")
        if plain:
            raise ValueError(f"{INSECURE_ENV} and {', '.join(TLS_ENV)} are all set: choose one")
        files = TlsFiles(*given)
        files.load()
        return files
    return INSECURE if plain else None


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise TlsError(f"cannot read {what} {path}: {error.strerror or error}") from None


def _public(key: Any) -> bytes:
    return key.public_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


class Watched:
    """A set of files, the last bytes read from them that loaded (``loaded``) and how many
    times those changed (``generation``). Thread-safe: servers ask from gRPC's threads."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self.loaded = files.load()
        self.generation = 0
        self._seen = self.loaded  # the bytes last read, whether they loaded or not
        self._checked_at = time.monotonic()
        self._lock = threading.Lock()

    def refresh(self, now: float | None = None) -> None:
        """Read the files again if ``ROTATION_CHECK_S`` passed since the last time; when they
        changed and load, they are the new ``loaded`` (else logged once, and not used)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if now - self._checked_at < ROTATION_CHECK_S:
                return
            self._checked_at = now
            try:
                read = self.files.read()
            except TlsError as error:  # a file moved away, mid-rotation
                log.debug("TLS files unreadable for now (%s); keeping the ones in use", error)
                return
            if read == self._seen:
                return
            self._seen = read
            if read == self.loaded:
                return
            try:
                self.files.check(read)
            except TlsError as error:
                log.warning(
                    "TLS files changed but cannot be used (%s); keeping the ones in use", error
                )
                return
            self.loaded = read
            self.generation += 1
        log.info("TLS files changed: using the new certificate %s", self.files.cert)


_watchers: dict[TlsFiles, Watched] = {}
_watchers_lock = threading.Lock()


def watched(files: TlsFiles) -> Watched:
    """The process's watcher of ``files`` (made, and the files loaded, on first use: TlsError
    then; afterwards the last set that loaded serves every new channel and server)."""
    with _watchers_lock:
        found = _watchers.get(files)
        if found is None:
            found = _watchers[files] = Watched(files)
        return found


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """Credentials for a server port: client certificates required and checked against the CA;
    the files' new certificate presented from the first handshake after they changed."""
    watcher = watched(files)
    served = [watcher.generation]

    def configuration(loaded: tuple[bytes, bytes, bytes]) -> Any:
        ca, cert, key = loaded
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def fetch() -> Any:
        watcher.refresh()
        if watcher.generation == served[0]:
            return None
        served[0] = watcher.generation
        return configuration(watcher.loaded)

    return grpc.dynamic_ssl_server_credentials(
        configuration(watcher.loaded), fetch, require_client_authentication=True
    )


def channel_credentials(loaded: tuple[bytes, bytes, bytes]) -> grpc.ChannelCredentials:
    ca, cert, key = loaded
    return grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=cert
    )


class SecureChannel(grpc.aio.Channel):
    """A channel over mutual TLS whose connection follows its files: after they change, the
    next call opens a new underlying channel with them; the old one is closed once the calls
    it carries have ended (see the module's notes)."""

    def __init__(
        self,
        address: str,
        files: TlsFiles,
        options: Sequence[tuple[str, Any]],
        interceptors: Sequence[Any] | None,
    ) -> None:
        self._address, self._options, self._interceptors = address, tuple(options), interceptors
        self._watched = watched(files)
        self._generation = self._watched.generation
        self._current = self._open(self._watched.loaded)
        self._calls: dict[grpc.aio.Channel, int] = {}  # calls running, per underlying channel
        self._retired: list[grpc.aio.Channel] = []  # replaced, closed when their calls end
        self._closing: set[asyncio.Task[None]] = set()

    def _open(self, loaded: tuple[bytes, bytes, bytes]) -> grpc.aio.Channel:
        return grpc.aio.secure_channel(
            self._address,
            channel_credentials(loaded),
            options=self._options,
            interceptors=self._interceptors,
        )

    def current(self) -> grpc.aio.Channel:
        """The channel for a call starting now (a new one once the files changed)."""
        self._watched.refresh()
        if self._watched.generation != self._generation:
            self._generation = self._watched.generation
            old, self._current = self._current, self._open(self._watched.loaded)
            self._retired.append(old)
            if not self._calls.get(old):
                self._close_idle(old)
        return self._current

    def started(self, channel: grpc.aio.Channel, call: Any) -> None:
        """A call began on ``channel`` (one of this channel's connections)."""
        self._calls[channel] = self._calls.get(channel, 0) + 1
        call.add_done_callback(lambda _: self._ended(channel))

    def _ended(self, channel: grpc.aio.Channel) -> None:
        left = self._calls[channel] - 1
        if left:
            self._calls[channel] = left
            return
        del self._calls[channel]
        if channel in self._retired:
            self._close_idle(channel)

    def _close_idle(self, channel: grpc.aio.Channel) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here: ``close`` closes it
            return
        self._retired.remove(channel)
        task = loop.create_task(channel.close(None))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Rebound(self, "unary_unary", method, args, kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Rebound(self, "unary_stream", method, args, kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Rebound(self, "stream_unary", method, args, kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Rebound(self, "stream_stream", method, args, kwargs)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._current.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._current.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self.current().channel_ready()

    async def close(self, grace: float | None = None) -> None:
        """Close every connection (the calls still running on them end CANCELLED)."""
        for task in list(self._closing):
            await task
        retired, self._retired = self._retired, []
        for channel in retired:
            await channel.close(grace)
        await self._current.close(grace)

    async def __aenter__(self) -> SecureChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close(None)


class _Rebound:
    """A stub's method on a ``SecureChannel``: each call made on the channel's current
    connection (gRPC's multicallable of that connection, made once per connection) and
    counted on it while it runs."""

    __slots__ = ("_args", "_bound", "_channel", "_kind", "_kwargs", "_method")

    def __init__(
        self, channel: SecureChannel, kind: str, method: str, args: Any, kwargs: Any
    ) -> None:
        self._channel, self._kind, self._method = channel, kind, method
        self._args, self._kwargs = args, kwargs
        self._bound: tuple[grpc.aio.Channel, Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        current = self._channel.current()
        if self._bound is None or self._bound[0] is not current:
            factory = getattr(current, self._kind)
            self._bound = (current, factory(self._method, *self._args, **self._kwargs))
        call = self._bound[1](*args, **kwargs)
        self._channel.started(current, call)
        return call
