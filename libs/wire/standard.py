"""The standard gRPC health and reflection services, registered like Epochal's own
(``epochal.wire.handlers.add_servicer``): bytes that do not parse are INVALID_ARGUMENT, an
unknown service is NOT_FOUND with a message, ``List`` is answered, a bug is INTERNAL — never
gRPC's UNKNOWN. Both servers register them through ``add_health_and_reflection``.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

from epochal.wire.handlers import add_servicer

HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"]
REFLECTION_SERVICE = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]


class HealthServicer(health.aio.HealthServicer):
    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        status = self._server_status.get(request.service)
        if status is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no service {request.service[:100]!r} here; ask for one of "
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
    server: grpc.aio.Server, health_servicer: HealthServicer, services: Sequence[str]
) -> None:
    """Serve health (``health_servicer``) and reflection of ``services`` and of these two."""
    add_servicer(server, HEALTH_SERVICE, health_servicer)
    names = (*services, HEALTH_SERVICE.full_name, reflection.SERVICE_NAME)
    add_servicer(server, REFLECTION_SERVICE, ReflectionServicer(names))
