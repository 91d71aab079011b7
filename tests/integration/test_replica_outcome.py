"""What a client is told when a write gets too few answers, as real processes on 127.0.0.1
(3 CMS members + 3 replicas, RF 3), one replica SIGSTOPped.

Proves: an ALL write fails with an error whose ``replicas`` (a ``ReplicaOutcome``) names the
stopped replica as not answering — its call never settled — and the two others as having
acknowledged, and whose message says so; over the SDK's Session (``SessionFailure.replicas``)
and over a unary Write (the ``epochal-replicas-bin`` trailer) alike; an ALL read too. A
QUORUM write succeeds meanwhile. A retry of the failed write, under its mutation id and once
that id is older than the replicas' write timeout, is acknowledged by the two that hold it —
under that same id, not a fresh one — while the third is still stopped (were they to refuse
it as too old, the coordinator would wait on the stopped one to the deadline, and the retry
would time out).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import grpc
import pytest

from epochal import encoding
from epochal.client import AsyncClient, Consistency
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import EpochalError, TimedOut
from epochal.mtrack import MutationId, physical_ms_of
from epochal.results import WriteResult
from epochal.status import from_rpc_error
from epochal.wire.channels import channel as open_channel
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc
from tests.harness import run, start_ring, until

pytestmark = pytest.mark.integration

WRITE_TIMEOUT_MS = 2000  # the replicas' default --write-timeout-ms
ROW = {"id": "k", "v": "all of them"}


def test_a_write_short_of_its_level_names_who_acknowledged_and_who_did_not_answer(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path / "cluster")

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        first, second, stopped = (cluster.nodes[f"replica{n}"] for n in (1, 2, 3))
        answering = tuple(sorted((first.node_id, second.node_id)))
        async with AsyncClient([first.address, second.address], retries=0) as client:
            await client.create_keyspace("ks", replication_factor=3, tracked=True)
            await client.create_table("ks", "t", {"id": "text", "v": "text"}, partition_key=["id"])
            # First, with all three up: the coordinator's stream to each is open, so the stopped
            # one's call is sent and waits (a first connection would fail before the deadline).
            everyone = await client.write(
                "ks", "t", {"id": "up", "v": "all"}, consistency="ALL", coordinator=first.address
            )
            assert len(everyone.acknowledged) == 3, everyone
            process = stopped.process
            assert process is not None
            os.kill(process.pid, signal.SIGSTOP)
            try:
                with pytest.raises(TimedOut) as failed:
                    await client.write(
                        "ks", "t", ROW, consistency=Consistency.ALL, coordinator=first.address
                    )
                _names_the_stopped_one(failed.value, answering, stopped.node_id)
                unary = await _unary_all_write(client, first.address)
                _names_the_stopped_one(unary, answering, stopped.node_id)
                with pytest.raises(TimedOut) as unread:
                    await client.read(
                        "ks", "t", {"id": "k"}, consistency="ALL", coordinator=first.address
                    )
                read = unread.value.replicas
                assert read is not None and read.acknowledged == answering, read
                assert [node for node, _ in read.not_answering] == [stopped.node_id], read
                assert unread.value.message.startswith("ALL read of token "), unread.value

                quorum = await client.write(
                    "ks",
                    "t",
                    {"id": "q", "v": "two of them"},
                    consistency=Consistency.QUORUM,
                    coordinator=first.address,
                )
                assert set(quorum.acknowledged) == set(answering), quorum

                # The failed write's retry, its id now older than the write timeout: the two
                # that hold it acknowledge it as it is (no fresh id past their floor).
                issued_ms = physical_ms_of(
                    MutationId.unpack(bytes.fromhex(failed.value.mutation_id)).hlc
                )
                await until(
                    "the failed write's id is older than the write timeout",
                    lambda: time.time() * 1000 - issued_ms > WRITE_TIMEOUT_MS + 100,
                    timeout_s=10,
                )
                retried = await _retry(client, first.address, failed.value.mutation_id)
                assert retried.mutation_id.pack().hex() == failed.value.mutation_id
                assert set(retried.acknowledged) == set(answering)
            finally:
                os.kill(process.pid, signal.SIGCONT)

    run(cluster, scenario, timeout_s=180)


def _names_the_stopped_one(error: EpochalError, answering: tuple[str, ...], silent: str) -> None:
    replicas = error.replicas
    assert replicas is not None, error
    assert (replicas.consistency, replicas.required) == ("ALL", 3), replicas
    assert replicas.replicas == tuple(sorted((*answering, silent))), replicas
    assert replicas.acknowledged == answering, replicas
    assert replicas.refused == (), replicas
    assert [node for node, _ in replicas.not_answering] == [silent], replicas
    assert "no answer" in replicas.not_answering[0][1], replicas
    assert error.mutation_id, error
    message = error.message.split(" [ALL write to", 1)[0]  # the coordinator's (the SDK adds its)
    assert message.startswith("ALL write of token "), message
    assert f"timed out after {WRITE_TIMEOUT_MS} ms" in message, message
    assert f"acknowledged {', '.join(answering)}; not answering {silent} (" in message, message
    assert message.endswith("retry with the same mutation id"), message


def _request(client: AsyncClient, level: Consistency, mutation_id: str = "") -> pb.WriteRequest:
    schema = client.table("ks", "t")
    encoded = encoding.write_rows(schema, encoding.ColumnTypes().of(schema), [ROW], level)
    request = encoding.session_request(
        encoded, epoch=client.seen_epoch, session_hlc=0, mutation_id=mutation_id
    )
    return request.write


async def _unary_all_write(client: AsyncClient, address: str) -> EpochalError:
    """The same ALL write as a unary Write: its failure comes back as a status and trailers."""
    async with open_channel(address) as channel:
        stub = replica_pb2_grpc.ReplicaStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.Write(_request(client, Consistency.ALL), timeout=30)
    error = from_rpc_error(failed.value)
    assert isinstance(error, TimedOut), error
    return error


async def _retry(client: AsyncClient, address: str, mutation_id: str) -> WriteResult:
    """A QUORUM write of the same row under ``mutation_id``, as a unary Write."""
    async with open_channel(address) as channel:
        stub = replica_pb2_grpc.ReplicaStub(channel)
        response = await stub.Write(_request(client, Consistency.QUORUM, mutation_id), timeout=30)
    return encoding.write_result(pb.SessionReply(id=1, write=response), address, 1)
