"""One gRPC channel per remote address (CMS members and other replicas), opened on first use
and kept: gRPC reconnects a channel by itself after the peer restarts."""

from __future__ import annotations

import grpc

from epochal.wire.channels import insecure_channel
from epochal.wire.v1 import cms_pb2_grpc, replica_pb2_grpc


class Channels:
    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._cms: dict[str, cms_pb2_grpc.CMSStub] = {}
        self._replica: dict[str, replica_pb2_grpc.ReplicaStub] = {}
        self._peer: dict[str, replica_pb2_grpc.ReplicaPeerStub] = {}

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = insecure_channel(address)
        return channel

    def cms(self, address: str) -> cms_pb2_grpc.CMSStub:
        stub = self._cms.get(address)
        if stub is None:
            stub = self._cms[address] = cms_pb2_grpc.CMSStub(self._channel(address))
        return stub

    def replica(self, address: str) -> replica_pb2_grpc.ReplicaStub:
        stub = self._replica.get(address)
        if stub is None:
            stub = self._replica[address] = replica_pb2_grpc.ReplicaStub(self._channel(address))
        return stub

    def peer(self, address: str) -> replica_pb2_grpc.ReplicaPeerStub:
        stub = self._peer.get(address)
        if stub is None:
            stub = self._peer[address] = replica_pb2_grpc.ReplicaPeerStub(self._channel(address))
        return stub

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        self._cms.clear()
        self._replica.clear()
        self._peer.clear()
        for channel in channels.values():
            await channel.close(grace=None)
