"""The metadata log as applied here, written lazily (the CMS holds it durably): what the
follower replays at start (``epochal.runtime.follower.MetadataStore``) and serves to peers."""

from __future__ import annotations

from collections.abc import Sequence

from epochal.replica.database import ReplicaDatabase
from epochal.runtime.database import transaction
from epochal.runtime.follower import MetadataEntry, StoredMetadata


class AppliedMetadata:
    def __init__(self, db: ReplicaDatabase) -> None:
        self._db = db

    def stored_metadata(self) -> StoredMetadata:
        snapshot = self._db.query_one(
            "SELECT epoch, metadata FROM metadata_snapshots ORDER BY epoch DESC LIMIT 1"
        )
        since = snapshot[0] if snapshot else 0
        entries = self.metadata_entries(since, None)
        if snapshot is None:
            return StoredMetadata(0, None, entries)
        return StoredMetadata(snapshot[0], snapshot[1], entries)

    def metadata_entries(self, since: int, limit: int | None) -> list[MetadataEntry]:
        sql = "SELECT epoch, entry_id, transformation FROM metadata_log WHERE epoch > ? "
        sql += "ORDER BY epoch" + ("" if limit is None else f" LIMIT {int(limit)}")
        return [MetadataEntry(*row) for row in self._db.query(sql, (since,))]

    def oldest_metadata_epoch(self) -> int:
        row = self._db.query_one("SELECT MIN(epoch) FROM metadata_log")
        return int(row[0] or 0) if row else 0

    def save_metadata(
        self,
        entries: Sequence[MetadataEntry],
        *,
        snapshot: tuple[int, bytes] | None = None,
        forget_below: int | None = None,
    ) -> None:
        """Lazily: applied entries, a snapshot of the metadata, and what may be forgotten."""
        with transaction(self._db.lazy_raw) as cursor:
            cursor.executemany(
                "INSERT INTO metadata_log (epoch, entry_id, transformation) VALUES (?, ?, ?) "
                "ON CONFLICT (epoch) DO NOTHING",
                [(e.epoch, e.entry_id, e.transformation) for e in entries],
            )
            if snapshot is not None:
                cursor.execute(
                    "INSERT INTO metadata_snapshots (epoch, metadata) VALUES (?, ?) "
                    "ON CONFLICT (epoch) DO NOTHING",
                    snapshot,
                )
                cursor.execute("DELETE FROM metadata_snapshots WHERE epoch < ?", (snapshot[0],))
            if forget_below is not None:
                cursor.execute("DELETE FROM metadata_log WHERE epoch < ?", (forget_below,))
