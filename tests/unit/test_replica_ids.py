"""Claims of ``MutationIds`` with real storage and a fake clock: one log per (keyspace, range of
the placement), dense unique sequences per log, logs sealed when ranges split or merge, and no
(log, sequence) and no HLC issued twice across restarts, even when the clock goes backwards.

Placements come from nodes joining and leaving through the real transformations
(``Cluster`` of the seed tables: keyspace ``ks`` at RF 2).
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.mtrack import ClockSkew, MutationId, make_hlc
from epochal.replica.ids import MutationIds
from epochal.replica.storage import ReplicaStorage
from epochal.tcm import (
    AdvanceSequence,
    ClusterMetadata,
    CreateKeyspace,
    DropKeyspace,
    PrepareJoin,
    PrepareLeave,
    Step,
    apply_transformation,
)
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange

from .seed_ring import RF2, Cluster

STEPS = (Step.START, Step.MID, Step.FINISH)
START_MS = 1_700_000_000_000


@dataclass
class FakeClock:
    now_ms: int = START_MS

    def __call__(self) -> int:
        return self.now_ms


@dataclass(frozen=True)
class Topology:
    """The metadata of one ring at each stage of X joining at 150 and leaving again."""

    base: ClusterMetadata  # A=100, B=200, C=300: (300, 100], (100, 200], (200, 300]
    split: ClusterMetadata  # X's join prepared: (100, 200] split at 150
    merged: ClusterMetadata  # X joined and left again: (100, 200] merged back


def topology() -> Topology:
    cluster = Cluster()
    cluster.apply(CreateKeyspace(name="other", replication=RF2))
    for name, token in (("A", 100), ("B", 200), ("C", 300)):
        cluster.join(name, token)
    base = cluster.md
    x = cluster.register("X")
    cluster.apply(PrepareJoin(node_id=x, tokens=(150,)))
    split = cluster.md
    for step in STEPS:
        cluster.apply(AdvanceSequence(node_id=x, step=step))
    cluster.apply(PrepareLeave(node_id=x))
    for step in STEPS:
        cluster.apply(AdvanceSequence(node_id=x, step=step))
    return Topology(base, split, cluster.md)


TOPOLOGY = topology()


def ranges_of(metadata: ClusterMetadata) -> list[str]:
    return [str(r) for r, _, _ in metadata.placements[RF2].ranges()]


def test_the_topology_splits_and_merges_the_range_around_150():
    assert ranges_of(TOPOLOGY.base) == ["(300, 100]", "(100, 200]", "(200, 300]"]
    assert ranges_of(TOPOLOGY.split) == ["(300, 100]", "(100, 150]", "(150, 200]", "(200, 300]"]
    assert ranges_of(TOPOLOGY.merged) == ranges_of(TOPOLOGY.base)


@pytest.fixture
def storage(tmp_path) -> Iterator[ReplicaStorage]:
    opened = ReplicaStorage(f"sqlite:///{tmp_path}/replica.db")
    yield opened
    opened.close()


def issuer(storage: ReplicaStorage, clock: FakeClock, **changes: int) -> MutationIds:
    options = {"max_skew_ms": 1000, "hlc_reserve_ms": 5, "sequence_block": 3} | changes
    return MutationIds(7, storage, clock_ms=clock, **options)  # type: ignore[arg-type]


def issue(ids: MutationIds, metadata: ClusterMetadata, token: int, keyspace: str = "ks"):
    return ids.next_id(metadata, metadata.keyspaces[keyspace], token)


def logs(storage: ReplicaStorage) -> dict[int, tuple[str, str, bool]]:
    """log -> (keyspace, range, sealed), as stored."""
    return {
        row.log: (row.keyspace, str(TokenRange(row.range_left, row.range_right)), row.sealed)
        for row in storage.identity.coordinator_logs()
    }


def test_one_log_per_keyspace_and_range_with_dense_sequences_and_rising_hlcs(storage):
    ids = issuer(storage, FakeClock())
    md = TOPOLOGY.base
    tokens = [150, 120, 250, 50, 301, MIN_TOKEN, MAX_TOKEN, 100, 101, 200, 300, 150, 7]
    issued = [(token, issue(ids, md, token)) for token in tokens]
    issued += [(token, issue(ids, md, token, "other")) for token in (150, 50)]
    assert all(mid.node == 7 for _, mid in issued)
    hlcs = [mid.hlc for _, mid in issued]
    assert hlcs == sorted(set(hlcs))  # the clock stood still: the logical part counts up
    # Naive model: the log is named by (keyspace, the range holding the token).
    by_log: dict[int, list[int]] = defaultdict(list)
    for _, mid in issued:
        by_log[mid.log].append(mid.sequence)
    assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in by_log.values())
    rows = {row.log: row for row in storage.identity.coordinator_logs()}
    logs_by_place = {}
    for (token, mid), keyspace in zip(issued, ["ks"] * len(tokens) + ["other"] * 2, strict=True):
        row = rows[mid.log]
        assert TokenRange(row.range_left, row.range_right).contains(token)
        assert row.keyspace == keyspace and not row.sealed
        place = (keyspace, row.range_left, row.range_right)
        assert logs_by_place.setdefault(place, mid.log) == mid.log
    assert len(rows) == len(logs_by_place) == 3 + 2 == ids.open_logs
    for log, seqs in by_log.items():
        assert rows[log].sequence_ceiling > max(seqs)  # reserved on disk before use
        assert rows[log].opened_epoch == md.epoch
        assert rows[log].keyspace_epoch == md.keyspaces[rows[log].keyspace].created_epoch
    assert storage.identity.node_state().hlc_ceiling > max(hlcs)


def test_a_split_opens_logs_for_the_new_ranges_and_seals_the_old_one_and_a_merge_seals_both(
    storage,
):
    ids = issuer(storage, FakeClock())
    assert issue(ids, TOPOLOGY.base, 150).log == 1  # (100, 200]
    assert issue(ids, TOPOLOGY.base, 50).log == 2  # (300, 100]
    assert issue(ids, TOPOLOGY.base, 150, "other").log == 3  # (100, 200] of another keyspace
    assert issue(ids, TOPOLOGY.split, 120).log == 4  # (100, 150]
    assert issue(ids, TOPOLOGY.split, 170).log == 5  # (150, 200]
    untouched = issue(ids, TOPOLOGY.split, 50)
    assert (untouched.log, untouched.sequence) == (2, 2)
    assert logs(storage) == {
        1: ("ks", "(100, 200]", True),
        2: ("ks", "(300, 100]", False),
        3: ("other", "(100, 200]", False),
        4: ("ks", "(100, 150]", False),
        5: ("ks", "(150, 200]", False),
    }
    merged = issue(ids, TOPOLOGY.merged, 199)
    assert (merged.log, merged.sequence) == (6, 1)
    assert logs(storage)[4][2] and logs(storage)[5][2]  # both halves sealed
    assert not logs(storage)[3][2]  # another keyspace's logs are its own
    assert ids.open_logs == 3
    restarted = issuer(storage, FakeClock())
    assert restarted.open_logs == 3  # sealed logs stay sealed
    again = issue(restarted, TOPOLOGY.merged, 120)
    assert again.log == 6 and again.sequence > merged.sequence


def test_a_keyspace_dropped_and_created_again_seals_all_the_old_keyspaces_logs(storage):
    ids = issuer(storage, FakeClock())
    for token in (50, 150, 250):
        issue(ids, TOPOLOGY.base, token)
    issue(ids, TOPOLOGY.base, 250, "other")
    dropped = apply_transformation(TOPOLOGY.base, DropKeyspace(name="ks"))
    recreated = apply_transformation(dropped, CreateKeyspace(name="ks", replication=RF2))
    fresh = issue(ids, recreated, 250)
    assert fresh.log == 5 and fresh.sequence == 1
    assert {log: sealed for log, (_, _, sealed) in logs(storage).items()} == {
        1: True,
        2: True,
        3: True,
        4: False,
        5: False,
    }


def test_observing_a_remote_hlc_moves_the_next_one_past_it_unless_it_is_too_far_ahead(storage):
    clock = FakeClock()
    ids = issuer(storage, clock, max_skew_ms=1000)
    remote = make_hlc(START_MS + 900, 5)
    ids.observe(remote)
    assert issue(ids, TOPOLOGY.base, 150).hlc > remote
    ids.observe(0)  # nothing seen: ignored
    with pytest.raises(ClockSkew):
        ids.observe(make_hlc(START_MS + 1001))


# --------------------------------------------------------------------------- restarts

operations = st.lists(
    st.one_of(
        st.tuples(st.just("issue"), st.sampled_from([50, 120, 170, 250, 100, 200])),
        st.tuples(st.just("clock"), st.integers(-3_600_000, 50)),
        st.tuples(st.just("restart"), st.integers(-3_600_000, 0)),
        st.tuples(st.just("advance"), st.just(0)),
    ),
    max_size=40,
)


@settings(deadline=None, max_examples=40)
@given(operations, st.integers(1, 4), st.integers(1, 3))
def test_no_id_and_no_hlc_is_issued_twice_across_restarts_whatever_the_clock_does(
    ops, sequence_block, hlc_reserve_ms
):
    stages = [TOPOLOGY.base, TOPOLOGY.split, TOPOLOGY.merged]
    stage = 0
    clock = FakeClock()
    options = {"sequence_block": sequence_block, "hlc_reserve_ms": hlc_reserve_ms}
    issued: list[MutationId] = []
    with tempfile.TemporaryDirectory() as directory:
        storage = ReplicaStorage(f"sqlite:///{directory}/replica.db")
        ids = issuer(storage, clock, **options)
        lifetime: dict[int, list[int]] = defaultdict(list)  # log -> sequences since the start
        for op, argument in ops:
            if op == "issue":
                mid = issue(ids, stages[stage], argument)
                # Durable before use: what a crash right now would restart from covers it.
                ceilings = {
                    row.log: row.sequence_ceiling for row in storage.identity.coordinator_logs()
                }
                assert ceilings[mid.log] > mid.sequence
                assert storage.identity.node_state().hlc_ceiling > mid.hlc
                issued.append(mid)
                lifetime[mid.log].append(mid.sequence)
            elif op == "clock":
                clock.now_ms += argument
            elif op == "advance":
                stage = min(stage + 1, len(stages) - 1)
            else:
                storage.close()
                clock.now_ms += argument  # the machine may come back with its clock behind
                storage = ReplicaStorage(storage.url)
                ids = issuer(storage, clock, **options)
                lifetime.clear()
            # Within one lifetime, each log's sequences are dense (a reopened log resumes
            # at its ceiling, leaving a hole below it).
            for seqs in lifetime.values():
                assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        storage.close()
    assert len({mid.key[1:] for mid in issued}) == len(issued)
    hlcs = [mid.hlc for mid in issued]
    assert hlcs == sorted(set(hlcs))  # unique, and in fact rising across restarts


def test_only_ids_this_node_issued_could_have_been_issued_by_it(storage):
    """A client's retry names an id a coordinator gave out: this node checks its own."""
    ids = issuer(storage, FakeClock())
    md = TOPOLOGY.base
    first = issue(ids, md, 150)
    later = issue(ids, md, 150)
    assert ids.could_have_issued(first) and ids.could_have_issued(later)
    past_end = MutationId(node=7, log=first.log, sequence=later.sequence + 1, hlc=first.hlc)
    assert not ids.could_have_issued(past_end)
    assert not ids.could_have_issued(MutationId(node=7, log=99, sequence=1, hlc=first.hlc))
    sealed = issue(ids, TOPOLOGY.split, 150)  # a new range: the first log is sealed
    assert sealed.log != first.log
    assert ids.could_have_issued(MutationId(node=7, log=first.log, sequence=9, hlc=1))
    with pytest.raises(ValueError, match="another node"):
        ids.could_have_issued(MutationId(node=8, log=1, sequence=1, hlc=1))
