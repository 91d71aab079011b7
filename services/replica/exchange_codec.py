"""A coordinator's side of ``ReplicaPeer.Exchange``: its requests to another replica as protobuf,
and that replica's replies back as ``PeerReply`` values (``epochal.replica.handles`` sends them).

The gRPC layer of the replica: the only module on the coordinator's side of the stream that
touches generated code. A mutation travels as the bytes it is stored as (``body``), encoded once
by the coordinator for every replica: each request takes them in without decoding them into
objects first. A reply that cannot be used — the replica refused the request as malformed, or
sent a summary or sketch that does not decode — raises ``UnusableReply``.
"""

from __future__ import annotations

from collections.abc import Sequence

from epochal.mtrack import LogDigests, MalformedSummary, MutationId, Sketch
from epochal.mtrack.cohorts import CohortMark
from epochal.replica.codec import (
    bounds_to_proto,
    cell_to_proto,
    cells_from_proto,
    id_from_proto,
    id_to_proto,
)
from epochal.replica.data_store import CellRepair
from epochal.replica.local_replica import Outcome, PartitionRead, PeerReply
from epochal.wire.v1 import replica_pb2 as pb

OUTCOMES = {
    pb.OK: Outcome.OK,
    pb.NOT_A_REPLICA: Outcome.NOT_A_REPLICA,
    pb.UNKNOWN_TABLE: Outcome.UNKNOWN_TABLE,
    pb.BEHIND: Outcome.BEHIND,
    pb.OVERLOADED: Outcome.OVERLOADED,
    pb.CLOCK_SKEW: Outcome.CLOCK_SKEW,
    pb.TOO_LARGE: Outcome.TOO_LARGE,
    pb.MALFORMED: Outcome.MALFORMED,
    pb.FENCED: Outcome.FENCED,
    pb.SUPERSEDED: Outcome.SUPERSEDED,
    pb.MISMATCH: Outcome.MISMATCH,
    pb.LAPSED: Outcome.LAPSED,
}
OUTCOME_NUMBERS = {v: k for k, v in OUTCOMES.items()}

Request = pb.PeerRequest
Reply = pb.PeerReply


class UnusableReply(Exception):
    """A reply that says nothing about the request: refused as malformed, or undecodable."""


def batch(requests: list[Request]) -> pb.PeerRequests:
    return pb.PeerRequests(requests=requests)


# --------------------------------------------------------------------------- requests


def apply_request(epoch: int, body: bytes, *, repair: bool) -> Request:
    """Store the mutation encoded as ``body`` (a write, or a read repair)."""
    request = pb.PeerRequest(apply=pb.ApplyRequest(epoch=epoch, repair=repair))
    request.apply.mutation.MergeFromString(body)  # cheaper than a parsed copy
    return request


def cell_repair_request(epoch: int, keyspace: str, repair: CellRepair) -> Request:
    cells = pb.CellRepair(
        keyspace=keyspace,
        table_id=repair.table_id,
        token=repair.token,
        partition_key=repair.partition_key,
        cells=[cell_to_proto(c) for c in repair.cells],
    )
    return pb.PeerRequest(apply=pb.ApplyRequest(epoch=epoch, repair=True, cell_repair=cells))


def read_request(
    epoch: int,
    read: PartitionRead,
    *,
    data: bool,
    summary: bool,
    digest: bool,
    sketch_logs: Sequence[tuple[int, int]],
    sketch_cells: int,
) -> Request:
    return pb.PeerRequest(
        read=pb.LocalReadRequest(
            epoch=epoch,
            keyspace=read.keyspace,
            table_id=read.table_id,
            token=read.token,
            partition_key=read.partition_key,
            bounds=bounds_to_proto(read.bounds),
            data=data,
            summary=summary,
            digest=digest,
            sketch_logs=[pb.LogKey(node=n, log=g) for n, g in sketch_logs],
            sketch_cells=sketch_cells,
            low_bound=read.low_bound,
        )
    )


def fetch_request(
    epoch: int, ids: Sequence[MutationId], keyspace: str = "", token: int = 0
) -> Request:
    return pb.PeerRequest(
        fetch=pb.FetchMutationsRequest(
            epoch=epoch, ids=[id_to_proto(i) for i in ids], keyspace=keyspace, token=token
        )
    )


def deliver_request(epoch: int, bodies: Sequence[bytes]) -> Request:
    """Store the mutations encoded as ``bodies`` (a reconciliation delivery), in one request."""
    request = pb.PeerRequest(deliver=pb.DeliverMutationsRequest(epoch=epoch))
    mutations = request.deliver.mutations
    for body in bodies:
        mutations.add().MergeFromString(body)
    return request


# --------------------------------------------------------------------------- replies


def delivered(reply: Reply) -> PeerReply:
    _check(reply)
    return PeerReply(*_outcome(reply.deliver), examined=reply.deliver.stored)


def applied(reply: Reply) -> PeerReply:
    _check(reply)
    return PeerReply(*_outcome(reply.apply), fence=reply.apply.fence)


def read_reply(reply: Reply) -> PeerReply:
    _check(reply)
    response = reply.read
    try:
        cells = tuple(cells_from_proto(response.cells))
        summary = LogDigests.decode(response.summary) if response.summary else None
        sketch = Sketch.decode(response.sketch) if response.sketch else None
        cohorts = tuple(CohortMark(m.id, m.high) for m in response.cohorts)
    except (MalformedSummary, ValueError) as malformed:  # MalformedInput is a ValueError
        raise UnusableReply(f"sent a malformed summary or cells: {malformed}") from None
    return PeerReply(
        *_outcome(response),
        cells=cells,
        summary=summary,
        digest=response.digest,
        sketch=sketch,
        cohorts=cohorts,
    )


def fetched(reply: Reply) -> PeerReply:
    _check(reply)
    response = reply.fetch
    return PeerReply(
        *_outcome(response),
        bodies=tuple(m.SerializeToString() for m in response.mutations),
        examined=response.examined,
        held=tuple(_held(response.held)),
    )


def _held(messages: Sequence[pb.MutationId]) -> list[MutationId]:
    try:
        return [id_from_proto(m, "held") for m in messages]
    except ValueError as error:
        raise UnusableReply(f"sent a malformed held id: {error}") from None


def _check(reply: Reply) -> None:
    if reply.WhichOneof("body") == "malformed":
        raise UnusableReply(f"refused: {reply.malformed}")


def _outcome(
    response: pb.ApplyResponse
    | pb.LocalReadResponse
    | pb.FetchMutationsResponse
    | pb.DeliverMutationsResponse,
) -> tuple[int, Outcome, str]:
    return response.epoch, OUTCOMES.get(response.outcome, Outcome.BEHIND), response.message
