"""Realistic requests of one replica to another, and of a reconciler to a replica, for the fuzz
test (``fuzz.py``): each kind of the ``Exchange`` stream (a write, a tracked read repair, an
untracked cell repair, a read with a low bound, a fetch by partition, a reconciliation
delivery), range streams from a cursor, and every ``ReplicaReconcile`` call on a real range of
the fuzz keyspace with its real replicas. The fuzzer mutates them field by field, down to the
cells of a repair and the ids of a delivery, so that out-of-range numbers reach the checks
behind the first ones (the table, the epoch, the range's replicas).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from epochal.mtrack import MutationId, make_hlc
from epochal.replica.codec import (
    cell_to_proto,
    id_to_proto,
    mutation_from_proto,
    mutation_to_proto,
)
from epochal.replica.mutations import CellDraft, RowDraft, WriteDraft, prepare_write
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN
from epochal.wire.reconcile import range_to_proto
from epochal.wire.v1 import replica_pb2 as pb

from .fuzz_messages import PARTITIONS, Context

LIMITS = {"max_value_bytes": 1 << 20, "max_mutation_bytes": 1 << 24}

Builders = dict[str, list[Callable[[str], Message]]]


def peer_seeds(metadata: Any, context: Context, rng: random.Random) -> Builders:
    """Realistic requests per method path of ReplicaPeer and ReplicaReconcile, each for a tag."""
    ft = metadata.keyspaces["fuzz"].tables["ft"]
    epoch = context.epoch

    def identity() -> MutationId:
        return MutationId(
            node=rng.randint(1, 3),
            log=rng.randint(1, 9),
            sequence=rng.randint(1, 10**6),
            hlc=make_hlc(int(time.time() * 1000) - rng.randrange(1000)),
        )

    def stored(tag: str, keyspace: str = "fuzz") -> pb.StoredMutation:
        key: tuple[Any, ...] = (rng.randrange(PARTITIONS),) if keyspace == "fuzz" else (tag,)
        rows = (
            RowDraft(
                (rng.randrange(100),) if keyspace == "fuzz" else (),
                (CellDraft("v", "text", pb.Value(text=tag).SerializeToString()),),
            ),
        )
        draft = WriteDraft(
            keyspace=keyspace,
            table="ft" if keyspace == "fuzz" else "pt",
            partition_key=key,
            rows=rows,
        )
        return mutation_to_proto(prepare_write(metadata, draft, **LIMITS).with_id(identity()))

    def cell_repair(tag: str) -> pb.CellRepair:
        """An untracked read repair of plain.pt: the cells a write made, with their times."""
        mutation = mutation_from_proto(stored(tag, "plain"))
        return pb.CellRepair(
            keyspace="plain",
            table_id=mutation.table_id,
            token=mutation.token,
            partition_key=mutation.partition_key,
            cells=[cell_to_proto(c) for c in mutation.cells()],
        )

    def exchange(tag: str) -> pb.PeerRequests:
        body = stored(tag)
        requests = [
            pb.PeerRequest(apply=pb.ApplyRequest(epoch=epoch, mutation=body)),
            pb.PeerRequest(apply=pb.ApplyRequest(epoch=epoch, mutation=stored(tag), repair=True)),
            pb.PeerRequest(
                apply=pb.ApplyRequest(epoch=epoch, repair=True, cell_repair=cell_repair(tag))
            ),
            pb.PeerRequest(
                read=pb.LocalReadRequest(
                    epoch=epoch,
                    keyspace="fuzz",
                    table_id=ft.id,
                    token=body.token,
                    partition_key=body.partition_key,
                    data=True,
                    summary=True,
                    digest=rng.random() < 0.3,
                    sketch_logs=[pb.LogKey(node=1, log=1)],
                    sketch_cells=12,
                    low_bound=make_hlc(int(time.time() * 1000) - 60_000),
                ),
            ),
            pb.PeerRequest(
                fetch=pb.FetchMutationsRequest(
                    epoch=epoch, ids=[body.id], keyspace="fuzz", token=body.token
                )
            ),
            pb.PeerRequest(
                deliver=pb.DeliverMutationsRequest(epoch=epoch, mutations=[stored(tag)])
            ),
        ]
        chosen = rng.sample(requests, rng.randint(1, 3))
        for number, request in enumerate(chosen, 1):
            request.id = number
        return pb.PeerRequests(requests=chosen)

    def reconcile_range() -> pb.ReconcileRange:
        token_range = metadata.token_range("fuzz", rng.randrange(MIN_TOKEN, MAX_TOKEN))
        right = token_range.right
        replicas = metadata.replica_group("fuzz", right, write=True) | metadata.replica_group(
            "fuzz", right, write=False
        )
        return pb.ReconcileRange(
            epoch=epoch,
            keyspace="fuzz",
            range=range_to_proto(token_range),
            lease_token=rng.choice([epoch, 1]),
            replicas=sorted(replicas),
        )

    def now_hlc() -> int:
        return make_hlc(int(time.time() * 1000) - rng.randrange(120_000))

    def marks(ref: pb.ReconcileRange) -> list[pb.RangeMark]:
        return [pb.RangeMark(range=ref.range, hlc=rng.choice([0, now_hlc()]))]

    def cohort(ref: pb.ReconcileRange) -> pb.Cohort:
        low = now_hlc()
        return pb.Cohort(
            id=rng.randrange(1, 2**63),
            range=ref.range,
            members=sorted(rng.sample(context.node_ids, 2)),
            low=low,
            high=low + rng.randrange(1 << 30),
            mutations=rng.randrange(100),
            bytes=rng.randrange(10_000),
            formed_unix_ms=int(time.time() * 1000),
            folded_high=low,
        )

    def state(_: str) -> pb.RangeStateRequest:
        return pb.RangeStateRequest(
            range=reconcile_range(),
            claim=rng.random() < 0.7,
            lease_ms=rng.choice([1000, 5000]),
            sizes=rng.random() < 0.5,
            window_ids=rng.choice([0, 10]),
            window_from=rng.choice([[], [now_hlc()], [0, now_hlc()]]),
        )

    def summary(_: str) -> pb.RangeSummaryRequest:
        ref = reconcile_range()
        return pb.RangeSummaryRequest(
            range=ref,
            low_bounds=marks(ref),
            below=now_hlc(),
            sketch_logs=[pb.LogKey(node=1, log=1)],
            sketch_cells=rng.choice([0, 12]),
        )

    def deliver(_: str) -> pb.DeliverRequest:
        return pb.DeliverRequest(
            range=reconcile_range(),
            target=rng.choice(context.node_ids),
            ids=[id_to_proto(identity()) for _ in range(rng.randint(1, 3))],
        )

    def advance(_: str) -> pb.AdvanceLowBoundRequest:
        ref = reconcile_range()
        return pb.AdvanceLowBoundRequest(
            range=ref,
            old_bounds=marks(ref),
            new_bound=now_hlc(),
            cohorts=[pb.CohortMark(id=rng.randrange(1, 2**63), high=now_hlc())],
        )

    def fold(_: str) -> pb.FoldCohortRequest:
        ref = reconcile_range()
        return pb.FoldCohortRequest(
            range=ref, old_bounds=marks(ref), new_bound=now_hlc(), cohort=cohort(ref)
        )

    def hold(_: str) -> pb.HoldCohortRequest:
        ref = reconcile_range()
        return pb.HoldCohortRequest(range=ref, cohort=cohort(ref))

    def deliver_cohort(_: str) -> pb.DeliverCohortRequest:
        ref = reconcile_range()
        return pb.DeliverCohortRequest(
            range=ref, cohort=cohort(ref), target=rng.choice(context.node_ids)
        )

    def stream_range(_: str) -> pb.StreamRangeRequest:
        after = pb.StreamCursor(phase=rng.choice([0, 1]), started=rng.random() < 0.5)
        if after.started:
            after.token = rng.randrange(-100, 100)
            after.hlc = now_hlc()
            after.mutation_id.CopyFrom(id_to_proto(identity()))
        return pb.StreamRangeRequest(
            epoch=epoch,
            receiver=rng.choice(context.node_ids),
            prepared_epoch=epoch,
            keyspace="fuzz",
            table_id=ft.id,
            left=-100,
            right=100,
            after=after,
            max_message_bytes=1024,
            log_mode=rng.choice(["", "ids", "none"]),
        )

    reconcile = "/epochal.v1.ReplicaReconcile"
    return {
        "/epochal.v1.ReplicaPeer/Exchange": [exchange],
        "/epochal.v1.ReplicaPeer/StreamRange": [stream_range],
        f"{reconcile}/RangeState": [state],
        f"{reconcile}/RangeSummary": [summary],
        f"{reconcile}/Deliver": [deliver],
        f"{reconcile}/Fence": [lambda _: pb.FenceRequest(range=reconcile_range(), hlc=now_hlc())],
        f"{reconcile}/AdvanceLowBound": [advance],
        f"{reconcile}/FoldCohort": [fold],
        f"{reconcile}/HoldCohort": [hold],
        f"{reconcile}/DeliverCohort": [deliver_cohort],
    }
