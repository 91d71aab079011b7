"""The reconciler's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, String, Table

metadata = MetaData()

# Who this reconciler is: exactly one row.
identity = Table(
    "identity",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("reconciler_id", String(256), nullable=False),
)

# The metadata log as applied here (lazily: the CMS holds it), and snapshots of the metadata.
metadata_log = Table(
    "metadata_log",
    metadata,
    Column("epoch", BigInteger, primary_key=True, autoincrement=False),
    Column("entry_id", String(128), nullable=False),
    Column("transformation", LargeBinary, nullable=False),
)
metadata_snapshots = Table(
    "metadata_snapshots",
    metadata,
    Column("epoch", BigInteger, primary_key=True, autoincrement=False),
    Column("metadata", LargeBinary, nullable=False),
)

# Per range this reconciler worked: where its last round left it (a restart continues there).
ranges = Table(
    "ranges",
    metadata,
    Column("keyspace", String(64), primary_key=True),
    Column("range_left", BigInteger, primary_key=True, autoincrement=False),
    Column("range_right", BigInteger, primary_key=True, autoincrement=False),
    Column("lease_token", BigInteger, nullable=False),
    Column("low_bound", BigInteger, nullable=False),
    Column("rounds", BigInteger, nullable=False),
    Column("delivered", BigInteger, nullable=False),
    Column("last_outcome", String(64), nullable=False),
    Column("last_round_unix_ms", BigInteger, nullable=False),
)

# Every round: which range, under which lease token, when (wall-clock ms), and how it ended —
# the record that two reconcilers never worked one range at once. The oldest are forgotten.
rounds = Table(
    "rounds",
    metadata,
    Column("round", Integer, primary_key=True, autoincrement=True),
    Column("keyspace", String(64), nullable=False),
    Column("range_left", BigInteger, nullable=False),
    Column("range_right", BigInteger, nullable=False),
    Column("lease_token", BigInteger, nullable=False),
    Column("started_unix_ms", BigInteger, nullable=False),
    Column("ended_unix_ms", BigInteger, nullable=False),
    Column("acted_unix_ms", BigInteger, nullable=False),
    Column("reconciliation_time", BigInteger, nullable=False),
    Column("delivered", BigInteger, nullable=False),
    Column("outcome", String(64), nullable=False),
)
