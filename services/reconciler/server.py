"""Run one reconciler: its database, the metadata follower, the CMS client for lease grants and
its registration, the worker, and a gRPC server with health, reflection and the ``Reconciler``
status service.

Start: storage (migrations), its id, the metadata stored here, the gRPC server (NOT_SERVING), the
follower; once it has caught up to the epoch the CMS had when it first reached it, it registers
its ``--advertise`` address in the metadata log (``registration``: waited for at most a few
seconds, then continued in the background), then SERVING, and the worker starts. Stop (SIGTERM,
Ctrl-C), within ``--shutdown-grace-s``: NOT_SERVING, the worker stops (a round in flight is
cancelled: what it did is idempotent or durable at the replicas), the held leases are released
(granted to nobody) so that another reconciler takes them at once, it deregisters (best effort:
a reconciler stopped on purpose no longer appears in the metadata), then the server, the follower
and storage close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import grpc
from grpc_health.v1 import health_pb2

from epochal.cms_client import CMSClient
from epochal.mtrack import physical_ms_of
from epochal.reconciler.leases import Leases
from epochal.reconciler.metrics import ReconcilerMetrics
from epochal.reconciler.registration import WAIT_S, Registration
from epochal.reconciler.replica_client import ReplicaClient
from epochal.reconciler.settings import ReconcilerSettings
from epochal.reconciler.storage import ReconcilerStorage
from epochal.reconciler.worker import Worker, targets
from epochal.runtime import security
from epochal.runtime.follower import MetadataFollower
from epochal.runtime.service import RPC_SHARE
from epochal.telemetry import describe as describe_tracing
from epochal.telemetry import setup_tracing, shutdown_tracing
from epochal.wire.channels import Channels, server_options
from epochal.wire.handlers import add_servicer
from epochal.wire.log import LogClient
from epochal.wire.reconcile import range_to_proto
from epochal.wire.roles import RECONCILER
from epochal.wire.standard import HealthServicer, add_health_and_reflection
from epochal.wire.v1 import reconciler_pb2 as pb

log = logging.getLogger(__name__)

RECONCILER_SERVICE = pb.DESCRIPTOR.services_by_name["Reconciler"]
# Of the grace period: the commits of a stop end by COMMITS_SHARE — releasing the leases held,
# for up to RELEASE_SHARE, then deregistering in what is left.
RELEASE_SHARE = 0.4
COMMITS_SHARE = 0.5


class ReconcilerServer:
    def __init__(self, settings: ReconcilerSettings) -> None:
        self.settings = settings
        self.health = HealthServicer()
        self.health_port = security.HealthPort()
        self.metrics = ReconcilerMetrics()
        self.channels = Channels()
        self.server: grpc.aio.Server | None = None
        self._work: asyncio.Task[None] | None = None
        self._started: asyncio.Task[None] | None = None
        self._registering: asyncio.Task[None] | None = None

    async def start(self) -> None:
        settings = self.settings
        self.storage = ReconcilerStorage(settings.db_url)
        self.id = self.storage.reconciler_id(settings.id)
        tracing = setup_tracing(
            "reconciler",
            settings.listen.replace(":", "_"),
            settings.trace_dir or None,
            node_id=self.id,  # its id in lease grants
        )
        log.info("%s", describe_tracing(tracing))
        self.follower = MetadataFollower(
            settings.follower,
            self.storage,
            LogClient(self.channels),
            self.metrics.follower,
            service="reconciler",
        )
        self.follower.load()
        self.cms = CMSClient(list(settings.cms), observer=self.metrics.commits)
        self.client = ReplicaClient(
            self.channels,
            timeout_s=settings.rpc_timeout_ms / 1000,
            state_timeout_s=settings.state_timeout_s,
        )
        self.leases = Leases(
            self.id,
            self.follower,
            self.cms,
            self.client,
            self.metrics,
            lease_ms=settings.lease_ms,
            margin_ms=settings.lease_margin_ms,
            max_ranges=settings.max_ranges,
        )
        self.worker = Worker(
            settings, self.storage, self.follower, self.leases, self.client, self.metrics
        )
        self.registration = Registration(
            self.id, settings.address, self.follower, self.cms, self.metrics
        )
        server = self.server = grpc.aio.server(options=server_options())
        chosen = security.security_of(settings)
        guard = security.guard(self.metrics.metrics, chosen)
        add_servicer(server, RECONCILER_SERVICE, StatusServicer(self), guard=guard)
        add_health_and_reflection(server, self.health, [RECONCILER_SERVICE.full_name], guard)
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        name = "reconciler"
        if security.listen(server, settings.listen, chosen, role=RECONCILER, name=name) == 0:
            raise OSError(f"cannot listen on {settings.listen}")
        await server.start()
        await self.health_port.start(settings.health_listen, self.health)
        if settings.metrics_listen:
            self.metrics.metrics.serve(settings.metrics_listen)
        self.follower.start()
        self._started = asyncio.get_running_loop().create_task(self._serve_when_caught_up())
        log.info(
            "reconciler %s listening on %s (advertised as %s), state in %s",
            self.id,
            settings.listen,
            settings.address,
            settings.data_path,
        )

    async def _serve_when_caught_up(self) -> None:
        while not self.follower.caught_up:
            await asyncio.sleep(0.05)
        registering = self._registering = asyncio.get_running_loop().create_task(
            self.registration.register()
        )
        registering.add_done_callback(_log_failure)
        done, _ = await asyncio.wait({registering}, timeout=WAIT_S)
        if not done:
            log.warning(
                "not registered within %.1f s: serving, and registering in the background", WAIT_S
            )
        await self._set_status(health_pb2.HealthCheckResponse.SERVING)
        log.info("caught up at epoch %d; reconciling", self.follower.epoch)
        self._work = asyncio.get_running_loop().create_task(self.worker.run_forever())

    async def _set_status(self, status: int) -> None:
        await self.health.set("", status)
        await self.health.set(RECONCILER_SERVICE.full_name, status)

    async def stop(self) -> None:
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        for task in (self._started, self._work):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._registering is not None:
            self._registering.cancel()  # a failure was logged when it ended
            await asyncio.gather(self._registering, return_exceptions=True)
        grace_s = self.settings.shutdown_grace_s
        loop = asyncio.get_running_loop()
        commits_end = loop.time() + grace_s * COMMITS_SHARE
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.leases.release_all(), grace_s * RELEASE_SHARE)
        try:
            await asyncio.wait_for(
                self.registration.deregister(), max(commits_end - loop.time(), 0.0)
            )
        except TimeoutError:
            log.warning("deregistering %s ran out of time: it stays registered", self.id)
        if self.server is not None:
            await self.server.stop(grace_s * (RPC_SHARE - COMMITS_SHARE))
        await self.health_port.stop(None)
        await self.follower.stop()
        await self.cms.close()
        await self.channels.close()
        self.storage.close()
        shutdown_tracing()


def _log_failure(task: asyncio.Task[None]) -> None:
    """A registration ends registered or cancelled; anything else is a bug, logged."""
    if not task.cancelled() and task.exception() is not None:
        log.error("registration failed unexpectedly", exc_info=task.exception())


class StatusServicer:
    def __init__(self, server: ReconcilerServer) -> None:
        self.server = server

    async def Status(
        self, request: pb.ReconcilerStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReconcilerStatus:
        server = self.server
        metadata = server.follower.metadata
        wall_ms = time.time_ns() // 1_000_000
        reports = []
        for target in targets(metadata):
            key = (target.keyspace, target.range)
            grant = metadata.lease_of(target.keyspace, target.range)
            report = pb.RangeReport(
                keyspace=target.keyspace,
                range=range_to_proto(target.range),
                owner=grant.holder if grant is not None else "",
                lease_token=grant.epoch if grant is not None else 0,
                lag_ms=-1,
            )
            record = server.worker.records.get(key)
            if record is not None and key in server.leases.held:
                report.low_bound = record.low_bound
                if record.low_bound:
                    report.lag_ms = wall_ms - physical_ms_of(record.low_bound)
                report.last_outcome = record.last_outcome
                report.last_round_unix_ms = record.last_round_unix_ms
                report.rounds = record.rounds
                report.delivered = record.delivered
            last = server.worker.last.get(key)
            if last is not None and key in server.leases.held:
                report.unreachable.extend(last.unreachable)
                report.cohorts.extend(
                    pb.CohortReport(
                        id=f"{c.id:x}",
                        members=c.members,
                        low=c.low,
                        high=c.high,
                        mutations=c.mutations,
                        bytes=c.bytes,
                        formed_unix_ms=c.formed_unix_ms,
                        holders=last.cohort_holders.get(c.id, ()),
                    )
                    for c in last.cohorts
                )
            reports.append(report)
        return pb.ReconcilerStatus(reconciler_id=server.id, epoch=metadata.epoch, ranges=reports)
