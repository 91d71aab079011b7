"""One gRPC channel per remote address (CMS members and other replicas), opened on first use
and kept: gRPC reconnects a channel by itself after the peer restarts."""

from __future__ import annotations

from typing import TypeVar

import grpc

from epochal.wire.channels import insecure_channel
from epochal.wire.v1 import cms_pb2_grpc, replica_pb2_grpc

Stub = TypeVar("Stub")


class Channels:
    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[type, str], object] = {}

    def _stub(self, kind: type[Stub], address: str) -> Stub:
        stub = self._stubs.get((kind, address))
        if stub is None:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = insecure_channel(address)
            stub = self._stubs[(kind, address)] = kind(channel)
        return stub  # type: ignore[return-value]

    def cms(self, address: str) -> cms_pb2_grpc.CMSStub:
        return self._stub(cms_pb2_grpc.CMSStub, address)

    def replica(self, address: str) -> replica_pb2_grpc.ReplicaStub:
        return self._stub(replica_pb2_grpc.ReplicaStub, address)

    def peer(self, address: str) -> replica_pb2_grpc.ReplicaPeerStub:
        return self._stub(replica_pb2_grpc.ReplicaPeerStub, address)

    def admin(self, address: str) -> replica_pb2_grpc.ReplicaAdminStub:
        return self._stub(replica_pb2_grpc.ReplicaAdminStub, address)

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        self._stubs.clear()
        for channel in channels.values():
            await channel.close(grace=None)
