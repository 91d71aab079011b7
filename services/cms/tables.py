"""The CMS member's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, String, Table

metadata = MetaData()

# The acceptor's promised ballot: exactly one row.
promise = Table(
    "paxos_promise",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("ballot_round", BigInteger, nullable=False),
    Column("ballot_node", String(128), nullable=False),
)

# Slots this acceptor accepted and has not applied yet (deleted once applied).
accepted_slots = Table(
    "paxos_accepted",
    metadata,
    Column("slot", BigInteger, primary_key=True, autoincrement=False),
    Column("ballot_round", BigInteger, nullable=False),
    Column("ballot_node", String(128), nullable=False),
    Column("value", LargeBinary, nullable=False),
)

# The metadata log: one row per epoch.
log_entries = Table(
    "metadata_log",
    metadata,
    Column("epoch", BigInteger, primary_key=True, autoincrement=False),
    Column("slot", BigInteger, nullable=False),
    Column("entry_id", String(128), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("transformation", LargeBinary, nullable=False),
)

# At-most-once: entry ids applied within the retention window.
entry_ids = Table(
    "entry_ids",
    metadata,
    Column("entry_id", String(128), primary_key=True),
    Column("epoch", BigInteger, nullable=False, index=True),
    Column("digest", BigInteger, nullable=False),
)

snapshots = Table(
    "metadata_snapshots",
    metadata,
    Column("epoch", BigInteger, primary_key=True, autoincrement=False),
    Column("slot", BigInteger, nullable=False),
    Column("metadata", LargeBinary, nullable=False),
)

member_state = Table(
    "member_state",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", BigInteger, nullable=False),
)
