"""The standard gRPC health and reflection services, registered like Epochal's own
(``epochal.wire.handlers.add_servicer``): bytes that do not parse are INVALID_ARGUMENT, an
unknown service is NOT_FOUND with a message, ``List`` is answered, a bug is INTERNAL — never
gRPC's UNKNOWN. Both servers register them through ``add_health_and_reflection``.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

from epochal.wire.channels import channel
from epochal.wire.handlers import add_servicer
from epochal.wire.roles import DEFAULT_GUARD, Guard
from epochal.wire.status import abort_status
from epochal.wire.tls import Security

HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"]
REFLECTION_SERVICE = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]


class HealthServicer(health.aio.HealthServicer):
    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        status = self._server_status.get(request.service)
        if status is None:
            await abort_status(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no service {request.service!r} here; ask for one of "
                f"{sorted(self._server_status)}",
            )
        return health_pb2.HealthCheckResponse(status=status)

    async def List(
        self, request: health_pb2.HealthListRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthListResponse:
        return health_pb2.HealthListResponse(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in self._server_status.items()
            }
        )


def add_health_and_reflection(
    server: grpc.aio.Server,
    health_servicer: HealthServicer,
    services: Sequence[str],
    guard: Guard = DEFAULT_GUARD,
) -> None:
    """Serve health (``health_servicer``) and reflection of ``services`` and of these two."""
    add_servicer(server, HEALTH_SERVICE, health_servicer, guard=guard)
    names = (*services, HEALTH_SERVICE.full_name, reflection.SERVICE_NAME)
    add_servicer(server, REFLECTION_SERVICE, ReflectionServicer(names), guard=guard)


class HealthProbe:
    """Asks one server's health service whether it is SERVING (for harnesses that wait for a
    process to be ready); ``close`` when done."""

    def __init__(self, address: str, security: Security | None = None) -> None:
        self._channel = channel(address, security)
        self._stub = health_pb2_grpc.HealthStub(self._channel)

    async def serving(self, timeout_s: float) -> bool:
        """Whether the server answers SERVING within ``timeout_s`` (False when it does not
        answer, or answers anything else)."""
        try:
            answer = await self._stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            return False
        return answer.status == health_pb2.HealthCheckResponse.SERVING

    async def close(self) -> None:
        await self._channel.close(grace=None)
