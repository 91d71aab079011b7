"""Cohorts (epochal.mtrack.cohorts): per keyspace, the cohorts this replica holds — formed with
it as a member, or delivered to it when it returned — and, on each cell a member's fold reached,
the cohort whose data it is (kept apart: a cohort's delivery sends exactly its cells).

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
        sa.Column("mutations", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("formed_unix_ms", sa.BigInteger, nullable=False),
    )
    # (ALTER TABLE ADD COLUMN: the table stays WITHOUT ROWID, nothing is copied)
    op.add_column("cells", sa.Column("cohort", sa.BigInteger, nullable=True))
    op.create_index(
        "ix_cells_by_cohort",
        "cells",
        ["cohort", "table_id", "token", "pkey", "ckey", "col"],
        sqlite_where=sa.text("cohort IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_cells_by_cohort", "cells")
    op.drop_column("cells", "cohort")
    op.drop_table("cohorts")
