"""Topology sequences committed through a real 3-member CMS on 127.0.0.1: an overlapping operation
is refused with FAILED_PRECONDITION naming the holder, two non-overlapping joins run at once,
a cancel undoes one step per epoch and releases the lock, and every member's log and metadata
agree afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.cms_client import CMSClient
from epochal.devcluster.cms import LocalCMS
from epochal.errors import Rejected
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    CreateKeyspace,
    NodeState,
    PrepareJoin,
    Register,
    ReplicationParams,
    Step,
)
from epochal.tcm.placement import Placement
from tests.harness import FAST_ELECTIONS, converge, run

pytestmark = pytest.mark.integration

STEPS = (Step.START, Step.MID, Step.FINISH)


def test_topology_operations_through_the_cms(tmp_path: Path) -> None:
    cluster = LocalCMS(tmp_path / "cms", extra_args=FAST_ELECTIONS)

    async def scenario() -> dict[str, object]:
        cluster.start()
        await cluster.wait_serving()
        seen: dict[str, object] = {}
        async with CMSClient(cluster.addresses) as cms:

            async def register(name: str) -> str:
                await cms.commit(
                    Register(address=f"{name}:7000", datacenter="dc1", rack="r1", version="1.0.0")
                )
                return f"node-{len(nodes) + 1}"

            nodes: dict[str, str] = {}
            await cms.commit(CreateKeyspace(name="ks", replication=ReplicationParams.simple(2)))
            # Eight nodes with single explicit tokens; RF 2.
            for i in range(8):
                nodes[f"N{i}"] = await register(f"N{i}")
                await cms.commit(PrepareJoin(node_id=nodes[f"N{i}"], tokens=(i * 1000,)))
                for step in STEPS:
                    await cms.commit(AdvanceSequence(node_id=nodes[f"N{i}"], step=step))
            for name in ("X", "Y", "Z"):
                nodes[name] = await register(name)
            x, y, z = nodes["X"], nodes["Y"], nodes["Z"]

            holder = await cms.commit(PrepareJoin(node_id=x, tokens=(1500,)))
            with pytest.raises(Rejected) as refused:
                await cms.commit(PrepareJoin(node_id=z, tokens=(1600,)))
            seen["refusal"] = refused.value
            seen["holder_epoch"] = holder.epoch
            # The opposite side of the ring is free: Y joins while X's join is in flight.
            await cms.commit(PrepareJoin(node_id=y, tokens=(5500,)))
            for step in STEPS:
                await cms.commit(AdvanceSequence(node_id=y, step=step))
            await cms.commit(AdvanceSequence(node_id=x, step=Step.START))
            await cms.commit(AdvanceSequence(node_id=x, step=Step.MID))
            # Cancel X: MID, then START, then PREPARE, one epoch each; then Z may go.
            cancels = [(await cms.commit(CancelSequence(node_id=x))).epoch for _ in range(3)]
            seen["cancel_epochs"] = cancels
            with pytest.raises(Rejected) as nothing_left:
                await cms.commit(CancelSequence(node_id=x))
            seen["nothing_left"] = nothing_left.value
            await cms.commit(PrepareJoin(node_id=z, tokens=(1600,)))
            for step in STEPS:
                await cms.commit(AdvanceSequence(node_id=z, step=step))
            seen["epoch"] = await converge(cluster)
            seen["metadata"] = [await replayed(cms, index) for index in range(len(cluster.members))]
            seen["nodes"] = nodes
        return seen

    seen = run(cluster, scenario, 120)
    refusal = seen["refusal"]
    nodes: dict[str, str] = seen["nodes"]  # type: ignore[assignment]
    assert isinstance(refusal, Rejected)
    assert refusal.status == "FAILED_PRECONDITION"
    assert refusal.rule == "range_locked"
    assert f"locked by the join of {nodes['X']} prepared at epoch {seen['holder_epoch']}" in str(
        refusal
    )
    cancel_epochs: list[int] = seen["cancel_epochs"]  # type: ignore[assignment]
    assert cancel_epochs == list(range(cancel_epochs[0], cancel_epochs[0] + 3))
    assert seen["nothing_left"].rule == "no_sequence"  # type: ignore[attr-defined]
    # Every member's log replays to the same metadata: X back out (LEFT), Y and Z in, nothing
    # in flight, and placements that are the natural ones of the final ring.
    first, *others = seen["metadata"]  # type: ignore[misc]
    assert all(md == first for md in others)
    assert first.epoch == seen["epoch"]
    states = {name: first.nodes[node].state for name, node in nodes.items()}
    assert states["X"] is NodeState.LEFT
    assert states["Y"] is states["Z"] is NodeState.JOINED
    assert not first.sequences
    params = ReplicationParams.simple(2)
    assert first.placements[params] == Placement.natural(params, first.tokens, first.locations())


async def replayed(cms: CMSClient, member: int) -> ClusterMetadata:
    """The metadata a member's log replays to, read through FetchLog from epoch 0."""
    metadata = ClusterMetadata.empty()
    while True:
        page = await cms.fetch_log(since_epoch=metadata.epoch, member=member)
        assert page.snapshot is None
        for entry in page.records:
            assert entry.transformation is not None, entry.problem
            metadata = entry.transformation.execute(metadata)
            assert metadata.epoch == entry.epoch
        if not page.has_more:
            return metadata
