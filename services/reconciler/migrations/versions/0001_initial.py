"""The reconciler's first schema: identity, the applied metadata log, ranges and rounds.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "identity",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("reconciler_id", sa.String(256), nullable=False),
    )
    op.create_table(
        "metadata_log",
        sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("entry_id", sa.String(128), nullable=False),
        sa.Column("transformation", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "metadata_snapshots",
        sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("metadata", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "ranges",
        sa.Column("keyspace", sa.String(64), primary_key=True),
        sa.Column("range_left", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("range_right", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("lease_token", sa.BigInteger, nullable=False),
        sa.Column("low_bound", sa.BigInteger, nullable=False),
        sa.Column("rounds", sa.BigInteger, nullable=False),
        sa.Column("delivered", sa.BigInteger, nullable=False),
        sa.Column("last_outcome", sa.String(64), nullable=False),
        sa.Column("last_round_unix_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "rounds",
        sa.Column("round", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("keyspace", sa.String(64), nullable=False),
        sa.Column("range_left", sa.BigInteger, nullable=False),
        sa.Column("range_right", sa.BigInteger, nullable=False),
        sa.Column("lease_token", sa.BigInteger, nullable=False),
        sa.Column("started_unix_ms", sa.BigInteger, nullable=False),
        sa.Column("ended_unix_ms", sa.BigInteger, nullable=False),
        sa.Column("acted_unix_ms", sa.BigInteger, nullable=False),
        sa.Column("reconciliation_time", sa.BigInteger, nullable=False),
        sa.Column("delivered", sa.BigInteger, nullable=False),
        sa.Column("outcome", sa.String(64), nullable=False),
    )


def downgrade() -> None:
    for table in ("rounds", "ranges", "metadata_snapshots", "metadata_log", "identity"):
        op.drop_table(table)
