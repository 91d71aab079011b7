"""The CMS member's first schema: acceptor state, the log, entry ids, snapshots.

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
        "paxos_promise",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ballot_round", sa.BigInteger, nullable=False),
        sa.Column("ballot_node", sa.String(128), nullable=False),
    )
    op.create_table(
        "paxos_accepted",
        sa.Column("slot", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("ballot_round", sa.BigInteger, nullable=False),
        sa.Column("ballot_node", sa.String(128), nullable=False),
        sa.Column("value", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "metadata_log",
        sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("slot", sa.BigInteger, nullable=False),
        sa.Column("entry_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("transformation", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "entry_ids",
        sa.Column("entry_id", sa.String(128), primary_key=True),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("digest", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_entry_ids_epoch", "entry_ids", ["epoch"])
    op.create_table(
        "metadata_snapshots",
        sa.Column("epoch", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("slot", sa.BigInteger, nullable=False),
        sa.Column("metadata", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "member_state",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.execute("INSERT INTO paxos_promise (id, ballot_round, ballot_node) VALUES (1, 0, '')")
    op.execute("INSERT INTO member_state (key, value) VALUES ('applied_slot', 0)")


def downgrade() -> None:
    for table in (
        "member_state",
        "metadata_snapshots",
        "entry_ids",
        "metadata_log",
        "paxos_accepted",
        "paxos_promise",
    ):
        op.drop_table(table)
