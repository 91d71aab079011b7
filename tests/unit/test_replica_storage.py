"""Claims of ``ReplicaStorage`` on a real SQLite file: what is written reads back as the model's
merge of it, re-delivery is harmless, ids are found by partition and by (wrapping) range, and
identity, coordinator logs and applied metadata survive a reopen.

Property tests share one database per test (building one runs the migrations); each example
writes its own partition, keyspace and log numbers so that examples cannot see each other.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochal.mtrack import MutationId
from epochal.replica.codec import mutation_to_proto
from epochal.replica.data_store import CellRepair, OwnedRanges, Stored
from epochal.replica.identity_store import LogRow, NodeStateRow
from epochal.replica.model import PARTITION_DELETION, Cell, Mutation, RowWrite, merge
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_values import (
    DONE,
    CellPosition,
    Phase,
    StreamCursor,
    StreamProgress,
)
from epochal.runtime.follower import MetadataEntry, StoredMetadata
from epochal.tcm.keys import EVERYTHING, KeyBounds
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange

from .mutation_histories import bounds_strategy, cells_of, histories

SHARED_DATABASE = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=60
)


@pytest.fixture
def storage(tmp_path) -> Iterator[ReplicaStorage]:
    opened = ReplicaStorage(f"sqlite:///{tmp_path}/replica.db")
    yield opened
    opened.close()


def reopen(storage: ReplicaStorage) -> ReplicaStorage:
    storage.close()
    return ReplicaStorage(storage.url)


def by_slot(cells: list[Cell]) -> dict[tuple[bytes, str], Cell]:
    slots = {(c.clustering, c.column): c for c in cells}
    assert len(slots) == len(cells), "storage holds one cell per (clustering, column)"
    return slots


def stored_mutation(
    sequence: int, *, log: int = 1, hlc: int = 10, token: int = 0, pkey: bytes = b"p", **changes
) -> Mutation:
    fields = {
        "id": MutationId(node=1, log=log, sequence=sequence, hlc=hlc),
        "keyspace": "ks",
        "table_id": "t1",
        "token": token,
        "partition_key": pkey,
        "rows": (RowWrite(b"\x01a", (("a", b"x"),)),),
        "tracked": True,
    } | changes
    return Mutation(**fields)


def body(mutation: Mutation) -> bytes:
    return mutation_to_proto(mutation).SerializeToString()


# --------------------------------------------------------------------------- cells

_examples = itertools.count(1)


@st.composite
def deliveries(draw):
    """A history made this example's own (partition, log), each mutation tracked or not, then
    delivered in batches in a random order, some of them more than once."""
    n = next(_examples)
    history = [
        dataclasses.replace(
            m,
            id=dataclasses.replace(m.id, log=n),
            partition_key=f"p{n}".encode(),
            token=n,
            tracked=draw(st.booleans()),
        )
        for m in draw(histories())
    ]
    again = draw(st.lists(st.sampled_from(history), max_size=len(history)))
    order = draw(st.permutations(history + again))
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=3)))
    batches = [order[a:b] for a, b in itertools.pairwise([0, *cuts, len(order)])]
    return history, [batch for batch in batches if batch]


@SHARED_DATABASE
@given(case=deliveries(), bounds=bounds_strategy)
def test_what_was_written_reads_back_as_the_models_merge_of_it(storage, case, bounds):
    history, batches = case
    seen: set[MutationId] = set()
    for batch in batches:
        expected = []
        for m in batch:
            expected.append(Stored.NEW if not m.tracked or m.id not in seen else Stored.HELD)
            seen.add(m.id)
        assert storage.data.write([(m, body(m)) for m in batch]) == expected
    first = history[0]
    merged = merge(cells_of(*history))
    everything = storage.data.read_cells(
        first.table_id, first.token, first.partition_key, EVERYTHING
    )
    assert by_slot(everything) == merged
    sliced = storage.data.read_cells(first.table_id, first.token, first.partition_key, bounds)
    assert by_slot(sliced) == {
        slot: cell
        for slot, cell in merged.items()
        if bounds.contains(slot[0]) or slot == (b"", PARTITION_DELETION)
    }


def test_one_id_names_one_mutation_another_content_under_it_is_not_stored(storage):
    first = stored_mutation(1)
    other = dataclasses.replace(first, rows=(RowWrite(b"\x01a", (("a", b"forged"),)),))
    later = dataclasses.replace(first, id=dataclasses.replace(first.id, hlc=99))
    assert storage.data.write([(first, body(first))]) == [Stored.NEW]
    assert storage.data.write([(other, body(other)), (later, body(later))]) == [
        Stored.CONFLICT,
        Stored.CONFLICT,
    ]
    assert storage.data.read_cells("t1", 0, b"p", EVERYTHING) == first.cells()
    assert storage.data.write([(first, body(first))]) == [Stored.HELD]


def test_a_tracked_mutation_is_stored_once_and_an_untracked_one_rewrites_the_same_cells(storage):
    tracked = stored_mutation(1)
    untracked = stored_mutation(2, tracked=False, pkey=b"q")
    new, held = Stored.NEW, Stored.HELD
    assert storage.data.write([(tracked, body(tracked)), (tracked, body(tracked))]) == [new, held]
    assert storage.data.write([(tracked, body(tracked))]) == [held]
    assert storage.data.write([(untracked, body(untracked))] * 2) == [new, new]
    assert storage.data.range_ids("ks", 0, 0) == [tracked.id]  # (0, 0]: the whole ring
    assert storage.data.read_cells("t1", 0, b"q", EVERYTHING) == untracked.cells()


def test_the_partition_deletion_is_returned_whatever_the_bounds(storage):
    deletion = stored_mutation(1, rows=(), partition_deleted=True, tracked=False)
    row = stored_mutation(2, hlc=20, tracked=False)
    storage.data.write([(deletion, b""), (row, b"")])
    (tombstone,) = deletion.cells()
    for bounds in (KeyBounds(b"\x01b"), KeyBounds(b"\x01a", b"\x01a"), KeyBounds(b"\xff", None)):
        assert storage.data.read_cells("t1", 0, b"p", bounds) == [tombstone]


def test_a_cell_repair_wins_or_loses_by_its_own_timestamp(storage):
    m = stored_mutation(1, hlc=20, tracked=False)
    storage.data.write([(m, b"")])
    marker, cell = m.cells()
    older = dataclasses.replace(cell, value=b"old", hlc=10)
    newer = dataclasses.replace(cell, value=b"new", hlc=30)
    storage.data.write([], [CellRepair("t1", 0, b"p", (older,))])
    assert storage.data.read_cells("t1", 0, b"p", EVERYTHING) == [marker, cell]
    storage.data.write([], [CellRepair("t1", 0, b"p", (newer,))])
    assert storage.data.read_cells("t1", 0, b"p", EVERYTHING) == [marker, newer]


def test_a_batch_that_fails_part_way_leaves_nothing_behind(storage):
    good = stored_mutation(1)
    # SQLite integers are signed 64-bit: a token of 2^63 cannot be stored (mutation ids refuse
    # such numbers when they are built; this one is planted past every check).
    unstorable = stored_mutation(2, token=2**63, pkey=b"other")
    with pytest.raises(OverflowError):
        storage.data.write([(good, body(good)), (unstorable, b"")])
    assert storage.data.range_ids("ks", 0, 0) == []
    assert storage.data.read_cells("t1", 0, b"p", EVERYTHING) == []
    assert storage.data.write([(good, body(good))]) == [Stored.NEW]


# --------------------------------------------------------------------------- ids and bodies


def test_partition_ids_are_the_tracked_ids_of_that_partition_from_the_low_bound(storage):
    mine = [stored_mutation(s, hlc=10 * s) for s in (1, 2, 3)]
    others = [
        stored_mutation(4, pkey=b"other"),
        stored_mutation(5, table_id="t2"),
        stored_mutation(6, keyspace="ks2"),
        stored_mutation(7, token=1),
        stored_mutation(8, tracked=False),
    ]
    storage.data.write([(m, body(m)) for m in mine + others])
    assert sorted(storage.data.partition_ids("ks", "t1", 0, b"p")) == [m.id for m in mine]
    assert sorted(storage.data.partition_ids("ks", "t1", 0, b"p", low_bound=20)) == [
        m.id for m in mine[1:]
    ]
    assert storage.data.partition_ids("ks", "t1", 0, b"p", low_bound=31) == []


TOKENS = st.sampled_from(
    [MIN_TOKEN, MIN_TOKEN + 1, -1, 0, 1, MAX_TOKEN - 1, MAX_TOKEN]
) | st.integers(MIN_TOKEN, MAX_TOKEN)


@SHARED_DATABASE
@given(
    tokens=st.lists(st.tuples(TOKENS, st.integers(0, 50)), min_size=1, max_size=12),
    left=TOKENS,
    right=TOKENS,
    low_bound=st.integers(0, 50),
    data=st.data(),
)
def test_range_ids_are_the_ids_whose_token_is_in_the_wrapping_range(
    storage, tokens, left, right, low_bound, data
):
    n = next(_examples)
    keyspace = f"ks{n}"
    # Bounds equal to stored tokens check (left, right] at both ends.
    left = data.draw(st.just(left) | st.sampled_from([t for t, _ in tokens]))
    right = data.draw(st.just(right) | st.sampled_from([t for t, _ in tokens]))
    written = [
        stored_mutation(s, log=n, hlc=hlc, token=token, keyspace=keyspace)
        for s, (token, hlc) in enumerate(tokens, start=1)
    ]
    storage.data.write([(m, body(m)) for m in written])
    expected = [
        m.id for m in written if TokenRange(left, right).contains(m.token) and m.id.hlc >= low_bound
    ]
    assert sorted(storage.data.range_ids(keyspace, left, right, low_bound)) == expected


def test_mutation_bodies_are_those_held_in_the_order_asked_whatever_hlc_the_id_carries(storage):
    a, b = stored_mutation(1), stored_mutation(2, hlc=20)
    storage.data.write([(a, b"body-a"), (b, b"body-b")])
    missing = MutationId(node=9, log=9, sequence=9, hlc=9)
    other_hlc = dataclasses.replace(a.id, hlc=999)
    assert storage.data.mutation_bodies([b.id, missing, other_hlc]) == [b"body-b", b"body-a"]
    assert storage.data.mutation_bodies([]) == []


# --------------------------------------------------------------------------- identity and logs


def test_node_state_starts_empty_and_survives_a_reopen(storage):
    assert storage.identity.node_state() == NodeStateRow("", "", 0)
    storage.identity.set_node_id("node-3")
    storage.identity.set_register_entry_id("register-abc")
    storage.identity.set_hlc_ceiling(12345)
    reopened = reopen(storage)
    assert reopened.identity.node_state() == NodeStateRow("node-3", "register-abc", 12345)
    reopened.close()


def test_opening_a_log_seals_the_logs_it_replaces_and_everything_survives_a_reopen(storage):
    first = LogRow(1, "ks", 3, MIN_TOKEN, 0, 5, False, 0)
    second = LogRow(2, "ks", 3, 0, MIN_TOKEN, 5, False, 0)
    storage.identity.open_log(first, [])
    storage.identity.open_log(second, [])
    storage.identity.set_sequence_ceiling(1, 1000)
    third = LogRow(3, "ks", 3, MIN_TOKEN, -5, 9, False, 0)
    storage.identity.open_log(third, [1])
    expected = [dataclasses.replace(first, sealed=True, sequence_ceiling=1000), second, third]
    assert storage.identity.coordinator_logs() == expected
    reopened = reopen(storage)
    assert reopened.identity.coordinator_logs() == expected
    reopened.close()


# --------------------------------------------------------------------------- applied metadata


def entry(epoch: int, tag: str = "") -> MetadataEntry:
    return MetadataEntry(epoch, f"entry-{epoch}{tag}", f"t{epoch}".encode())


def test_metadata_entries_are_kept_in_epoch_order_and_the_first_copy_of_an_epoch_wins(storage):
    assert storage.metadata.stored_metadata() == StoredMetadata(0, None, [])
    storage.metadata.save_metadata([entry(2), entry(1), entry(3)])
    storage.metadata.save_metadata([entry(2, "-again"), entry(4)])
    assert storage.metadata.metadata_entries(0, None) == [entry(1), entry(2), entry(3), entry(4)]
    assert storage.metadata.metadata_entries(1, 2) == [entry(2), entry(3)]
    assert storage.metadata.metadata_entries(4, None) == []
    assert storage.metadata.stored_metadata() == StoredMetadata(
        0, None, storage.metadata.metadata_entries(0, None)
    )
    assert storage.metadata.oldest_metadata_epoch() == 1


def test_a_snapshot_replaces_older_ones_and_forget_below_drops_older_entries(storage):
    storage.metadata.save_metadata(
        [entry(e) for e in range(1, 6)], snapshot=(3, b"md@3"), forget_below=3
    )
    assert storage.metadata.metadata_entries(0, None) == [entry(3), entry(4), entry(5)]
    assert storage.metadata.oldest_metadata_epoch() == 3
    assert storage.metadata.stored_metadata() == StoredMetadata(3, b"md@3", [entry(4), entry(5)])
    storage.metadata.save_metadata([entry(6)], snapshot=(5, b"md@5"))
    assert storage.metadata.stored_metadata() == StoredMetadata(5, b"md@5", [entry(6)])
    reopened = reopen(storage)
    assert reopened.metadata.stored_metadata() == StoredMetadata(5, b"md@5", [entry(6)])
    assert reopened.metadata.oldest_metadata_epoch() == 3  # no forget_below: entries 3..5 are kept
    reopened.close()


# --------------------------------------------------------------------------- streaming


def scan_all_cells(storage: ReplicaStorage, left: int, right: int, page: int) -> list[tuple]:
    rows, after = [], None
    while True:
        got = storage.streams.scan_cells("t1", left, right, after, page)
        rows.extend(got)
        if len(got) < page:
            return rows
        after = tuple(got[-1][:4])


def scan_all_mutations(storage: ReplicaStorage, left: int, right: int, page: int) -> list[tuple]:
    rows, after = [], None
    while True:
        got = storage.streams.scan_mutations("ks", "t1", left, right, after, page)
        rows.extend(got)
        if len(got) < page:
            return rows
        after = tuple(got[-1][:6])


@pytest.mark.parametrize("page", [1, 3, 1000])
def test_range_scans_page_through_a_range_once_in_key_order(
    storage: ReplicaStorage, page: int
) -> None:
    written = [
        stored_mutation(s, token=token, pkey=pkey, hlc=100 + s)
        for s, (token, pkey) in enumerate(
            itertools.product((-50, 0, 7, 10, 11, 90), (b"a", b"b")), start=1
        )
    ]
    storage.data.write([(m, body(m)) for m in written])
    cells = scan_all_cells(storage, 0, 10, page)  # (0, 10]: tokens 7 and 10
    keys = [c[:4] for c in cells]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert {c[0] for c in cells} == {7, 10}
    expected = [m for m in written if 0 < m.token <= 10]
    assert len(cells) == sum(len(m.cells()) for m in expected)
    logged = scan_all_mutations(storage, 0, 10, page)
    assert sorted(body_ for *_, body_ in logged) == sorted(body(m) for m in expected)


def test_an_ingested_stream_stores_each_mutation_once_with_its_cells_and_its_progress(
    storage: ReplicaStorage,
) -> None:
    first = stored_mutation(1)
    later = stored_mutation(2, hlc=20, rows=(RowWrite(b"\x01a", (("a", b"new"),)),))
    storage.data.write([(later, body(later))])  # arrived by a write before the stream brought it
    midway = StreamCursor(Phase.CELLS, CellPosition(0, b"p", b"\x01a", "a"))
    progress = StreamProgress(midway, 0, 2, 100)
    fresh = storage.streams.ingest(
        [], [(first, body(first)), (later, body(later))], "n@5", ("t1", -1, 1), progress
    )
    assert fresh == [True, False]
    assert storage.streams.stream_progress("n@5") == {("t1", -1, 1): progress}
    cells = by_slot(storage.data.read_cells("t1", 0, b"p", EVERYTHING))
    assert cells[(b"\x01a", "a")].value == b"new"  # the newer write still wins
    streamed_cell = Cell(b"\x01b", "a", b"old", 5, b"w" * 16, False)
    done = StreamProgress(DONE, 1, 2, 150)
    storage.streams.ingest([("t1", 0, b"p", streamed_cell)], [], "n@5", ("t1", -1, 1), done)
    assert (
        by_slot(storage.data.read_cells("t1", 0, b"p", EVERYTHING))[(b"\x01b", "a")].value == b"old"
    )
    assert reopen(storage).streams.stream_progress("n@5") == {("t1", -1, 1): done}


def test_cleanup_keeps_only_the_owned_ranges(storage: ReplicaStorage) -> None:
    written = [stored_mutation(s, token=t) for s, t in enumerate((-90, -10, 0, 10, 90), start=1)]
    storage.data.write([(m, body(m)) for m in written])
    removed = storage.data.cleanup([OwnedRanges("ks", ("t1",), ((-20, 0), (50, MAX_TOKEN)))])
    kept = {m.token for m in written if m.token in (-10, 0, 90)}
    assert {c[0] for c in scan_all_cells(storage, MIN_TOKEN, MAX_TOKEN, 100)} == kept
    assert {r[0] for r in scan_all_mutations(storage, MIN_TOKEN, MAX_TOKEN, 100)} == kept
    assert removed == 2 * len(written[0].cells()) + 2
    assert storage.data.cleanup([OwnedRanges("ks", ("t1",), ())]) > 0  # owning nothing: all goes
    assert not scan_all_cells(storage, MIN_TOKEN, MAX_TOKEN, 100)
