"""What a replica with the join setting on does, by where it stands in the metadata (the pure
``decide``), and how joins that start at once share an empty ring (token allocation counting
the joins in flight), through the real transformations."""

from __future__ import annotations

import pytest

from epochal.errors import Rejected
from epochal.replica.auto_join import Action, decide
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    CMSMember,
    InitializeCMS,
    PrepareJoin,
    PrepareLeave,
    PrepareReplace,
    Register,
    Step,
    apply_transformation,
)

from .seed_ring import RF2, Cluster

NUM_TOKENS = 8


def test_a_registered_node_of_an_empty_ring_joins_with_nothing_to_stream() -> None:
    cluster = Cluster({"ks": RF2})
    node = cluster.register("A")
    decision = decide(cluster.md, node)
    assert decision.action is Action.JOIN
    assert "no node owns tokens yet: nothing to stream" in decision.why


def test_a_registered_node_of_a_ring_bootstraps_with_streaming() -> None:
    cluster = Cluster({"ks": RF2})
    cluster.join("A", 100)
    node = cluster.register("B")
    decision = decide(cluster.md, node)
    assert decision.action is Action.JOIN
    assert "1 nodes own tokens: bootstrapping with streaming" in decision.why


def test_a_joined_node_does_not_join_again_and_a_node_that_left_stays_out() -> None:
    cluster = Cluster({"ks": RF2})
    a = cluster.join("A", 100)
    b = cluster.join("B", 200)
    c = cluster.join("C", 300)
    assert decide(cluster.md, a).action is Action.NOTHING
    assert "is joined with 1 tokens" in decide(cluster.md, a).why
    cluster.apply(PrepareLeave(node_id=c))
    cluster.advance(c, Step.START, Step.MID, Step.FINISH)
    left = decide(cluster.md, c)
    assert left.action is Action.NOTHING and "left the ring" in left.why
    assert decide(cluster.md, b).action is Action.NOTHING


def test_an_interrupted_join_resumes_and_other_operations_are_the_operators() -> None:
    cluster = Cluster({"ks": RF2})
    a = cluster.join("A", 100)
    cluster.join("B", 200)
    cluster.join("C", 300)
    d = cluster.join("D", 0, steps=(Step.START,))
    resumed = decide(cluster.md, d)
    assert resumed.action is Action.RESUME and "resuming the join" in resumed.why
    # A cancel in progress only goes back: finishing it is the operator's.
    cluster.apply(CancelSequence(node_id=d, last_step=Step.START))
    cancelling = decide(cluster.md, d)
    assert cancelling.action is Action.NOTHING and "finish the cancel" in cancelling.why
    assert decide(cluster.md, a).action is Action.NOTHING


def test_a_replacing_node_is_left_to_its_operator() -> None:
    cluster = Cluster({"ks": RF2})
    a = cluster.join("A", 100)
    cluster.join("B", 200)
    cluster.join("C", 300)
    d = cluster.register("D")
    cluster.apply(PrepareReplace(node_id=d, replaced=a))
    decision = decide(cluster.md, d)
    assert decision.action is Action.NOTHING and "not a join" in decision.why


def test_joins_prepared_at_once_on_an_empty_ring_split_it_in_the_order_of_the_log() -> None:
    """Three nodes start together with no keyspace: nothing is locked, every PREPARE is
    accepted, and each allocation counts the tokens of the joins before it, so no token is
    taken twice and the ring ends balanced as if they had joined one by one."""
    metadata = apply_transformation(
        ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),))
    )
    nodes = []
    for name in ("A", "B", "C"):
        metadata = apply_transformation(
            metadata,
            Register(address=f"{name}:7000", datacenter="dc1", rack="r1", version="1.0.0"),
        )
        nodes.append(f"node-{metadata.next_node_number - 1}")
    assert not metadata.keyspaces
    for node in nodes:
        metadata = apply_transformation(metadata, PrepareJoin(node_id=node, num_tokens=NUM_TOKENS))
    planned = [metadata.sequences[n].tokens_after for n in nodes]
    assert len(set().union(*planned)) == 3 * NUM_TOKENS
    for node in nodes:
        for step in (Step.START, Step.MID, Step.FINISH):
            metadata = apply_transformation(metadata, AdvanceSequence(node_id=node, step=step))
    ring = metadata.tokens.ring_tokens
    gaps = [(ring[i] - ring[i - 1]) % (1 << 64) for i in range(len(ring))]
    assert max(gaps) <= 2 * min(gaps), gaps


def test_with_a_keyspace_the_first_join_the_log_orders_locks_the_others_out() -> None:
    cluster = Cluster({"ks": RF2})
    a, b = cluster.register("A"), cluster.register("B")
    cluster.apply(PrepareJoin(node_id=a, num_tokens=NUM_TOKENS))
    with pytest.raises(Rejected) as refused:
        cluster.apply(PrepareJoin(node_id=b, num_tokens=NUM_TOKENS))
    assert refused.value.rule == "range_locked"
    assert f"locked by the join of {a}" in refused.value.message
    assert decide(cluster.md, b).action is Action.JOIN  # it tries again once the lock is gone
