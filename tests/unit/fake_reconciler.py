"""A stand-in for a reconciler's ``epochal.v1.Reconciler/Status``, for the tests of the SDK's
reconcile client and of ``epochal reconcile status``: ``async with reconciler(answer)`` serves
the given answer on 127.0.0.1 (the generated servicer base, a grpc.aio server) and gives its
address. The real service is exercised end to end by ``make run``'s test (tests/e2e)."""

from __future__ import annotations

import contextlib

import grpc

from epochal.wire.v1 import metadata_pb2 as mpb
from epochal.wire.v1 import reconciler_pb2 as pb
from epochal.wire.v1 import reconciler_pb2_grpc

from .local_server import serving


class FakeReconciler(reconciler_pb2_grpc.ReconcilerServicer):
    def __init__(self, answer: pb.ReconcilerStatus) -> None:
        self.answer = answer

    async def Status(
        self, request: pb.ReconcilerStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReconcilerStatus:
        return self.answer


def reconciler(answer: pb.ReconcilerStatus) -> contextlib.AbstractAsyncContextManager[str]:
    return serving(FakeReconciler(answer), reconciler_pb2_grpc.add_ReconcilerServicer_to_server)


def report(
    keyspace: str,
    left: int,
    right: int,
    owner: str = "",
    lease_token: int = 0,
    *,
    low_bound: int = 0,
    lag_ms: int = -1,
    last_outcome: str = "",
    rounds: int = 0,
    delivered: int = 0,
) -> pb.RangeReport:
    """One range as the wire carries it (lag -1: no advance yet)."""
    return pb.RangeReport(
        keyspace=keyspace,
        range=mpb.TokenRange(left=left, right=right),
        owner=owner,
        lease_token=lease_token,
        low_bound=low_bound,
        lag_ms=lag_ms,
        last_outcome=last_outcome,
        last_round_unix_ms=1_700_000_000_000 if rounds else 0,
        rounds=rounds,
        delivered=delivered,
    )
