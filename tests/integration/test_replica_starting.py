"""A replica that cannot register yet (no CMS answers) says so on every method: ReplicaPeer and
ReplicaAdmin answer UNAVAILABLE "starting: registering with the CMS", writes and reads
UNAVAILABLE (rule not_ready), and Describe, FetchLog and AppliedEpochs are served; no method
answers UNKNOWN or INTERNAL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc
import pytest

from epochal.runtime.processes import LocalProcess, free_ports
from epochal.wire.v1 import replica_pb2
from tests.harness import call_each_method, first_answer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_an_unregistered_replica_answers_unavailable_with_the_reason(tmp_path: Path) -> None:
    port, nobody = free_ports(2)
    address = f"127.0.0.1:{port}"
    replica = LocalProcess("replica", address, tmp_path / "replica.log")
    replica.start(
        [
            sys.executable,
            "-m",
            "epochal.replica",
            "--listen",
            address,
            "--cms",
            f"127.0.0.1:{nobody}",  # nothing listens there: it cannot register
            "--data-dir",
            str(tmp_path / "data"),
        ]
    )
    try:
        asyncio.run(unregistered(address))
    finally:
        replica.stop()
    assert "Traceback" not in replica.log_path.read_text()


async def unregistered(address: str) -> None:
    assert await first_answer(address, "/epochal.v1.Replica/Describe") is None
    reason = f"replica {address} is starting: registering with the CMS; try another replica"
    for name in ("ReplicaPeer", "ReplicaAdmin"):
        service = replica_pb2.DESCRIPTOR.services_by_name[name]
        for method, error in (await call_each_method(address, service)).items():
            assert error is not None, f"{name}.{method} answered before registration"
            assert (error.code(), error.details()) == (grpc.StatusCode.UNAVAILABLE, reason), (
                method,
                error,
            )
    service = replica_pb2.DESCRIPTOR.services_by_name["Replica"]
    outcomes = await call_each_method(address, service)
    for method in ("Describe", "FetchLog", "AppliedEpochs", "Session"):
        assert outcomes[method] is None, (method, outcomes[method])
    for method in ("Write", "Read"):
        error = outcomes[method]
        assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE, (method, error)
        assert dict(error.trailing_metadata() or ()).get("epochal-rule") == "not_ready", error
