"""Channel and server construction shared by every service and client (one place for options
and for transport security).

A channel is over mutual TLS or plain text as its ``security`` says (``epochal.wire.tls``); a
channel made without one uses the process's (``use``): a service sets its own at start, so
every channel it opens to its peers, the CMS or replicas presents its certificate. A process
that set none gets an error naming what to set, never plain text by default.
"""

from __future__ import annotations

import os
from typing import TypeVar

import grpc

from epochal.telemetry.context import interceptors
from epochal.wire.tls import (
    Insecure,
    SecureChannel,
    Security,
    TlsFiles,
    security_from_env,
    server_credentials,
)
from epochal.wire.v1 import cms_pb2_grpc, replica_pb2_grpc

# Snapshots and FetchLog pages can be large; single requests are bounded separately.
MAX_MESSAGE_BYTES = 64 << 20

CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Reconnect quickly after a peer restarts: the defaults back off up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
)


_process_security: Security | None = None


class NoSecurity(RuntimeError):
    """A channel was asked for in a process that was given neither TLS files nor insecure."""


def use(security: Security | None) -> None:
    """Make ``security`` this process's, for the channels made without one (None: none)."""
    global _process_security
    _process_security = security


def chosen_security() -> Security | None:
    """What ``use`` chose last (None: nothing yet)."""
    return _process_security


def has_process_security() -> bool:
    return _process_security is not None


def process_security() -> Security:
    """The process's security: the one it chose (``use``), else the one the environment's
    ``EPOCHAL_TLS_*`` or ``EPOCHAL_INSECURE`` choose (then kept), else ``NoSecurity``."""
    global _process_security
    if _process_security is None:
        try:
            _process_security = security_from_env(os.environ)
        except ValueError as error:
            raise NoSecurity(str(error)) from None
    if _process_security is None:
        raise NoSecurity(
            "no transport security chosen for this process: give it TLS files (--tls-ca, "
            "--tls-cert, --tls-key or EPOCHAL_TLS_CA, EPOCHAL_TLS_CERT, EPOCHAL_TLS_KEY) or "
            "--insecure (EPOCHAL_INSECURE=true) for a cluster that runs in plain text"
        )
    return _process_security


def channel(address: str, security: Security | None = None) -> grpc.aio.Channel:
    """A channel to ``address`` with ``security`` (default: the process's); in a process that
    traces, its unary calls carry the caller's trace context (``epochal.telemetry.context``)."""
    chosen = security if security is not None else process_security()
    if isinstance(chosen, Insecure):
        return grpc.aio.insecure_channel(
            address, options=CHANNEL_OPTIONS, interceptors=interceptors()
        )
    assert isinstance(chosen, TlsFiles)
    return SecureChannel(address, chosen, CHANNEL_OPTIONS, interceptors())


def add_port(server: grpc.aio.Server, address: str, security: Security) -> int:
    """Listen on ``address`` with ``security``: the port bound (0 when it could not be)."""
    if isinstance(security, Insecure):
        return server.add_insecure_port(address)
    return server.add_secure_port(address, server_credentials(security))


def server_options(max_receive_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", max_receive_bytes),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.so_reuseport", 0),
    ]


Stub = TypeVar("Stub")


class Channels:
    """One gRPC channel per remote address (CMS members and replicas), opened on first use and
    kept: gRPC reconnects a channel by itself after the peer restarts."""

    def __init__(self, security: Security | None = None) -> None:
        self.security = security  # None: the process's
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[type, str], object] = {}

    def stub(self, kind: type[Stub], address: str) -> Stub:
        """The stub of ``kind`` (any generated gRPC stub class) on the channel to ``address``."""
        stub = self._stubs.get((kind, address))
        if stub is None:
            opened = self._channels.get(address)
            if opened is None:
                opened = self._channels[address] = channel(address, self.security)
            stub = self._stubs[(kind, address)] = kind(opened)
        return stub  # type: ignore[return-value]

    def cms(self, address: str) -> cms_pb2_grpc.CMSStub:
        return self.stub(cms_pb2_grpc.CMSStub, address)

    def replica(self, address: str) -> replica_pb2_grpc.ReplicaStub:
        return self.stub(replica_pb2_grpc.ReplicaStub, address)

    def peer(self, address: str) -> replica_pb2_grpc.ReplicaPeerStub:
        return self.stub(replica_pb2_grpc.ReplicaPeerStub, address)

    def admin(self, address: str) -> replica_pb2_grpc.ReplicaAdminStub:
        return self.stub(replica_pb2_grpc.ReplicaAdminStub, address)

    def reconcile(self, address: str) -> replica_pb2_grpc.ReplicaReconcileStub:
        return self.stub(replica_pb2_grpc.ReplicaReconcileStub, address)

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        self._stubs.clear()
        for channel in channels.values():
            await channel.close(grace=None)
