"""Register servicers so that a request that does not parse is answered INVALID_ARGUMENT.

grpcio's generated ``add_*Servicer_to_server`` let a deserialisation failure surface as an
INTERNAL error with no useful message. Here each request deserialiser returns a ``BadRequest``
instead of raising, and ``require_parsed`` turns it into INVALID_ARGUMENT naming the message type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError


@dataclass(frozen=True, slots=True)
class BadRequest:
    type_name: str
    error: str


def _lenient(message_class: Any) -> Any:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except (DecodeError, ValueError) as error:
            return BadRequest(message_class.DESCRIPTOR.full_name, str(error) or "undecodable bytes")

    return parse


def add_servicer(server: grpc.aio.Server, service: ServiceDescriptor, servicer: object) -> None:
    handlers = {}
    for method in service.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        function = getattr(servicer, method.name)
        if method.client_streaming and method.server_streaming:
            make = grpc.stream_stream_rpc_method_handler
        elif method.client_streaming:
            make = grpc.stream_unary_rpc_method_handler
        elif method.server_streaming:
            make = grpc.unary_stream_rpc_method_handler
        else:
            make = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            function,
            request_deserializer=_lenient(request_class),
            response_serializer=response_class.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )


async def require_parsed(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, BadRequest):
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"request is not a valid {request.type_name}: {request.error}",
        )
