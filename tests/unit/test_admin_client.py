"""The replica's admin calls as domain values: each request travels as the message its
ReplicaAdmin method takes, every answer decodes to the value the replica encoded, and
``AdminClient`` against a real grpc.aio server on 127.0.0.1 calls the method its request names
and raises the error family for a refusal or an unreachable replica. ``epochal.admin`` itself
is pure."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from epochal.admin import (
    Bootstrap,
    BootstrapAbort,
    BootstrapResume,
    Cancel,
    Cleanup,
    CleanupResult,
    Decommission,
    DecommissionAbort,
    Move,
    OperationStatus,
    Remove,
    Replace,
    ReplicaDescription,
    Resume,
    Status,
    TestHooks,
)
from epochal.admin_client import AdminClient
from epochal.admin_encoding import (
    ADMIN_METHODS,
    cleanup_call,
    describe_call,
    operation_call,
    request_to_proto,
    set_hooks_call,
)
from epochal.errors import EpochalError, Rejected, Unavailable
from epochal.replica.codec import operation_status_to_proto
from epochal.runtime.processes import free_ports
from epochal.status import code_of
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc

from .local_server import serving

STATUS = OperationStatus(
    node_id="node-4",
    epoch=30,
    kind="join",
    step="start",
    state="streaming",
    message="streaming 3 of 8 ranges",
    prepared_epoch=21,
    streamed_bytes=1 << 40,
    streamed_cells=100,
    streamed_mutations=50,
    ranges_done=3,
    ranges_total=8,
    eta_s=-1.0,
    barrier_level="EACH_QUORUM",
    reconciled_mutations=2,
)
DESCRIPTION = ReplicaDescription(
    node_id="node-2",
    address="127.0.0.1:9002",
    datacenter="dc1",
    rack="r2",
    epoch=17,
    ready=True,
    state="joined",
    hlc=1 << 60,
    metrics={"epochal_stream_received_cells_total": 12.0},
    cms_addresses=("127.0.0.1:7001", "127.0.0.1:7002"),
)


# --------------------------------------------------------------------------- the encoding


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (Status(), pb.OperationRequest()),
        (Bootstrap(), pb.BootstrapRequest()),
        (Bootstrap(num_tokens=8), pb.BootstrapRequest(num_tokens=8)),
        (Bootstrap(tokens=(-5, 7)), pb.BootstrapRequest(tokens=[-5, 7])),
        (BootstrapResume(), pb.OperationRequest()),
        (BootstrapAbort(), pb.OperationRequest()),
        (Decommission(), pb.OperationRequest()),
        (DecommissionAbort(), pb.OperationRequest()),
        (Remove(node_id="node-3"), pb.OperationRequest(node_id="node-3")),
        (Replace(replaced="node-3"), pb.ReplaceRequest(replaced="node-3")),
        (Move(tokens=(1, -2)), pb.MoveRequest(tokens=[1, -2])),
        (Resume(), pb.OperationRequest()),
        (Resume(node_id="node-3"), pb.OperationRequest(node_id="node-3")),
        (Cancel(node_id="node-3"), pb.OperationRequest(node_id="node-3")),
        (Cleanup(), pb.OperationRequest()),
        (Cleanup(epoch=9), pb.OperationRequest(epoch=9)),
    ],
)
def test_each_request_travels_as_the_message_of_its_method(request_: Any, message: Any) -> None:
    assert request_to_proto(request_) == message
    method = ADMIN_METHODS[type(request_)][0]
    path = (cleanup_call if isinstance(request_, Cleanup) else operation_call)(request_).path
    assert path == f"/epochal.v1.ReplicaAdmin/{method}"


def test_every_admin_method_has_a_request_of_its_input_type() -> None:
    service = pb.DESCRIPTOR.services_by_name["ReplicaAdmin"]
    assert {method for method, _ in ADMIN_METHODS.values()} == set(service.methods_by_name)
    for method, message_class in ADMIN_METHODS.values():
        assert service.methods_by_name[method].input_type is message_class.DESCRIPTOR, method


def test_a_negative_token_count_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match="num_tokens"):
        Bootstrap(num_tokens=-1)


def test_every_answer_decodes_to_what_the_replica_encoded() -> None:
    encoded = operation_status_to_proto(STATUS).SerializeToString()
    assert operation_call(Status()).decode(encoded) == STATUS
    cleaned = pb.CleanupResponse(epoch=12, removed=1 << 40).SerializeToString()
    assert cleanup_call(Cleanup()).decode(cleaned) == CleanupResult(epoch=12, removed=1 << 40)
    described = pb.ReplicaDescribeResponse(
        **{f.name: getattr(DESCRIPTION, f.name) for f in dataclasses.fields(DESCRIPTION)}
    )
    assert describe_call().decode(described.SerializeToString()) == DESCRIPTION
    hooks = TestHooks(hold_metadata_pushes=True, stream_delay_ms=600_000)
    call = set_hooks_call(hooks)
    assert pb.TestHooks.FromString(call.request) == pb.TestHooks(
        hold_metadata_pushes=True, stream_delay_ms=600_000
    )
    assert call.decode(call.request) == hooks


def test_the_admin_values_import_no_grpc_or_protobuf() -> None:
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import epochal.admin\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(run.stdout)
    assert "epochal.admin" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("grpc", "google", "asyncio")] == []


# --------------------------------------------------------------------------- the client


class FakeReplica:
    """ReplicaAdmin, Replica.Describe and ReplicaTesting.SetHooks: each call recorded as
    (method, request), answered by ``answer`` (which may abort)."""

    def __init__(self, answer: Callable[[str, Any, grpc.aio.ServicerContext], Awaitable[Any]]):
        self.calls: list[tuple[str, Any]] = []
        self.answer = answer

    def __getattr__(self, method: str) -> Callable[[Any, grpc.aio.ServicerContext], Any]:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            self.calls.append((method, request))
            return await self.answer(method, request, context)

        return handle


async def answer(method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
    match method:
        case "Describe":
            return pb.ReplicaDescribeResponse(node_id="node-2", epoch=17, metrics={"x": 1.0})
        case "SetHooks":
            return request
        case "Cleanup":
            return pb.CleanupResponse(epoch=12, removed=3)
        case "Replace":
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "node-3 is alive: decommission it instead"
            )
    return operation_status_to_proto(dataclasses.replace(STATUS, kind=method))


def serving_replica(replica: FakeReplica) -> contextlib.AbstractAsyncContextManager[str]:
    return serving(
        replica,
        replica_pb2_grpc.add_ReplicaAdminServicer_to_server,
        replica_pb2_grpc.add_ReplicaServicer_to_server,
        replica_pb2_grpc.add_ReplicaTestingServicer_to_server,
    )


def test_the_client_calls_the_method_its_request_names_and_answers_domain_values() -> None:
    async def scenario() -> None:
        replica = FakeReplica(answer)
        async with serving_replica(replica) as address, AdminClient(address) as admin:
            status = await admin.run(Bootstrap(tokens=(-5, 7)))
            assert status == dataclasses.replace(STATUS, kind="Bootstrap")
            assert (await admin.run(Cancel(node_id="node-3"))).kind == "Cancel"
            assert (await admin.status()).kind == "Status"
            assert await admin.cleanup() == CleanupResult(epoch=12, removed=3)
            described = await admin.describe()
            assert (described.node_id, described.epoch) == ("node-2", 17)
            assert described.metrics == {"x": 1.0}
            hooks = TestHooks(skip_plan_recheck=True)
            assert await admin.set_hooks(hooks) == hooks
        assert [method for method, _ in replica.calls] == [
            "Bootstrap",
            "Cancel",
            "Status",
            "Cleanup",
            "Describe",
            "SetHooks",
        ]
        assert replica.calls[0][1] == pb.BootstrapRequest(tokens=[-5, 7])
        assert replica.calls[1][1] == pb.OperationRequest(node_id="node-3")

    asyncio.run(scenario())


def test_a_refusal_and_an_unreachable_replica_raise_the_error_family() -> None:
    async def scenario() -> None:
        async with serving_replica(FakeReplica(answer)) as address, AdminClient(address) as admin:
            with pytest.raises(Rejected) as refused:
                await admin.run(Replace(replaced="node-3"))
        assert code_of(refused.value) is grpc.StatusCode.FAILED_PRECONDITION
        assert refused.value.message == "node-3 is alive: decommission it instead"
        async with AdminClient(f"127.0.0.1:{free_ports(1)[0]}") as nobody:
            with pytest.raises(EpochalError) as unreachable:
                await nobody.status(timeout_s=2.0)
        assert isinstance(unreachable.value, Unavailable)
        assert code_of(unreachable.value) is grpc.StatusCode.UNAVAILABLE

    asyncio.run(scenario())
