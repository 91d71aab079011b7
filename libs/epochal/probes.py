"""The standard services every Epochal process serves, asked from the client's side: gRPC health
(``health_of``) and server reflection (``services_of``: which services a process serves, so the
command line can tell a replica from a CMS member or a reconciler). Both go over the caller's
``Channels``; a failed call raises the ``EpochalError`` its status stands for."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from epochal.status import from_rpc_error
from epochal.wire.channels import Channels


async def health_of(channels: Channels, address: str, timeout_s: float) -> str:
    """The health of the process at ``address`` (its server as a whole): SERVING, NOT_SERVING,
    ... or, when the check fails, the status of the failure (DEADLINE_EXCEEDED: it did not
    answer in time, UNAVAILABLE: nothing listens)."""
    stub = channels.stub(health_pb2_grpc.HealthStub, address)
    try:
        answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
    except grpc.aio.AioRpcError as error:
        return str(error.code().name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


async def services_of(channels: Channels, address: str, timeout_s: float) -> set[str]:
    """The full names of the services the process at ``address`` serves (reflection)."""
    stub = channels.stub(reflection_pb2_grpc.ServerReflectionStub, address)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    call = stub.ServerReflectionInfo(iter([request]), timeout=timeout_s)
    try:
        async for answer in call:
            return {s.name for s in answer.list_services_response.service}
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error) from None
    finally:
        call.cancel()
    return set()
