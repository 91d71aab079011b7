"""Run one CMS member: storage, the member loop, gRPC services, health, reflection, signals.

Start-up order: the gRPC server first (NOT_SERVING; every CMS and CMSPeer call is answered
UNAVAILABLE "cmsN is starting: loading its state" — never a method running against state that
is not there yet), then the member loads its state (from then on peers may Describe it and fetch
its log), catches up with the others (then it takes commits), and reports SERVING once it has
reached the epoch the others had (DESIGN.md "Readiness").

Stop (SIGTERM or Ctrl-C), within ``--shutdown-grace-s``: NOT_SERVING and new calls refused;
the commits in flight here settle (for a share of the grace period; new ones are refused, and
the clients retry them on another member with the same entry id); then the Paxos, forward and
watch streams end with UNAVAILABLE, the calls still running finish, and the applied state is
written.
"""

from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health_pb2

from epochal.cms.member import CMSMemberLoop
from epochal.cms.metrics import CMSMetrics
from epochal.cms.servicer import CMSMemberServicer, CMSServicer
from epochal.cms.settings import CMSSettings
from epochal.cms.storage import CMSStorage
from epochal.runtime import security
from epochal.runtime.cms_health import CMSHealth
from epochal.runtime.service import DRAIN_SHARE, RPC_SHARE
from epochal.telemetry import describe as describe_tracing
from epochal.telemetry import setup_tracing, shutdown_tracing
from epochal.wire.channels import server_options
from epochal.wire.handlers import add_servicer
from epochal.wire.roles import CMS
from epochal.wire.standard import HealthServicer, add_health_and_reflection
from epochal.wire.v1 import cms_pb2

log = logging.getLogger(__name__)

CMS_SERVICE = cms_pb2.DESCRIPTOR.services_by_name["CMS"]
MEMBER_SERVICE = cms_pb2.DESCRIPTOR.services_by_name["CMSPeer"]


class CMSServer:
    def __init__(self, settings: CMSSettings) -> None:
        self.settings = settings
        self.member: CMSMemberLoop | None = None
        self.server: grpc.aio.Server | None = None
        self.health = HealthServicer()
        self.metrics = CMSMetrics()
        self.peer_health: CMSHealth | None = None
        self.health_port = security.HealthPort()
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        settings = self.settings
        # A member's id is its node id in the cluster; members have no datacenter or rack.
        tracing = setup_tracing(
            "cms", settings.member_id, settings.trace_dir or None, node_id=settings.member_id
        )
        log.info("%s", describe_tracing(tracing))
        storage = await asyncio.to_thread(CMSStorage, settings.db_url, schema=settings.schema)
        member = self.member = CMSMemberLoop(settings, storage)
        member.on_readiness = self._set_serving
        peer_health = self.peer_health = CMSHealth(
            lambda: {v: a for v, a in member.voters().items() if v != settings.member_id}
        )
        self.metrics.read_from(
            epoch=member.applied_epoch,
            members=lambda: len(member.voters()),
            unreachable=lambda: peer_health.unreachable,
            is_leader=lambda: int(member.leads()),
        )
        if settings.metrics_listen:
            self.metrics.metrics.serve(settings.metrics_listen)
            log.info("metrics on http://%s/metrics", settings.metrics_listen)
        # Leave headroom above the transformation limit so an oversized one reaches the
        # servicer and gets INVALID_ARGUMENT with a message, not a bare RESOURCE_EXHAUSTED.
        server = self.server = grpc.aio.server(
            options=server_options(max_receive_bytes=4 * settings.max_transformation_bytes)
        )
        chosen = security.security_of(settings)
        guard = security.guard(self.metrics.metrics, chosen)
        servicer = CMSServicer(member, self.metrics)
        add_servicer(server, CMS_SERVICE, servicer, self._refusal, guard)
        add_servicer(server, MEMBER_SERVICE, CMSMemberServicer(member), self._refusal, guard)
        add_health_and_reflection(
            server, self.health, (CMS_SERVICE.full_name, MEMBER_SERVICE.full_name), guard
        )
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        bound = security.listen(
            server,
            settings.listen_address,
            chosen,
            role=CMS,
            name=f"CMS member {settings.member_id}",
        )
        if bound == 0:
            raise OSError(f"cannot listen on {settings.listen_address}")
        await server.start()
        await self.health_port.start(settings.health_listen, self.health)
        if settings.test_hold_start_ms:
            log.warning("holding the start for %d ms (a test hook)", settings.test_hold_start_ms)
            await asyncio.sleep(settings.test_hold_start_ms / 1000)
        await member.start()
        peer_health.start()
        log.info(
            "CMS member %s listening on %s, database %s",
            settings.member_id,
            settings.listen_address,
            _redact(settings.db_url),
        )

    def _refusal(self, method: str) -> str | None:
        """Why this member cannot answer ``method`` now (UNAVAILABLE), or None: the one
        readiness gate of the CMS and CMSPeer services."""
        member_id = self.settings.member_id
        member = self.member
        if self._stopping.is_set():
            return f"{member_id} is shutting down; try another member"
        if member is None or not member.loaded:
            return f"{member_id} is starting: loading its state; try another member"
        if method == "Commit" and not member.started:
            return f"{member_id} is starting: catching up with the others; try another member"
        return None

    def _set_serving(self, ready: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if ready and not self._stopping.is_set()
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        asyncio.get_running_loop().create_task(self._set_status(status))

    async def _set_status(self, status: int) -> None:
        await self.health.set("", status)
        await self.health.set(CMS_SERVICE.full_name, status)

    async def stop(self) -> None:
        """Graceful and bounded (see the module docstring)."""
        loop = asyncio.get_running_loop()
        grace_s = self.settings.shutdown_grace_s
        began = loop.time()
        self._stopping.set()
        if self.peer_health is not None:
            await self.peer_health.stop()
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        stopping = (
            loop.create_task(self.server.stop(grace_s * RPC_SHARE))
            if self.server is not None
            else None
        )
        if self.member is not None:
            await self.member.drain(max(began + grace_s * DRAIN_SHARE - loop.time(), 0))
            log.debug("stop: commits drained after %.3f s", loop.time() - began)
            self.member.end_streams()
        if stopping is not None:
            await stopping
            log.debug("stop: gRPC server stopped after %.3f s", loop.time() - began)
        await self.health_port.stop(None)
        if self.member is not None:
            await self.member.stop()
            log.debug("stop: member stopped after %.3f s", loop.time() - began)
        shutdown_tracing()


def _redact(url: str) -> str:
    """Hide a password in a database URL before logging it."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest or ":" not in rest.split("@", 1)[0]:
        return url
    user = rest.split("@", 1)[0].split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{rest.split('@', 1)[1]}"
