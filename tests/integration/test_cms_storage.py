"""CMS storage on SQLite and PostgreSQL: migrations, acceptor durability, atomic applied state."""

from __future__ import annotations

import sqlalchemy as sa

from epochal.cms.storage import AcceptedRow, CMSStorage, EntryIdRow, LogEntryRow, SnapshotRow


def entry(epoch: int, slot: int) -> LogEntryRow:
    return LogEntryRow(epoch, slot, f"id{epoch}", "create_table", b"t%d" % epoch)


def test_migrations_are_idempotent_and_a_fresh_store_is_empty(storage_backend) -> None:
    url, schema = storage_backend
    CMSStorage(url, schema=schema).close()
    storage = CMSStorage(url, schema=schema)  # upgrade head again: nothing to do
    state = storage.load()
    assert (state.promised, state.accepted, state.applied_slot) == (None, (), 0)
    assert (state.snapshot, state.entries, state.entry_ids) == (None, (), ())
    assert storage.latest_epoch() == 0 and storage.contiguous_prefix() == 0
    storage.close()


def test_acceptor_state_survives_reopening_and_a_higher_ballot_overwrites(storage_backend) -> None:
    url, schema = storage_backend
    storage = CMSStorage(url, schema=schema)
    storage.save_acceptor((3, "a"), [AcceptedRow(1, 3, "a", b"v1"), AcceptedRow(2, 3, "a", b"v2")])
    storage.save_acceptor((4, "b"), [AcceptedRow(2, 4, "b", b"v2b")])
    storage.close()
    state = CMSStorage(url, schema=schema).load()
    assert state.promised == (4, "b")
    assert state.accepted == (AcceptedRow(1, 3, "a", b"v1"), AcceptedRow(2, 4, "b", b"v2b"))


def test_applied_state_is_saved_atomically_and_read_back(storage_backend) -> None:
    url, schema = storage_backend
    storage = CMSStorage(url, schema=schema)
    storage.save_acceptor(None, [AcceptedRow(s, 1, "a", b"x") for s in (1, 2, 3)])
    storage.save_applied(
        applied_slot=1,
        entries=[entry(1, 1), entry(2, 1)],
        entry_ids=[EntryIdRow("id1", 1, -7), EntryIdRow("id2", 2, 9)],
        forget_accepted_up_to=1,
    )
    storage.save_applied(
        applied_slot=2,
        entries=[entry(3, 2)],
        entry_ids=[EntryIdRow("id3", 3, 1)],
        forget_entry_ids_below_epoch=2,
        snapshots=[SnapshotRow(3, 2, b"metadata@3")],
        forget_accepted_up_to=2,
    )
    storage.close()
    storage = CMSStorage(url, schema=schema)
    state = storage.load()
    assert state.applied_slot == 2
    assert [r.slot for r in state.accepted] == [3]
    assert state.snapshot == SnapshotRow(3, 2, b"metadata@3")
    assert state.entries == ()  # nothing after the snapshot
    assert [i.entry_id for i in state.entry_ids] == ["id2", "id3"]
    assert [e.epoch for e in storage.entries_since(0, 2)] == [1, 2]
    assert [e.epoch for e in storage.entries_since(2, 10)] == [3]
    assert storage.snapshot_epochs() == [3] and storage.latest_epoch() == 3
    assert storage.contiguous_prefix() == 3
    storage.close()


def test_install_keeps_the_prefix_and_the_gap_is_filled_later(storage_backend) -> None:
    url, schema = storage_backend
    storage = CMSStorage(url, schema=schema)
    storage.save_applied(applied_slot=1, entries=[entry(1, 1)], entry_ids=[])
    storage.install(
        snapshot=SnapshotRow(5, 4, b"metadata@5"),
        entries=[entry(6, 5)],
        entry_ids=[EntryIdRow("id6", 6, 0)],
        applied_slot=5,
    )
    assert storage.contiguous_prefix() == 1
    storage.insert_entries([entry(e, 2) for e in (2, 3, 4, 5)] + [entry(1, 1)])  # 1 is kept
    assert storage.contiguous_prefix() == 6
    state = storage.load()
    assert state.applied_slot == 5 and state.snapshot.epoch == 5
    assert [e.epoch for e in state.entries] == [6]
    storage.close()


def test_sqlite_runs_in_wal_mode_with_full_sync_for_votes(tmp_path) -> None:
    storage = CMSStorage(f"sqlite:///{tmp_path}/cms.db")
    with storage.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    # The vote connection fsyncs every commit (FULL = 2); the lazy one does not (OFF = 0).
    assert storage._conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
    assert storage._lazy_conn.exec_driver_sql("PRAGMA synchronous").scalar() == 0
    storage.close()


def test_each_postgres_member_keeps_to_its_own_schema(postgres_url: str, pg_schema) -> None:
    first, second = pg_schema(), pg_schema()
    a = CMSStorage(postgres_url, schema=first)
    b = CMSStorage(postgres_url, schema=second)
    a.save_applied(applied_slot=1, entries=[entry(1, 1)], entry_ids=[])
    assert b.latest_epoch() == 0 and a.latest_epoch() == 1
    a.close()
    b.close()
    engine = sa.create_engine(postgres_url)
    with engine.connect() as connection:
        public = connection.exec_driver_sql(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_name = 'metadata_log'"
        ).scalar()
    engine.dispose()
    assert public == 0
