"""Channel and server construction shared by every service and client (one place for options)."""

from __future__ import annotations

from typing import TypeVar

import grpc

from epochal.telemetry.context import interceptors
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


def insecure_channel(address: str) -> grpc.aio.Channel:
    """A channel to ``address``; in a process that traces, its unary calls carry the caller's
    trace context (``epochal.telemetry.context``)."""
    return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS, interceptors=interceptors())


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

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[type, str], object] = {}

    def stub(self, kind: type[Stub], address: str) -> Stub:
        """The stub of ``kind`` (any generated gRPC stub class) on the channel to ``address``."""
        stub = self._stubs.get((kind, address))
        if stub is None:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = insecure_channel(address)
            stub = self._stubs[(kind, address)] = kind(channel)
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
