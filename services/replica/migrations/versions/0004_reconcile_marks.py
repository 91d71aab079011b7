"""Reconciliation marks: the fences, low bounds and highest lease tokens of each keyspace, as
pieces of token ranges (epochal.mtrack.marks).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reconcile_marks",
        sa.Column("keyspace", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("range_left", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("range_right", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("mark", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("reconcile_marks")
