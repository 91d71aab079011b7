"""Durable state of a replica: one database (``database``) and the repositories over it, one per
part of the design — identity (``identity``), the applied metadata log (``metadata``), cells and
the mutation log (``data``), range streaming (``streams``), and the reconciliation marks
(``reconcile``)."""

from __future__ import annotations

from epochal.replica.data_store import DataStore
from epochal.replica.database import ReplicaDatabase
from epochal.replica.identity_store import IdentityStore
from epochal.replica.metadata_store import AppliedMetadata
from epochal.replica.reconcile_store import ReconcileStore
from epochal.replica.stream_store import StreamStore


class ReplicaStorage:
    def __init__(self, url: str, *, sync: str = "full", echo: bool = False) -> None:
        self.db = ReplicaDatabase(url, sync=sync, echo=echo)
        self.url = url
        self.identity = IdentityStore(self.db)
        self.metadata = AppliedMetadata(self.db)
        self.data = DataStore(self.db)
        self.streams = StreamStore(self.db)
        self.reconcile = ReconcileStore(self.db)

    def close(self) -> None:
        self.db.close()
