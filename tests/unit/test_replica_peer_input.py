"""Numbers no peer or reconciler could send are refused where the message enters, naming the
field: every epoch, HLC, low bound, cell time and lease token of the replica's peer and
reconcile messages is an integer SQLite keeps (signed 64-bit), where a protobuf uint64 carries
up to 2^64 - 1. On the peer stream (``ReplicaPeer.Exchange``, served here by a real
``PeerServicer`` over a real replica on SQLite) such a request is answered ``malformed`` at
once — no catch-up to an epoch past 2^63 - 1, no query with a low bound SQLite cannot bind
(once answered "failed: OverflowError('Python int too large to convert to SQLite INTEGER')").
A bug is answered as an internal error, logged with its traceback, never with its Python text.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from epochal.mtrack import make_hlc
from epochal.replica.codec import (
    cells_from_proto,
    mutation_from_proto,
    pull_request_from_proto,
    range_request_from_proto,
)
from epochal.replica.faults import Faults
from epochal.replica.peer_servicer import PeerServicer
from epochal.replica.storage import ReplicaStorage
from epochal.tcm import (
    GrantReconcileLease,
    TokenRange,
)
from epochal.wire.channels import channel as open_channel
from epochal.wire.fields import MalformedInput
from epochal.wire.handlers import add_servicer
from epochal.wire.metadata import transformation_from_proto, transformation_to_proto
from epochal.wire.reconcile import ref_from_proto
from epochal.wire.tls import INSECURE
from epochal.wire.v1 import replica_pb2 as pb

from .local_node import local_replica, one_node
from .local_server import serving
from .seed_ring import Cluster

PEER_SERVICE = pb.DESCRIPTOR.services_by_name["ReplicaPeer"]
PAST_INT64 = [2**63, 2**64 - 1]


def peer_servicer(storage: ReplicaStorage, made: Cluster) -> PeerServicer:
    local = local_replica(storage, made)
    return PeerServicer(
        local.settings,
        local,
        local.follower,
        None,  # type: ignore[arg-type]  # no range streams here
        None,  # type: ignore[arg-type]
        faults=Faults(),
        closing=asyncio.Event(),
    )


def requests(made: Cluster) -> dict[str, pb.PeerRequest]:
    """One well-formed request of each kind (a cell repair, a read with a low bound, ...)."""
    table_id = made.md.keyspaces["tr"].tables["t"].id
    epoch = made.md.epoch
    now = make_hlc(int(time.time() * 1000))
    writer = b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01" + (1).to_bytes(8, "big")
    cells = [pb.RawCell(column="v", value=b"\x08\x01", hlc=now, mutation_key=writer)]
    repair = pb.CellRepair(
        keyspace="tr", table_id=table_id, token=50, partition_key=b"k", cells=cells
    )
    return {
        "cell_repair": pb.PeerRequest(
            apply=pb.ApplyRequest(epoch=epoch, repair=True, cell_repair=repair)
        ),
        "read": pb.PeerRequest(
            read=pb.LocalReadRequest(
                epoch=epoch, keyspace="tr", table_id=table_id, token=50, summary=True, low_bound=now
            )
        ),
        "fetch": pb.PeerRequest(fetch=pb.FetchMutationsRequest(epoch=epoch)),
        "deliver": pb.PeerRequest(deliver=pb.DeliverMutationsRequest(epoch=epoch)),
    }


# (request kind, where the number goes, the field the refusal names)
OUT_OF_RANGE = [
    ("read", lambda r, v: setattr(r.read, "low_bound", v), "read.low_bound"),
    ("read", lambda r, v: setattr(r.read, "epoch", v), "read.epoch"),
    ("cell_repair", lambda r, v: setattr(r.apply.cell_repair.cells[0], "hlc", v), "cells[0].hlc"),
    ("cell_repair", lambda r, v: setattr(r.apply, "epoch", v), "apply.epoch"),
    ("fetch", lambda r, v: setattr(r.fetch, "epoch", v), "fetch.epoch"),
    ("deliver", lambda r, v: setattr(r.deliver, "epoch", v), "deliver.epoch"),
]


async def exchange(address: str, *sent: pb.PeerRequest) -> list[pb.PeerReply]:
    async with open_channel(address, INSECURE) as channel:
        call = channel.stream_stream(
            "/epochal.v1.ReplicaPeer/Exchange",
            request_serializer=pb.PeerRequests.SerializeToString,
            response_deserializer=pb.PeerReplies.FromString,
        )(timeout=10)
        for number, request in enumerate(sent, 1):
            request.id = number
        await call.write(pb.PeerRequests(requests=sent))
        await call.done_writing()
        replies = [reply async for batch in call for reply in batch.replies]
        return sorted(replies, key=lambda r: r.id)


def serve(servicer: PeerServicer) -> Any:
    return serving(servicer, lambda s, server: add_servicer(server, PEER_SERVICE, s))


@pytest.mark.parametrize("value", PAST_INT64)
@pytest.mark.parametrize(("kind", "place", "field"), OUT_OF_RANGE, ids=[x[2] for x in OUT_OF_RANGE])
def test_a_number_past_signed_64_bits_is_refused_as_malformed_at_once_naming_it(
    storage: ReplicaStorage, kind: str, place: Any, field: str, value: int
) -> None:
    made = one_node()

    async def scenario() -> None:
        async with serve(peer_servicer(storage, made)) as address:
            request = requests(made)[kind]
            place(request, value)
            started = time.monotonic()
            (reply,) = await exchange(address, request)
            assert reply.WhichOneof("body") == "malformed", reply
            assert field in reply.malformed and str(value) in reply.malformed, reply.malformed
            assert time.monotonic() - started < 1.0  # no catch-up, no timeout waited for

    asyncio.run(scenario())


def test_the_well_formed_requests_are_served(storage: ReplicaStorage) -> None:
    made = one_node()

    async def scenario() -> None:
        async with serve(peer_servicer(storage, made)) as address:
            replies = await exchange(address, *requests(made).values())
            assert [r.WhichOneof("body") for r in replies] == ["apply", "read", "fetch", "deliver"]

    asyncio.run(scenario())


def test_a_bug_is_answered_as_an_internal_error_and_logged_never_its_python_text(
    storage: ReplicaStorage, caplog: pytest.LogCaptureFixture
) -> None:
    made = one_node()
    servicer = peer_servicer(storage, made)

    async def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("a secret of the implementation")

    servicer.local.read = broken  # type: ignore[method-assign]

    async def scenario() -> None:
        async with serve(servicer) as address:
            (reply,) = await exchange(address, requests(made)["read"])
            assert reply.malformed.startswith("internal error serving a read request"), reply
            assert "KeyError" not in reply.malformed and "secret" not in reply.malformed

    with caplog.at_level(logging.ERROR, logger="epochal.replica.peer_servicer"):
        asyncio.run(scenario())
    (logged,) = [r for r in caplog.records if r.name == "epochal.replica.peer_servicer"]
    assert logged.exc_info is not None and "a secret" in caplog.text  # with its traceback


def test_a_refusal_in_band_echoes_at_most_the_start_of_a_long_name(storage: ReplicaStorage) -> None:
    made = one_node()

    async def scenario() -> None:
        async with serve(peer_servicer(storage, made)) as address:
            request = requests(made)["read"]
            request.read.keyspace = "k" * 65_536
            (reply,) = await exchange(address, request)
            assert reply.read.outcome == pb.UNKNOWN_TABLE, reply.read.outcome
            # The name's first 200 characters (its quote one of them), then the message's words.
            assert "'" + "k" * 199 + "\u2026 does not exist at epoch" in reply.read.message
            assert len(reply.read.message) < 400

    asyncio.run(scenario())


# --------------------------------------------------------------------------- other entries


def test_stream_and_pull_requests_refuse_epochs_and_cursor_times_past_signed_64_bits() -> None:
    for field in ("epoch", "prepared_epoch"):
        for value in PAST_INT64:
            with pytest.raises(MalformedInput, match=field):
                range_request_from_proto(pb.StreamRangeRequest(**{field: value}))
            with pytest.raises(MalformedInput, match=field):
                pull_request_from_proto(pb.PullRangesRequest(**{field: value}))
    cursor = pb.StreamCursor(phase=pb.StreamCursor.MUTATIONS, started=True, hlc=2**63)
    cursor.mutation_id.CopyFrom(pb.MutationId(node=1, log=1, sequence=1))
    with pytest.raises(MalformedInput, match=r"after\.hlc"):
        range_request_from_proto(pb.StreamRangeRequest(after=cursor))


def test_cell_times_and_a_mutation_timestamp_past_signed_64_bits_are_malformed() -> None:
    with pytest.raises(MalformedInput, match=r"cells\[1\]\.hlc"):
        cells_from_proto([pb.RawCell(hlc=1), pb.RawCell(hlc=2**63)])
    stored = pb.StoredMutation(
        id=pb.MutationId(node=1, log=1, sequence=1, hlc=5), keyspace="k", table_id="t"
    )
    stored.timestamp = 2**64 - 1
    with pytest.raises(MalformedInput, match=r"mutation\.timestamp"):
        mutation_from_proto(stored)


@pytest.mark.parametrize("field", ["epoch", "lease_token"])
def test_a_reconcile_range_refuses_an_epoch_or_lease_token_past_signed_64_bits(field: str) -> None:
    ref = pb.ReconcileRange(keyspace="tr")
    ref.range.left, ref.range.right = 0, 100
    setattr(ref, field, 2**63)
    with pytest.raises(MalformedInput, match=f"range.{field}"):
        ref_from_proto(ref)


def test_a_lease_grant_refuses_to_replace_a_token_past_signed_64_bits() -> None:
    grant = GrantReconcileLease(keyspace="tr", range=TokenRange(0, 100), holder="r", replaces=0)
    message = transformation_to_proto(grant)
    message.grant_reconcile_lease.replaces = 2**64 - 1
    with pytest.raises(MalformedInput, match="replaces"):
        transformation_from_proto(message)
