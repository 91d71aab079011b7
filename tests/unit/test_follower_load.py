"""A follower starting on what it stored (libs/runtime/follower.py ``load``) replays only what it
can read: an entry of a kind this version does not know, or an unreadable snapshot, ends the
replay there — the follower then fetches that part of the log again and, meeting the entry,
stops applying and says so — instead of failing the start of the node on every restart."""

from __future__ import annotations

from collections.abc import Sequence

from epochal.runtime.follower import (
    FollowerMetrics,
    FollowerSettings,
    MetadataEntry,
    MetadataFollower,
    StoredMetadata,
)
from epochal.tcm import ClusterMetadata, CMSMember, InitializeCMS, TriggerSnapshot
from epochal.telemetry.metrics import Metrics
from epochal.wire.metadata import encode_transformation

UNKNOWN_KIND = b"\x9a\x06\x02\x08\x01"  # a Transformation whose one field this version lacks
ENTRIES = [
    MetadataEntry(1, "init", encode_transformation(InitializeCMS(members=(CMSMember("c", "a"),)))),
    MetadataEntry(2, "snap", encode_transformation(TriggerSnapshot())),
]


class Stored:
    def __init__(self, stored: StoredMetadata) -> None:
        self.stored = stored

    def stored_metadata(self) -> StoredMetadata:
        return self.stored

    def save_metadata(
        self,
        entries: Sequence[MetadataEntry],
        *,
        snapshot: tuple[int, bytes] | None,
        forget_below: int | None,
    ) -> None:
        raise AssertionError("loading writes nothing")


def follower(stored: StoredMetadata) -> MetadataFollower:
    settings = FollowerSettings(
        cms=("127.0.0.1:1",),
        address="127.0.0.1:2",
        pull_interval_ms=1000,
        pull_backoff_max_ms=1000,
        metadata_snapshot_interval=100,
        metadata_log_retention=100,
    )
    return MetadataFollower(
        settings,
        Stored(stored),
        None,
        FollowerMetrics(Metrics()),
        service="test",  # type: ignore[arg-type]
    )


def test_an_entry_of_an_unknown_kind_ends_the_replay_before_it() -> None:
    unknown = MetadataEntry(3, "newer", UNKNOWN_KIND)
    after = MetadataEntry(4, "later", encode_transformation(TriggerSnapshot()))
    node = follower(StoredMetadata(0, None, [*ENTRIES, unknown, after]))
    node.load()
    assert node.epoch == 2 and not node.stopped_reason


def test_an_unreadable_snapshot_starts_from_nothing() -> None:
    node = follower(StoredMetadata(5, b"\xff\xff not a snapshot", ENTRIES))
    node.load()
    assert node.metadata == ClusterMetadata.empty()
