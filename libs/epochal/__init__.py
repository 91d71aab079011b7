"""Epochal: strongly consistent cluster metadata and mutation-tracked replication.

What users import is here, loaded on first use (a module ``__getattr__``), so that importing a
pure package such as ``epochal.tcm`` — which goes through this module — loads neither gRPC nor
asyncio::

    import epochal

    with epochal.Client(["127.0.0.1:9001"]) as client:  # threads; epochal.AsyncClient: asyncio
        client.write("shop", "carts", {"user": "ann", "item": "tea", "qty": 2})
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# gRPC's fork handlers crash or hang a child forked while a thread is inside gRPC (a client's
# event loop always is), and cannot make gRPC's asyncio stack usable in the child anyway: off,
# unless the process says otherwise. A client refuses to work in a forked child instead
# (epochal.sync_client). Read when gRPC starts, so it must be set before: here, where every
# epochal import begins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

if TYPE_CHECKING:
    from epochal.client import AsyncClient
    from epochal.errors import (
        Aborted,
        AttemptRecord,
        ClockSkew,
        CommitTimeout,
        ConnectionFailed,
        EpochalError,
        InvalidRequest,
        NotLeader,
        Overloaded,
        PermissionDenied,
        Rejected,
        ReplicaOutcome,
        ShuttingDown,
        StalePlan,
        TimedOut,
        Unavailable,
    )
    from epochal.policies import (
        DefaultRetryPolicy,
        FailedAttempt,
        NeverRetryPolicy,
        RetryDecision,
        RetryPolicy,
    )
    from epochal.profiles import ExecutionProfile
    from epochal.results import ReadResult, ReadStats, WriteResult
    from epochal.status import Operation
    from epochal.sync_client import Client
    from epochal.tcm.consistency import Consistency
    from epochal.wire.tls import TlsFiles

_WHERE = {
    "Client": "epochal.sync_client",
    "AsyncClient": "epochal.client",
    "Consistency": "epochal.tcm.consistency",
    "ExecutionProfile": "epochal.profiles",
    "Operation": "epochal.status",
    "TlsFiles": "epochal.wire.tls",
    **dict.fromkeys(
        ["DefaultRetryPolicy", "FailedAttempt", "NeverRetryPolicy", "RetryDecision", "RetryPolicy"],
        "epochal.policies",
    ),
    **dict.fromkeys(["ReadResult", "ReadStats", "WriteResult"], "epochal.results"),
    **dict.fromkeys(
        [
            "Aborted",
            "AttemptRecord",
            "ClockSkew",
            "CommitTimeout",
            "EpochalError",
            "InvalidRequest",
            "NotLeader",
            "Overloaded",
            "PermissionDenied",
            "Rejected",
            "ReplicaOutcome",
            "ShuttingDown",
            "StalePlan",
            "TimedOut",
            "Unavailable",
            "ConnectionFailed",
        ],
        "epochal.errors",
    ),
}

__all__ = [
    "Aborted",
    "AsyncClient",
    "AttemptRecord",
    "Client",
    "ClockSkew",
    "CommitTimeout",
    "ConnectionFailed",
    "Consistency",
    "DefaultRetryPolicy",
    "EpochalError",
    "ExecutionProfile",
    "FailedAttempt",
    "InvalidRequest",
    "NeverRetryPolicy",
    "NotLeader",
    "Operation",
    "Overloaded",
    "PermissionDenied",
    "ReadResult",
    "ReadStats",
    "Rejected",
    "ReplicaOutcome",
    "RetryDecision",
    "RetryPolicy",
    "ShuttingDown",
    "StalePlan",
    "TimedOut",
    "TlsFiles",
    "Unavailable",
    "WriteResult",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'epochal' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
