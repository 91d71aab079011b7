"""Run one CMS member: storage, the member loop, gRPC services, health, reflection, signals."""

from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from epochal.cms.member import CMSMemberLoop
from epochal.cms.servicer import CMSMemberServicer, CMSServicer
from epochal.cms.settings import CMSSettings
from epochal.cms.storage import CMSStorage
from epochal.telemetry import setup_tracing, shutdown_tracing
from epochal.wire.channels import server_options
from epochal.wire.handlers import add_servicer
from epochal.wire.v1 import cms_pb2

log = logging.getLogger(__name__)

CMS_SERVICE = cms_pb2.DESCRIPTOR.services_by_name["CMS"]
MEMBER_SERVICE = cms_pb2.DESCRIPTOR.services_by_name["CMSPeer"]


class CMSServer:
    def __init__(self, settings: CMSSettings) -> None:
        self.settings = settings
        self.member: CMSMemberLoop
        self.server: grpc.aio.Server
        self.health = health.aio.HealthServicer()
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        settings = self.settings
        trace_file = setup_tracing("cms", settings.member_id, settings.trace_dir or None)
        if trace_file is not None:
            log.info("writing spans to %s", trace_file)
        storage = await asyncio.to_thread(CMSStorage, settings.db_url, schema=settings.schema)
        self.member = CMSMemberLoop(settings, storage)
        self.member.on_readiness = self._set_serving
        # Leave headroom above the transformation limit so an oversized one reaches the
        # servicer and gets INVALID_ARGUMENT with a message, not a bare RESOURCE_EXHAUSTED.
        self.server = grpc.aio.server(
            options=server_options(max_receive_bytes=4 * settings.max_transformation_bytes)
        )
        add_servicer(self.server, CMS_SERVICE, CMSServicer(self.member))
        add_servicer(self.server, MEMBER_SERVICE, CMSMemberServicer(self.member))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (
                CMS_SERVICE.full_name,
                MEMBER_SERVICE.full_name,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            self.server,
        )
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        bound = self.server.add_insecure_port(settings.listen_address)
        if bound == 0:
            raise OSError(f"cannot listen on {settings.listen_address}")
        await self.server.start()
        await self.member.start()
        log.info(
            "CMS member %s listening on %s, database %s",
            settings.member_id,
            settings.listen_address,
            _redact(settings.db_url),
        )

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
        """Graceful: NOT_SERVING, finish in-flight RPCs within the grace period, flush storage."""
        self._stopping.set()
        await self._set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.stop(self.settings.shutdown_grace_s)
        await self.member.stop()
        shutdown_tracing()


def _redact(url: str) -> str:
    """Hide a password in a database URL before logging it."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest or ":" not in rest.split("@", 1)[0]:
        return url
    user = rest.split("@", 1)[0].split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{rest.split('@', 1)[1]}"
