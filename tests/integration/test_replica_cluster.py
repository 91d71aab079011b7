"""Replicas as real processes on 127.0.0.1 (3 CMS members + 3 replicas, RF 3), driven through the
SDK.

Proves: QUORUM writes are read back at QUORUM; a replica stopped during writes catches up on the
epochs it missed after a restart, and a tracked QUORUM read that has to include it repairs the
mutations it missed whole (every cell of each, not only the cells read); a coordinator whose
pushes are held back learns a newer epoch from the replicas' replies and never answers success
on a plan that epoch made stale — while the same write with the re-check switched off does (the
test bites); a tracked QUORUM read of agreeing replicas reads row data on exactly one replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from epochal.client import AsyncClient, Consistency
from epochal.cms_client import CMSClient
from epochal.devcluster.cluster import LocalCluster
from epochal.errors import Unavailable
from epochal.mtrack import MutationId, make_hlc
from epochal.replica.ids import wall_ms
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    PrepareJoin,
    Register,
    ReplicationParams,
    Step,
)
from epochal.tcm.keys import partition_columns, partition_token
from epochal.telemetry import attributes as attr
from epochal.wire.channels import channel as open_channel
from epochal.wire.v1 import replica_pb2 as pb
from epochal.wire.v1 import replica_pb2_grpc
from tests.harness import run, start_ring, until
from tests.harness.otlp import folder_spans

pytestmark = pytest.mark.integration

EVENTS = {"id": "text", "seq": "int", "a": "text", "b": "bigint"}


@contextlib.asynccontextmanager
async def events_table(cluster: LocalCluster) -> AsyncIterator[AsyncClient]:
    """Start the cluster, form its ring, and create the tracked table ``tks.events``."""
    await start_ring(cluster, num_tokens=4)
    async with AsyncClient(cluster.addresses) as client:
        await client.create_keyspace("tks", replication_factor=3, tracked=True)
        await client.create_table(
            "tks", "events", EVENTS, partition_key=["id"], clustering_key=["seq"]
        )
        yield client


# --------------------------------------------------------------------------- writes and repair


def test_quorum_writes_read_back_and_a_stopped_replica_is_repaired_mutation_by_mutation(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path / "cluster")

    async def scenario() -> None:
        async with events_table(cluster) as client:
            written: dict[MutationId, list[dict[str, object]]] = {}
            stop = asyncio.Event()
            numbers = itertools.count()

            async def writer() -> None:
                while not stop.is_set():
                    n = next(numbers)
                    rows = [
                        {"id": f"p{n % 6}", "seq": 10 * n + j, "a": f"{n}/{j}", "b": n * j}
                        for j in range(3)
                    ]
                    written[(await client.write_rows("tks", "events", rows)).mutation_id] = rows

            writers = [asyncio.create_task(writer()) for _ in range(4)]
            await until("60 writes", lambda: len(written) >= 60)
            cluster.kill_replica("replica3")
            before_kill = set(written)
            await until("90 writes without replica3", lambda: len(written) >= len(before_kill) + 90)
            # Epochs it misses: a new table and a new column, committed while it is down.
            await client.create_table(
                "tks", "later", {"id": "text", "v": "text"}, partition_key=["id"]
            )
            missed_epoch = await client.add_columns("tks", "events", {"c": "boolean"})
            stop.set()
            await asyncio.gather(*writers)
            missed = set(written) - before_kill

            cluster.start_replica("replica3")
            await cluster.wait_ready(["replica3"])
            replica3 = cluster.nodes["replica3"]
            assert (await cluster.describe("replica3")).epoch >= missed_epoch

            expected: dict[str, dict[int, dict[str, object]]] = {}
            for rows in written.values():
                for row in rows:
                    expected.setdefault(str(row["id"]), {})[int(row["seq"])] = row  # type: ignore[call-overload]

            # A QUORUM read coordinated by replica3 reads its own data and repairs it: one row
            # of a partition is read, whole mutations come back.
            partition = next(str(rows[0]["id"]) for mid, rows in written.items() if mid in missed)
            one_row = min(
                s
                for s in expected[partition]
                if any(r["seq"] == s for mid in missed for r in written[mid])
            )
            result = await client.read(
                "tks",
                "events",
                {"id": partition},
                start={"seq": one_row},
                end={"seq": one_row},
                coordinator=replica3.address,
            )
            assert [row["seq"] for row in result.rows] == [one_row]
            assert result.stats.data_replica == replica3.node_id
            assert result.stats.repaired_mutations > 0
            repaired = set(result.stats.repaired)
            assert repaired <= missed
            # Every cell of every repaired mutation arrived on replica3, not only the row read.
            local = await client.read(
                "tks",
                "events",
                {"id": partition},
                consistency=Consistency.ONE,
                coordinator=replica3.address,
            )
            assert local.stats.replicas == (replica3.node_id,)
            held = {row["seq"]: row for row in local.rows}
            for mutation_id in repaired:
                for row in written[mutation_id]:
                    assert {k: v for k, v in held[row["seq"]].items() if k != "c"} == row
            # ... and it lacks nothing of the partition any more (writes in flight at the kill
            # may have reached it, so what it lacked is known only by what it holds now).
            assert set(held) == set(expected[partition])
            assert await cluster.metric(
                "replica3", 'epochal_mutations_stored_total{origin="repair"}'
            ) >= len(repaired)

            # Every acknowledged write reads back at QUORUM (any coordinator, any replicas).
            for partition, rows_by_seq in expected.items():
                result = await client.read("tks", "events", {"id": partition})
                got = {
                    row["seq"]: {k: v for k, v in row.items() if k != "c"} for row in result.rows
                }
                assert got == rows_by_seq, partition

    run(cluster, scenario, 240)


# --------------------------------------------------------------------------- stale plans


def key_near(table_columns: dict[str, str]) -> tuple[str, int]:
    """A partition key and its token, away from the ring's tokens."""
    from epochal.tcm import ColumnType

    columns = ((name, ColumnType(kind)) for name, kind in table_columns.items())
    typed = tuple(c for c in columns if c[0] == "id")
    for n in itertools.count():
        key = f"key-{n}"
        token = partition_token(typed, (key,))
        if 10**15 < abs(token) < (1 << 62) - 10**15:
            return key, token
    raise AssertionError("unreachable")


def test_a_coordinator_with_held_back_pushes_never_answers_success_on_a_stale_plan(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path / "cluster", test_hooks=True)
    tokens = {"replica1": [-(1 << 62)], "replica2": [0], "replica3": [1 << 62]}

    async def scenario() -> None:
        await start_ring(cluster, tokens=tokens)
        coordinator = cluster.nodes["replica1"]
        async with (
            AsyncClient(cluster.addresses) as client,
            CMSClient(cluster.cms.addresses) as cms,
        ):
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await client.create_table(
                "tks", "kv", {"id": "text", "v": "text"}, partition_key=["id"]
            )
            key, token = key_near({"id": "text", "v": "text"})
            assert partition_columns(client.table("tks", "kv"))[0][0] == "id"

            async def prepare_a_join(address: str) -> str:
                """A registered node (never started) prepares to join right after the key's
                token: the START puts it in the key's write group."""
                registered = await cms.commit(
                    Register(address=address, datacenter="dc1", rack="r1", version="1.0.0")
                )
                await client.refresh(registered.epoch)
                node = next(n for n in client.metadata.nodes.values() if n.address == address)
                prepared = await cms.commit(PrepareJoin(node_id=node.node_id, tokens=(token + 1,)))
                await client.refresh(prepared.epoch)
                await cluster.wait_for_epoch(prepared.epoch)
                return node.node_id

            async def start_join(node_id: str) -> int:
                """Commit START while the coordinator holds its pushes; the other live replica
                has applied it."""
                started = await cms.commit(AdvanceSequence(node_id=node_id, step=Step.START))
                await cluster.wait_for_epoch(started.epoch, ["replica2"])
                assert (await cluster.describe("replica1")).epoch < started.epoch
                return started.epoch

            joining = await prepare_a_join("127.0.0.1:9")
            cluster.stop_replica("replica3")  # only the coordinator and replica2 can acknowledge

            # Control: with the re-check off, the stale plan's two acknowledgements are taken
            # as QUORUM although the write group now has four members.
            await cluster.set_hooks("replica1", hold_metadata_pushes=True, skip_plan_recheck=True)
            start_epoch = await start_join(joining)
            stale = await client.write(
                "tks", "kv", {"id": key, "v": "control"}, coordinator=coordinator.address
            )
            assert len(stale.acknowledged) == 2
            assert (await cluster.describe("replica1")).epoch < start_epoch

            # Undo that join (START, then PREPARE), and let the coordinator catch up.
            for _ in range(2):
                undone = await cms.commit(CancelSequence(node_id=joining))
            await cluster.set_hooks("replica1")
            await cluster.wait_for_epoch(undone.epoch, ["replica1", "replica2"])

            # The real run: the re-check is on.
            joining = await prepare_a_join("127.0.0.1:10")
            behind_before = await cluster.metric(
                "replica1", "epochal_coordinator_behind_placements_total"
            )
            await cluster.set_hooks("replica1", hold_metadata_pushes=True)
            start_epoch = await start_join(joining)
            async with AsyncClient(cluster.addresses[:2], retries=0) as strict:
                with pytest.raises(Unavailable) as refused:
                    await strict.write(
                        "tks", "kv", {"id": key, "v": "real"}, coordinator=coordinator.address
                    )
            assert refused.value.rule == "stale_plan", refused.value
            assert "changed after the plan" in refused.value.message
            assert refused.value.mutation_id, "the error carries the id to retry with"
            # It learned the newer epoch from the replies, pushes still held back.
            assert (await cluster.describe("replica1")).epoch >= start_epoch
            assert (
                await cluster.metric("replica1", "epochal_coordinator_behind_placements_total")
                > behind_before
            )

    run(cluster, scenario, 240)


# --------------------------------------------------------------------------- reads on disk


def test_a_tracked_quorum_read_of_agreeing_replicas_reads_row_data_on_one_replica(
    tmp_path: Path,
) -> None:
    """Also: every replica writes spans of its writes, reads and applied epochs."""
    traces = tmp_path / "traces"
    cluster = LocalCluster(tmp_path / "cluster", env={"EPOCHAL_TRACE_DIR": str(traces)})
    reads = 40

    async def scenario() -> None:
        async with events_table(cluster) as client:
            for n in range(20):  # at ALL: every replica holds every mutation
                await client.write(
                    "tks",
                    "events",
                    {"id": f"p{n % 4}", "seq": n, "a": "x", "b": n},
                    consistency=Consistency.ALL,
                )

            async def totals(metric: str) -> float:
                return sum([await cluster.metric(name, metric) for name in cluster.nodes])

            data_before = await totals("epochal_row_data_reads_total")
            summaries_before = await totals("epochal_summary_reads_total")
            for n in range(reads):
                result = await client.read("tks", "events", {"id": f"p{n % 4}"})
                assert len(result.rows) == 5
                assert result.stats.repaired_mutations == 0
                assert len(result.stats.replicas) == 2
            assert await totals("epochal_row_data_reads_total") - data_before == reads
            # Both replicas summarise; only one reads rows.
            assert await totals("epochal_summary_reads_total") - summaries_before == 2 * reads
            epoch = client.epoch
        cluster.stop()  # graceful: the span files are flushed
        spans = [(s.name, s.attributes) for s in folder_spans(traces, "replica-*.jsonl")]
        writes = [a for name, a in spans if name == attr.REPLICA_WRITE]
        assert len(writes) == 20 and {a[attr.CONSISTENCY] for a in writes} == {"ALL"}
        assert all(len(a[attr.REPLICAS_ANSWERED]) == 3 for a in writes)
        quorum_reads = [a for name, a in spans if name == attr.REPLICA_READ]
        assert len(quorum_reads) == reads
        assert all(
            len(a[attr.REPLICAS_CONTACTED]) == 2 and a[attr.REPAIRED_MUTATIONS] == 0
            for a in quorum_reads
        )
        applied = {
            (a[attr.NODE_ID], a[attr.EPOCH]) for name, a in spans if name == attr.EPOCH_APPLY
        }
        for node in cluster.nodes.values():
            assert (node.node_id, epoch) in applied, node.node_id

    run(cluster, scenario, 180)


# --------------------------------------------------------------------------- bad input


def test_bad_requests_get_clear_status_codes_and_write_nothing(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster", replica_args=("--max-value-bytes", "1024"))

    async def scenario() -> None:
        await start_ring(cluster, num_tokens=4)
        async with AsyncClient(cluster.addresses) as client:
            await client.create_keyspace("tks", replication_factor=3, tracked=True)
            await client.create_table(
                "tks", "kv", {"id": "text", "n": "int", "v": "text"}, partition_key=["id"]
            )
            # A keyspace replicated only in a datacenter with no nodes: no replica owns a token.
            await client.create_keyspace(
                "nowhere", replication=ReplicationParams.network_topology({"dc9": 1})
            )
            epoch = await client.create_table(
                "nowhere", "kv", {"id": "text", "n": "int", "v": "text"}, partition_key=["id"]
            )
        address = cluster.addresses[0]

        def write(
            *,
            keyspace: str = "tks",
            table: str = "kv",
            cells: dict[str, pb.Value] | None = None,
            key: list[pb.Value] | None = None,
            **fields: object,
        ) -> pb.WriteRequest:
            cells = {"v": pb.Value(text="ok")} if cells is None else cells
            return pb.WriteRequest(
                mutation=pb.Mutation(
                    keyspace=keyspace,
                    table=table,
                    partition_key=[pb.Value(text="k")] if key is None else key,
                    rows=[
                        pb.RowWrite(
                            cells=[pb.CellWrite(column=c, value=v) for c, v in cells.items()]
                        )
                    ],
                ),
                **({"epoch": epoch} | fields),  # type: ignore[arg-type]
            )

        cases = [
            (write(keyspace="nowhere"), grpc.StatusCode.UNAVAILABLE, "no replica owns token"),
            (
                write(keyspace="nope"),
                grpc.StatusCode.INVALID_ARGUMENT,
                "keyspace 'nope' does not exist",
            ),
            (
                write(table="nope"),
                grpc.StatusCode.INVALID_ARGUMENT,
                "table tks.nope does not exist",
            ),
            (
                write(cells={"v": pb.Value(int=5)}),
                grpc.StatusCode.INVALID_ARGUMENT,
                "is text; got a int",
            ),
            (
                write(cells={"n": pb.Value(int=1 << 40)}),
                grpc.StatusCode.INVALID_ARGUMENT,
                "out of range",
            ),
            (
                write(cells={"v": pb.Value(text="x" * 2000)}),
                grpc.StatusCode.INVALID_ARGUMENT,
                "the limit is 1024",
            ),
            (
                write(cells={"nope": pb.Value(text="x")}),
                grpc.StatusCode.INVALID_ARGUMENT,
                "no column 'nope'",
            ),
            (
                write(cells={"id": pb.Value(text="x")}),
                grpc.StatusCode.INVALID_ARGUMENT,
                "key column",
            ),
            (write(key=[pb.Value(int=3)]), grpc.StatusCode.INVALID_ARGUMENT, "partition key"),
            (write(key=[pb.Value()]), grpc.StatusCode.INVALID_ARGUMENT, "cannot be null"),
            (
                write(epoch=epoch + 10_000),
                grpc.StatusCode.INVALID_ARGUMENT,
                "epoch from the future",
            ),
            (
                write(session_hlc=make_hlc(wall_ms() + 3_600_000)),
                grpc.StatusCode.FAILED_PRECONDITION,
                "ahead",
            ),
        ]
        async with open_channel(address) as channel:
            stub = replica_pb2_grpc.ReplicaStub(channel)
            for request, code, words in cases:
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await stub.Write(request, timeout=10)
                assert failed.value.code() == code, (request, failed.value)
                assert words in (failed.value.details() or ""), failed.value.details()
                trailers = dict(failed.value.trailing_metadata() or ())
                assert int(trailers["epochal-epoch"]) >= epoch
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Read(
                    pb.ReadRequest(
                        keyspace="tks", table="nope", partition_key=[pb.Value(text="k")]
                    ),
                    timeout=10,
                )
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            # Garbage bytes, to the client API and to the replica-to-replica stream.
            for method in ("/epochal.v1.Replica/Write", "/epochal.v1.Replica/Read"):
                call = channel.unary_unary(method)  # bytes in, bytes out
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await call(b"\xff\xff\xff garbage", timeout=10)
                assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
                assert "not a valid" in (failed.value.details() or "")
            exchange = channel.stream_stream("/epochal.v1.ReplicaPeer/Exchange")()
            await exchange.write(b"\xff\xff\xff garbage")
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await exchange.read()
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "not a valid epochal.v1.PeerRequests" in (failed.value.details() or "")
            # A request that parses but makes no sense is answered as malformed, by its id.
            peer = replica_pb2_grpc.ReplicaPeerStub(channel).Exchange()
            apply = pb.ApplyRequest(epoch=epoch, mutation=pb.StoredMutation())
            await peer.write(
                pb.PeerRequests(requests=[pb.PeerRequest(id=7, apply=apply), pb.PeerRequest(id=8)])
            )
            replies = []
            while len(replies) < 2:
                replies.extend((await peer.read()).replies)
            await peer.done_writing()
            assert {r.id: r.WhichOneof("body") for r in replies} == {7: "malformed", 8: "malformed"}
            assert "mutation.id is required" in next(r.malformed for r in replies if r.id == 7)
            # Nothing was written, and the replica still serves.
            for name in cluster.nodes:
                assert (
                    await cluster.metric(name, 'epochal_mutations_stored_total{origin="write"}')
                    == 0
                )
            async with AsyncClient(cluster.addresses) as client:
                assert (
                    await client.read("tks", "kv", {"id": "k"}, consistency=Consistency.ALL)
                ).rows == []
                await client.write("tks", "kv", {"id": "k", "n": 1, "v": "fine"})
                rows = (await client.read("tks", "kv", {"id": "k"})).rows
                assert rows == [{"id": "k", "n": 1, "v": "fine"}]

    run(cluster, scenario, 180)
