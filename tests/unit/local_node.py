"""A replica's local side (``LocalReplica``) over real SQLite storage, following a metadata built
in the test (a ``seed_ring.Cluster``) as if it had applied it from the log: for the tests that
drive a replica's handlers without a process."""

from __future__ import annotations

from epochal.replica.local_replica import LocalReplica
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.settings import settings_from
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.follower import MetadataFollower
from epochal.wire.channels import Channels
from epochal.wire.log import LogClient

from .seed_ring import Cluster


def local_replica(storage: ReplicaStorage, made: Cluster, node: str = "A") -> LocalReplica:
    settings = settings_from(["--listen", "127.0.0.1:1", "--cms", "127.0.0.1:2"], {})
    metrics = ReplicaMetrics()
    follower = MetadataFollower(
        settings.follower,
        storage.metadata,
        LogClient(Channels()),
        metrics.follower,
        service="replica",
    )
    follower._set(made.md, ())  # the metadata as if applied from the log
    local = LocalReplica(settings, storage, follower, metrics)
    local.node_id = made.ids[node]
    return local
