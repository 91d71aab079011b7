"""Applying a join to the metadata of a 1,000-node cluster, and the size of that metadata.

Workload (fixed): 1,000 nodes of 16 tokens each (16,000 tokens), 500 in each of two datacenters
dc1 and dc2, three racks per datacenter (rack1..rack3, filled round-robin), tokens allocated for
balance as ``PrepareJoin(num_tokens=16)`` allocates them, one node after the other, alternating
datacenters. Ten keyspaces over three distinct NetworkTopologyStrategy replication params:
ks0..ks4 {dc1: 3, dc2: 3}, ks5..ks7 {dc1: 3}, ks8..ks9 {dc1: 2, dc2: 2}; so three placements of
16,000 ranges each.

How the ring is built: nodes register through ``Register`` and keyspaces are created through
``CreateKeyspace`` (which computes the natural placements of the token map itself), but the
joins of the 1,000 nodes are not replayed step by step (5,000 epochs). Instead each node's tokens
come from ``allocate_tokens`` on the token map of the nodes before it — exactly what its
``PrepareJoin`` would pick — and the token map and the JOINED states are written into the
metadata directly. Every run first checks this shortcut on a 48-node cluster of the same shape:
the direct build and a build by ``Register``, ``PrepareJoin``, ``AdvanceSequence`` START, MID and
FINISH per node must give the same token map, node states and placements.

Measured on that 1,000-node metadata, after ``Register`` of a new node in dc1 (a pure function of
an immutable state, so every repetition starts from the same metadata; warm-up repetitions first,
medians reported):

- ``apply_join_prepare_ms``: ``PrepareJoin(num_tokens=16)`` validate + execute (token allocation,
  split of the three placements, natural replicas of the target token map, deltas, locks);
- ``apply_join_step_ms``: ``AdvanceSequence(START)`` validate + execute on the prepared state
  (the new node enters the write groups of the ranges it acquires); target <= 50 ms;
- extras ``apply_join_mid_ms`` and ``apply_join_finish_ms``: the following steps, likewise;
- ``metadata_bytes``: ``metadata_to_proto(md).SerializeToString()`` of the metadata after the
  START step (the join in flight); target <= 2 MB (2,000,000 bytes); extra
  ``metadata_bytes_ring``: the same for the ring before the join, and ``metadata_encode_ms``.

Result keys: apply_join_step_ms, apply_join_prepare_ms, metadata_bytes, nodes, tokens,
placement_ranges, apply_join_step_ms_max, apply_join_prepare_ms_max, apply_join_mid_ms,
apply_join_finish_ms, metadata_bytes_ring, metadata_encode_ms, build_s.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TypeVar

import _report

from epochal.tcm import (
    AdvanceSequence,
    ClusterMetadata,
    CMSMember,
    CreateKeyspace,
    InitializeCMS,
    NodeState,
    PrepareJoin,
    Register,
    ReplicationParams,
    Step,
    TokenMap,
    Transformation,
)
from epochal.tcm.allocation import allocate_tokens
from epochal.tcm.schema import frozen_map
from epochal.wire.metadata import metadata_to_proto

NODES = 1000
NUM_TOKENS = 16
DATACENTERS = ("dc1", "dc2")
RACKS_PER_DATACENTER = 3
CHECK_NODES = 48
KEYSPACES = (
    *(ReplicationParams.network_topology({"dc1": 3, "dc2": 3}) for _ in range(5)),
    *(ReplicationParams.network_topology({"dc1": 3}) for _ in range(3)),
    *(ReplicationParams.network_topology({"dc1": 2, "dc2": 2}) for _ in range(2)),
)
STEP_TARGET_MS = 50.0
BYTES_TARGET = 2_000_000
T = TypeVar("T")


# ---------------------------------------------------------------- building the cluster


def apply(metadata: ClusterMetadata, transformation: Transformation) -> ClusterMetadata:
    rejection = transformation.validate(metadata)
    if rejection is not None:
        raise rejection
    return transformation.execute(metadata)


def register(metadata: ClusterMetadata, number: int) -> tuple[ClusterMetadata, str]:
    """Register node ``number`` (0-based): datacenters alternate, racks go round-robin."""
    datacenter = DATACENTERS[number % len(DATACENTERS)]
    rack = f"rack{number // len(DATACENTERS) % RACKS_PER_DATACENTER + 1}"
    address = f"10.{number // 62500}.{number // 250 % 250}.{number % 250}:7000"
    metadata = apply(
        metadata, Register(address=address, datacenter=datacenter, rack=rack, version="1.0.0")
    )
    return metadata, f"node-{metadata.next_node_number - 1}"


def initialized() -> ClusterMetadata:
    return apply(
        ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:7100"),))
    )


def create_keyspaces(metadata: ClusterMetadata) -> ClusterMetadata:
    for number, params in enumerate(KEYSPACES):
        metadata = apply(metadata, CreateKeyspace(name=f"ks{number}", replication=params))
    return metadata


def build_direct(nodes: int) -> ClusterMetadata:
    """Register every node, give each the tokens its PrepareJoin would allocate after the nodes
    before it, write the token map and JOINED states, then create the keyspaces."""
    metadata = initialized()
    node_ids = []
    for number in range(nodes):
        metadata, node_id = register(metadata, number)
        node_ids.append(node_id)
    locations = metadata.locations()
    owners: dict[str, tuple[int, ...]] = {}
    token_map = TokenMap()
    for node_id in node_ids:
        owners[node_id] = allocate_tokens(token_map, locations, locations[node_id][0], NUM_TOKENS)
        token_map = TokenMap(owners)
    joined = {n: replace(info, state=NodeState.JOINED) for n, info in metadata.nodes.items()}
    metadata = replace(metadata, tokens=token_map, nodes=frozen_map(joined))
    return create_keyspaces(metadata)


def build_by_joins(nodes: int) -> ClusterMetadata:
    """The honest path: keyspaces first, then each node registers and joins step by step."""
    metadata = create_keyspaces(initialized())
    for number in range(nodes):
        metadata, node_id = register(metadata, number)
        metadata = apply(metadata, PrepareJoin(node_id=node_id, num_tokens=NUM_TOKENS))
        for step in (Step.START, Step.MID, Step.FINISH):
            metadata = apply(metadata, AdvanceSequence(node_id=node_id, step=step))
    return metadata


def check_direct_build(nodes: int) -> None:
    direct, joined = build_direct(nodes), build_by_joins(nodes)
    assert direct.tokens == joined.tokens, "direct build: token maps differ"
    assert {n: i.state for n, i in direct.nodes.items()} == {
        n: i.state for n, i in joined.nodes.items()
    }, "direct build: node states differ"
    assert dict(direct.placements) == dict(joined.placements), "direct build: placements differ"
    assert not joined.sequences


# ---------------------------------------------------------------- measuring


def timed_ms(action: Callable[[], T], warmup: int, repetitions: int) -> tuple[list[float], T]:
    """Call ``action`` ``warmup`` times, then time ``repetitions`` calls; the last result."""
    for _ in range(warmup):
        action()
    samples = []
    for _ in range(repetitions):
        started = time.perf_counter()
        result = action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples, result


def measure(ring: ClusterMetadata, warmup: int, repetitions: int) -> dict[str, float]:
    metadata, node_id = register(ring, NODES)  # the 1,001st node, in dc1
    results: dict[str, float] = {}
    states: dict[str, ClusterMetadata] = {}
    stages = (
        ("apply_join_prepare_ms", PrepareJoin(node_id=node_id, num_tokens=NUM_TOKENS)),
        ("apply_join_step_ms", AdvanceSequence(node_id=node_id, step=Step.START)),
        ("apply_join_mid_ms", AdvanceSequence(node_id=node_id, step=Step.MID)),
        ("apply_join_finish_ms", AdvanceSequence(node_id=node_id, step=Step.FINISH)),
    )
    for key, transformation in stages:
        samples, metadata = timed_ms(partial(apply, metadata, transformation), warmup, repetitions)
        results[key] = statistics.median(samples)
        results[f"{key}_max"] = max(samples)
        states[key] = metadata
    after_start = states["apply_join_step_ms"]
    assert metadata.nodes[node_id].state is NodeState.JOINED and not metadata.sequences
    results["metadata_bytes_ring"] = len(metadata_to_proto(ring).SerializeToString())
    samples, _ = timed_ms(partial(metadata_to_proto, after_start), 1, max(3, repetitions // 3))
    results["metadata_bytes"] = len(metadata_to_proto(after_start).SerializeToString())
    results["metadata_encode_ms"] = statistics.median(samples)
    return results


# ---------------------------------------------------------------- the run


def run(quick: bool) -> dict[str, object]:
    warmup, repetitions = (2, 5) if quick else (3, 21)
    started = time.perf_counter()
    check_direct_build(CHECK_NODES)
    ring = build_direct(NODES)
    build_s = time.perf_counter() - started
    placements = ring.placements.values()
    figures: dict[str, object] = {
        "nodes": len(ring.tokens.owners),
        "tokens": len(ring.tokens.ring_tokens),
        "placement_ranges": sum(len(p.points) for p in placements),
        "build_s": build_s,
        "repetitions": repetitions,
    }
    figures.update(measure(ring, warmup, repetitions))
    return figures


def main() -> int:
    args = _report.parser(__doc__).parse_args()
    figures = run(args.quick)
    out = _report.write_result(
        "metadata_apply",
        figures,
        workload=f"{NODES} nodes x {NUM_TOKENS} tokens, dc1/dc2 x {RACKS_PER_DATACENTER} "
        "racks, balanced allocation; 10 keyspaces: 5 x NTS{dc1:3,dc2:3}, 3 x NTS{dc1:3}, "
        "2 x NTS{dc1:2,dc2:2}; ring built directly (checked against step-by-step joins on "
        f"{CHECK_NODES} nodes); a new dc1 node's PrepareJoin(num_tokens={NUM_TOKENS}) and "
        "AdvanceSequence START/MID/FINISH, validate + execute, median over repetitions; "
        "metadata_to_proto(...).SerializeToString() after START",
        quick=args.quick,
    )
    _report.print_table(
        figures,
        (
            "nodes",
            "tokens",
            "placement_ranges",
            "build_s",
            "apply_join_prepare_ms",
            "apply_join_prepare_ms_max",
            "apply_join_step_ms",
            "apply_join_step_ms_max",
            "apply_join_mid_ms",
            "apply_join_finish_ms",
            "metadata_bytes_ring",
            "metadata_bytes",
            "metadata_encode_ms",
        ),
    )
    step_ok = figures["apply_join_step_ms"] <= STEP_TARGET_MS
    bytes_ok = figures["metadata_bytes"] <= BYTES_TARGET
    print(
        f"\napply_join_step_ms {figures['apply_join_step_ms']:.2f} (target <= {STEP_TARGET_MS:g}: "
        f"{'met' if step_ok else 'MISSED'}); metadata_bytes {figures['metadata_bytes']:,} "
        f"(target <= {BYTES_TARGET:,}: {'met' if bytes_ok else 'MISSED'})"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
