"""The replica's first schema: node state, coordinator logs, the applied metadata log,
cells, and the addressable mutation log.

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
        "node_state",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("register_entry_id", sa.String(128), nullable=False),
        sa.Column("hlc_ceiling", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "coordinator_logs",
        sa.Column("log", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("keyspace", sa.String(64), nullable=False),
        sa.Column("keyspace_epoch", sa.BigInteger, nullable=False),
        sa.Column("range_left", sa.BigInteger, nullable=False),
        sa.Column("range_right", sa.BigInteger, nullable=False),
        sa.Column("opened_epoch", sa.BigInteger, nullable=False),
        sa.Column("sealed", sa.Boolean, nullable=False),
        sa.Column("sequence_ceiling", sa.BigInteger, nullable=False),
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
        "cells",
        sa.Column("table_id", sa.String(64), primary_key=True),
        sa.Column("token", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("pkey", sa.LargeBinary, primary_key=True),
        sa.Column("ckey", sa.LargeBinary, primary_key=True),
        sa.Column("col", sa.String(64), primary_key=True),
        sa.Column("value", sa.LargeBinary, nullable=True),
        sa.Column("hlc", sa.BigInteger, nullable=False),
        sa.Column("writer", sa.LargeBinary, nullable=False),
        sa.Column("tombstone", sa.Boolean, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "mutations",
        sa.Column("node", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("log", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("hlc", sa.BigInteger, nullable=False),
        sa.Column("keyspace", sa.String(64), nullable=False),
        sa.Column("table_id", sa.String(64), nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("pkey", sa.LargeBinary, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_mutations_by_token", "mutations", ["keyspace", "token", "table_id", "pkey", "hlc"]
    )
    op.execute(
        "INSERT INTO node_state (id, node_id, register_entry_id, hlc_ceiling) VALUES (1, '', '', 0)"
    )


def downgrade() -> None:
    for table in (
        "mutations",
        "cells",
        "metadata_snapshots",
        "metadata_log",
        "coordinator_logs",
        "node_state",
    ):
        op.drop_table(table)
