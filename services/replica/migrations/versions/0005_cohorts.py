"""Cohorts (epochal.mtrack.cohorts): per keyspace, the cohorts this replica holds — formed with
it as a member, or delivered to it when it returned — and the partitions a member's folds
reached (kept apart: a cohort's delivery sends those partitions whole); and an index of the
tombstones, which the purge looks for.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cohorts",
        sa.Column("keyspace", sa.String(64), primary_key=True),
        sa.Column("cohort_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("range_left", sa.BigInteger, nullable=False),
        sa.Column("range_right", sa.BigInteger, nullable=False),
        sa.Column("members", sa.String(4096), nullable=False),
        sa.Column("low", sa.BigInteger, nullable=False),
        sa.Column("high", sa.BigInteger, nullable=False),
        sa.Column("folded_high", sa.BigInteger, nullable=False),
        sa.Column("mutations", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("formed_unix_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "cohort_partitions",
        sa.Column("cohort_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("table_id", sa.String(64), primary_key=True),
        sa.Column("token", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("pkey", sa.LargeBinary, primary_key=True),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_cells_tombstones",
        "cells",
        ["table_id", "token"],
        sqlite_where=sa.text("tombstone = 1"),
    )


def downgrade() -> None:
    op.drop_index("ix_cells_tombstones", "cells")
    op.drop_table("cohort_partitions")
    op.drop_table("cohorts")
