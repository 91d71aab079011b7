"""Stream progress: where each range stream of a topology operation stopped.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stream_progress",
        sa.Column("operation", sa.String(128), primary_key=True),
        sa.Column("table_id", sa.String(64), primary_key=True),
        sa.Column("range_left", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("range_right", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("cursor", sa.LargeBinary, nullable=False),
        sa.Column("done", sa.Boolean, nullable=False),
        sa.Column("cells", sa.BigInteger, nullable=False),
        sa.Column("mutations", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("stream_progress")
