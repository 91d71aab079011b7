"""Run one replica: storage, the metadata follower, registration, the coordinator, gRPC
services, health, reflection, metrics, signals.

Start-up order: storage (a data directory of an older storage format is refused, exit status
65; then migrations) and the metadata stored here; the gRPC server (NOT_SERVING: peers may
already fetch the log from it); the follower's push stream and pulls; registration (once per
data directory, retried while the CMS is unreachable); then the node serves, and reports
SERVING once it has caught up to the epoch the CMS had when it first reached it. Then, with
``--auto-join`` (the default), it joins the ring if it owns no tokens
(``epochal.replica.auto_join``). Until it is registered, the ReplicaPeer and ReplicaAdmin
services answer UNAVAILABLE ("starting: registering with the CMS"); the client API refuses
writes and reads the same way (rule ``not_ready``) and serves FetchLog and Describe.

Stop (SIGTERM or Ctrl-C), within ``--shutdown-grace-s``: NOT_SERVING and new calls refused; the
Session and Exchange streams take no more requests, answer those they took, and end with
UNAVAILABLE (the clients retry what they had queued elsewhere); the calls still running finish
(gRPC cancels what is left at the end of its share of the grace period); then the streams to
peers, the follower and storage close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

import grpc
from grpc_health.v1 import health_pb2

from epochal.replica.admin_servicer import AdminServicer, TestingServicer
from epochal.replica.auto_join import AutoJoin
from epochal.replica.barriers import BarrierDriver
from epochal.replica.client_servicer import ReplicaServicer
from epochal.replica.coordinator import Coordinator
from epochal.replica.database import StorageFormatError
from epochal.replica.faults import Faults
from epochal.replica.identity import RegistrationFailed, node_number, register
from epochal.replica.ids import MutationIds
from epochal.replica.local_replica import LocalReplica
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.operations import Operations
from epochal.replica.peer_client import PeerClient
from epochal.replica.peer_servicer import PeerServicer
from epochal.replica.purge import Purger
from epochal.replica.reconcile_node import ReconcileNode
from epochal.replica.reconcile_servicer import ReconcileServicer
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_receiver import StreamReceiver
from epochal.replica.stream_source import StreamSource
from epochal.runtime import security
from epochal.runtime.follower import MetadataFollower
from epochal.runtime.service import RPC_SHARE
from epochal.telemetry import describe as describe_tracing
from epochal.telemetry import setup_tracing, shutdown_tracing
from epochal.wire.channels import Channels, server_options
from epochal.wire.handlers import add_servicer
from epochal.wire.log import LogClient
from epochal.wire.roles import REPLICA
from epochal.wire.standard import HealthServicer, add_health_and_reflection
from epochal.wire.v1 import replica_pb2

log = logging.getLogger(__name__)

REPLICA_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["Replica"]
PEER_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaPeer"]
TESTING_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaTesting"]
ADMIN_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaAdmin"]
RECONCILE_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaReconcile"]
EXIT_CANNOT_REGISTER = 78  # EX_CONFIG
EXIT_STORAGE_FORMAT = 65  # EX_DATAERR: --data-dir holds a storage format this version refuses
REGISTER_RETRY_MAX_S = 5.0


class ReplicaServer:
    def __init__(self, settings: ReplicaSettings) -> None:
        self.settings = settings
        self.health = HealthServicer()
        self.health_port = security.HealthPort()
        self.metrics = ReplicaMetrics()
        self.channels = Channels()
        self.storage: ReplicaStorage
        self.follower: MetadataFollower
        self.local: LocalReplica
        self.coordinator: Coordinator
        self.server: grpc.aio.Server | None = None
        self.registered = asyncio.Event()
        self.closing = asyncio.Event()  # stopping: the Session and Exchange streams end
        self._stopping = False
        self._registration: asyncio.Task[None] | None = None
        self._purging: asyncio.Task[None] | None = None

    async def start(self) -> None:
        settings = self.settings
        try:
            self.storage = ReplicaStorage(settings.db_url, sync=settings.sync)
        except StorageFormatError as error:
            # Nothing is open or written yet: exit with the reason, not a traceback.
            log.critical("%s", error)
            logging.shutdown()
            os._exit(EXIT_STORAGE_FORMAT)
        # The node id is known from an earlier start's registration; on the first start it is
        # not yet (registration needs the server running), so the instance id stands for it.
        instance = settings.address.replace(":", "_")
        tracing = setup_tracing(
            "replica",
            instance,
            settings.trace_dir or None,
            node_id=self.storage.identity.node_state().node_id or instance,
            datacenter=settings.datacenter,
            rack=settings.rack,
        )
        log.info("%s", describe_tracing(tracing))
        self.follower = MetadataFollower(
            settings.follower,
            self.storage.metadata,
            LogClient(self.channels),
            self.metrics.follower,
            service="replica",
        )
        self.follower.load()
        self.local = LocalReplica(settings, self.storage, self.follower, self.metrics)
        self.coordinator = Coordinator(
            settings, self.follower, self.local, self.channels, self.metrics
        )
        self.follower.on_change.append(lambda _: self._update_readiness())
        server = self.server = grpc.aio.server(options=server_options())
        chosen = security.security_of(settings)
        guard = security.guard(self.metrics.metrics, chosen)
        add_servicer(
            server,
            REPLICA_SERVICE,
            ReplicaServicer(
                settings,
                self.follower,
                self.coordinator,
                self.storage,
                self.metrics,
                closing=self.closing,
            ),
            self._refusal,
            guard,
        )
        peers = PeerClient(self.channels)
        faults = Faults()
        source = StreamSource(settings, self.follower, self.storage, self.metrics)
        self.receiver = StreamReceiver(
            settings, self.follower, self.storage, peers, self.metrics, self.coordinator
        )
        self.operations = Operations(
            settings,
            self.follower,
            self.storage,
            BarrierDriver(settings, self.follower, peers, self.metrics),
            self.receiver,
            peers,
            self.metrics,
        )
        add_servicer(
            server,
            PEER_SERVICE,
            PeerServicer(
                settings,
                self.local,
                self.follower,
                source,
                self.receiver,
                faults=faults,
                closing=self.closing,
            ),
            self._refusal_until_registered,
            guard,
        )
        add_servicer(
            server,
            ADMIN_SERVICE,
            AdminServicer(self.operations),
            self._refusal_until_registered,
            guard,
        )
        reconcile = ReconcileNode(
            settings, self.local, self.follower, self.coordinator, self.storage, self.metrics
        )
        add_servicer(
            server,
            RECONCILE_SERVICE,
            ReconcileServicer(reconcile, faults),
            self._refusal_until_registered,
            guard,
        )
        services = [
            REPLICA_SERVICE.full_name,
            PEER_SERVICE.full_name,
            ADMIN_SERVICE.full_name,
            RECONCILE_SERVICE.full_name,
        ]
        if settings.enable_test_hooks:
            add_servicer(
                server,
                TESTING_SERVICE,
                TestingServicer(self.follower, self.coordinator, self.receiver, faults),
                self._refusal,
                guard,
            )
            services.append(TESTING_SERVICE.full_name)
            log.warning("test hooks are enabled (--enable-test-hooks): never in production")
        add_health_and_reflection(server, self.health, services, guard)
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        if security.listen(server, settings.listen, chosen, role=REPLICA, name="replica") == 0:
            raise OSError(f"cannot listen on {settings.listen}")
        await server.start()
        await self.health_port.start(settings.health_listen, self.health)
        if settings.metrics_listen:
            self.metrics.metrics.serve(settings.metrics_listen)
        self.follower.start()
        self._registration = asyncio.get_running_loop().create_task(self._register())
        if settings.purge_interval_ms:
            purger = Purger(settings, self.follower, self.storage, self.metrics)
            self._purging = asyncio.get_running_loop().create_task(purger.run_forever())
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
                node_id = await register(
                    self.settings, self.storage, self.follower, self.metrics.commits
                )
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
        if not settings.auto_join:
            log.info("auto-join is off (--no-auto-join): join with `epochal bootstrap %s`", node_id)
            return
        joining = AutoJoin(
            self.follower,
            self.operations,
            tokens=settings.join_tokens,
            num_tokens=settings.num_tokens,
        )
        try:
            await joining.run()
        except Exception:  # a bug: the node keeps serving; the operator can still bootstrap
            log.exception(
                "auto-join failed unexpectedly; join with `epochal bootstrap %s`", node_id
            )

    def _refusal(self, method: str) -> str | None:
        """Why this node cannot answer ``method`` now (UNAVAILABLE), or None: the readiness
        gate of the Replica and ReplicaTesting services (the coordinator refuses writes and
        reads itself until the node is registered, rule ``not_ready``)."""
        if self._stopping:
            return f"replica {self.settings.address} is shutting down; try another replica"
        return None

    def _refusal_until_registered(self, method: str) -> str | None:
        """The readiness gate of the ReplicaPeer and ReplicaAdmin services: they act as this
        node, which has no id until it is registered."""
        refusal = self._refusal(method)
        if refusal is None and not self.registered.is_set():
            refusal = (
                f"replica {self.settings.address} is starting: registering with the CMS; "
                "try another replica"
            )
        return refusal

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
        """Graceful and bounded (see the module docstring). The start never suspends before
        storage, the follower and the coordinator exist, so a start cut short by the signal
        has them too."""
        self._stopping = True
        self.closing.set()
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        for task in (self._registration, self._purging):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.server is not None:
            await self.server.stop(self.settings.shutdown_grace_s * RPC_SHARE)
        await self.health_port.stop(None)
        self.coordinator.close()
        await self.follower.stop()
        await self.channels.close()
        self.storage.close()
        shutdown_tracing()
