"""Run one replica: storage, the metadata follower, registration, the coordinator, gRPC
services, health, reflection, metrics, signals.

Start-up order: storage (migrations) and the metadata stored here; the gRPC server (NOT_SERVING:
peers may already fetch the log from it); the follower's push stream and pulls; registration
(once per data directory, retried while the CMS is unreachable); then the node serves, and
reports SERVING once it has caught up to the epoch the CMS had when it first reached it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from epochal.replica.barriers import BarrierDriver
from epochal.replica.channels import Channels
from epochal.replica.coordinator import Coordinator
from epochal.replica.follower import MetadataFollower
from epochal.replica.identity import RegistrationFailed, node_number, register
from epochal.replica.ids import MutationIds
from epochal.replica.local_replica import LocalReplica
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.operations import Operations
from epochal.replica.servicer import (
    AdminServicer,
    PeerServicer,
    ReplicaServicer,
    TestingServicer,
)
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.replica.streaming import StreamReceiver, StreamSource
from epochal.telemetry import setup_tracing, shutdown_tracing
from epochal.wire.channels import server_options
from epochal.wire.handlers import add_servicer
from epochal.wire.v1 import replica_pb2

log = logging.getLogger(__name__)

REPLICA_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["Replica"]
PEER_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaPeer"]
TESTING_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaTesting"]
ADMIN_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaAdmin"]
EXIT_CANNOT_REGISTER = 78  # EX_CONFIG
REGISTER_RETRY_MAX_S = 5.0


class ReplicaServer:
    def __init__(self, settings: ReplicaSettings) -> None:
        self.settings = settings
        self.health = health.aio.HealthServicer()
        self.metrics = ReplicaMetrics()
        self.channels = Channels()
        self.storage: ReplicaStorage
        self.follower: MetadataFollower
        self.local: LocalReplica
        self.coordinator: Coordinator
        self.server: grpc.aio.Server
        self.registered = asyncio.Event()
        self._stopping = False
        self._registration: asyncio.Task[None] | None = None

    async def start(self) -> None:
        settings = self.settings
        instance = settings.address.replace(":", "_")
        trace_file = setup_tracing("replica", instance, settings.trace_dir or None)
        if trace_file is not None:
            log.info("writing spans to %s", trace_file)
        self.storage = ReplicaStorage(settings.db_url, sync=settings.sync)
        self.follower = MetadataFollower(settings, self.storage, self.channels, self.metrics)
        self.follower.load()
        self.local = LocalReplica(settings, self.storage, self.follower, self.metrics)
        self.coordinator = Coordinator(
            settings, self.follower, self.local, self.channels, self.metrics
        )
        self.follower.on_change.append(lambda _: self._update_readiness())
        self.server = grpc.aio.server(options=server_options())
        add_servicer(
            self.server,
            REPLICA_SERVICE,
            ReplicaServicer(settings, self.follower, self.coordinator, self.storage, self.metrics),
        )
        source = StreamSource(settings, self.follower, self.storage, self.metrics)
        self.receiver = StreamReceiver(
            settings, self.follower, self.storage, self.channels, self.metrics
        )
        self.operations = Operations(
            settings,
            self.follower,
            self.storage,
            BarrierDriver(settings, self.follower, self.channels, self.metrics),
            self.receiver,
            self.channels,
            self.metrics,
        )
        add_servicer(
            self.server,
            PEER_SERVICE,
            PeerServicer(settings, self.local, self.follower, source, self.receiver),
        )
        add_servicer(self.server, ADMIN_SERVICE, AdminServicer(self.operations))
        services = [REPLICA_SERVICE.full_name, PEER_SERVICE.full_name, ADMIN_SERVICE.full_name]
        if settings.enable_test_hooks:
            add_servicer(
                self.server,
                TESTING_SERVICE,
                TestingServicer(self.follower, self.coordinator, self.receiver),
            )
            services.append(TESTING_SERVICE.full_name)
            log.warning("test hooks are enabled (--enable-test-hooks): never in production")
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (
                *services,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            self.server,
        )
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        if self.server.add_insecure_port(settings.listen) == 0:
            raise OSError(f"cannot listen on {settings.listen}")
        await self.server.start()
        if settings.metrics_listen:
            self.metrics.metrics.serve(settings.metrics_listen)
        self.follower.start()
        self._registration = asyncio.get_running_loop().create_task(self._register())
        log.info(
            "replica listening on %s (%s/%s), data in %s",
            settings.listen,
            settings.datacenter,
            settings.rack,
            settings.data_path,
        )

    async def _register(self) -> None:
        backoff_s = 0.2
        while True:
            try:
                node_id = await register(self.settings, self.storage, self.follower)
                break
            except RegistrationFailed as error:
                if error.permanent:
                    log.critical("%s", error)
                    logging.shutdown()
                    os._exit(EXIT_CANNOT_REGISTER)
                log.warning("registration: %s; retrying", error)
            except Exception:
                log.exception("registration failed unexpectedly; retrying")
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, REGISTER_RETRY_MAX_S)
        settings = self.settings
        ids = MutationIds(
            node_number(node_id),
            self.storage,
            max_skew_ms=settings.max_skew_ms,
            hlc_reserve_ms=settings.hlc_reserve_ms,
            sequence_block=settings.sequence_block,
        )
        self.follower.node_id = self.local.node_id = node_id
        self.coordinator.attach(node_id, ids)
        self.registered.set()
        log.info("serving as %s", node_id)
        self._update_readiness()

    def _update_readiness(self) -> None:
        ready = (
            self.registered.is_set()
            and self.follower.caught_up
            and not self.follower.stopped_reason
            and not self._stopping
        )
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if ready
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        if status != getattr(self, "_status", None):
            self._status = status
            asyncio.get_running_loop().create_task(self._set_status(status))

    async def _set_status(self, status: int) -> None:
        await self.health.set("", status)
        await self.health.set(REPLICA_SERVICE.full_name, status)

    async def stop(self) -> None:
        """Graceful: NOT_SERVING, finish in-flight RPCs within the grace period, close."""
        self._stopping = True
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        if self._registration is not None:
            self._registration.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._registration
        await self.server.stop(self.settings.shutdown_grace_s)
        self.coordinator.close()
        await self.follower.stop()
        await self.channels.close()
        self.storage.close()
        shutdown_tracing()
