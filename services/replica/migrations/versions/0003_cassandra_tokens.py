"""Storage format 2: every stored token is Cassandra's token of the partition key.

Tokens used to be Murmur3 of the order-preserving key encoding; they are now Murmur3 of
Cassandra's serialization of the key (epochal.tcm.keys.partition_token). The tables do not
change, but the tokens in ``cells`` and ``mutations`` (and the ranges derived from them) do, and
they cannot be recomputed here: a stored key's column types live in the cluster's schema, not
in this database. So this revision is a marker: a database at an earlier revision is refused at
start (``ReplicaDatabase`` checks before migrating) instead of being upgraded through it.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to change in the tables; reaching this revision is the format's mark."""


def downgrade() -> None:
    """Nothing to undo: the mark goes with the revision."""
