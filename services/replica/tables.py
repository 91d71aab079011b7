"""The replica's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
)

metadata = MetaData()

# Who this node is: exactly one row.
node_state = Table(
    "node_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("node_id", String(64), nullable=False),  # "" until registered
    Column("register_entry_id", String(128), nullable=False),  # reused by a retried Register
    Column("hlc_ceiling", BigInteger, nullable=False),  # the HLC never reaches this unpersisted
)

# This node's coordinator logs: one per (keyspace, range) it coordinated writes for.
coordinator_logs = Table(
    "coordinator_logs",
    metadata,
    Column("log", BigInteger, primary_key=True, autoincrement=False),
    Column("keyspace", String(64), nullable=False),
    Column("keyspace_epoch", BigInteger, nullable=False),  # the keyspace's created_epoch
    Column("range_left", BigInteger, nullable=False),
    Column("range_right", BigInteger, nullable=False),
    Column("opened_epoch", BigInteger, nullable=False),
    Column("sealed", Boolean, nullable=False),
    Column("sequence_ceiling", BigInteger, nullable=False),
)

# The metadata log as applied here, and snapshots of the applied metadata.
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

# Data: one row per cell (see epochal.replica.model); last write wins by (hlc, writer,
# tombstone). ``token`` is Cassandra's token of the partition key (``partition_token`` in
# epochal.tcm.keys; storage format 2, revision 0003), ``pkey`` its order-preserving encoding.
cells = Table(
    "cells",
    metadata,
    Column("table_id", String(64), primary_key=True),
    Column("token", BigInteger, primary_key=True, autoincrement=False),
    Column("pkey", LargeBinary, primary_key=True),
    Column("ckey", LargeBinary, primary_key=True),
    Column("col", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=True),
    Column("hlc", BigInteger, nullable=False),
    Column("writer", LargeBinary, nullable=False),
    Column("tombstone", Boolean, nullable=False),
    sqlite_with_rowid=False,
)
Index(
    "ix_cells_tombstones",
    cells.c.table_id,
    cells.c.token,
    sqlite_where=cells.c.tombstone == True,  # noqa: E712  (SQL, not Python)
)

# The addressable mutation log of tracked keyspaces: by id, and partition -> ids and
# range -> ids through the covering index.
mutations = Table(
    "mutations",
    metadata,
    Column("node", BigInteger, primary_key=True, autoincrement=False),
    Column("log", BigInteger, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("hlc", BigInteger, nullable=False),
    Column("keyspace", String(64), nullable=False),
    Column("table_id", String(64), nullable=False),
    Column("token", BigInteger, nullable=False),
    Column("pkey", LargeBinary, nullable=False),
    Column("body", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)
Index(
    "ix_mutations_by_token",
    mutations.c.keyspace,
    mutations.c.token,
    mutations.c.table_id,
    mutations.c.pkey,
    mutations.c.hlc,
)

# Streams this node received for its topology operations: where each (table, range) stream
# stopped, updated in the transaction that stores what it brought, so a restarted stream
# continues after it.
stream_progress = Table(
    "stream_progress",
    metadata,
    Column("operation", String(128), primary_key=True),  # "<node id>@<prepared epoch>"
    Column("table_id", String(64), primary_key=True),
    Column("range_left", BigInteger, primary_key=True, autoincrement=False),
    Column("range_right", BigInteger, primary_key=True, autoincrement=False),
    Column("cursor", LargeBinary, nullable=False),  # epochal.replica.stream_encoding
    Column("done", Boolean, nullable=False),
    Column("cells", BigInteger, nullable=False),
    Column("mutations", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
)

# Reconciliation marks (epochal.mtrack.marks): per keyspace and kind (fence, low_bound, lease),
# the pieces of token ranges each marked with an HLC (a lease's mark is its token), written in
# the transaction of what the mark allows.
reconcile_marks = Table(
    "reconcile_marks",
    metadata,
    Column("keyspace", String(64), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("range_left", BigInteger, primary_key=True, autoincrement=False),
    Column("range_right", BigInteger, primary_key=True, autoincrement=False),
    Column("mark", BigInteger, nullable=False),
)

# Cohorts this replica holds (epochal.mtrack.cohorts), written in the transaction of the fold or
# the delivery that makes it hold them; forgotten once the low bound passes them.
cohorts = Table(
    "cohorts",
    metadata,
    Column("keyspace", String(64), primary_key=True),
    Column("cohort_id", BigInteger, primary_key=True, autoincrement=False),
    Column("range_left", BigInteger, nullable=False),
    Column("range_right", BigInteger, nullable=False),
    Column("members", String(4096), nullable=False),  # sorted node ids, comma-separated
    Column("low", BigInteger, nullable=False),
    Column("high", BigInteger, nullable=False),
    Column("folded_high", BigInteger, nullable=False),  # as far as this replica's folds went
    Column("mutations", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("formed_unix_ms", BigInteger, nullable=False),
)

# The partitions a member's folds of a cohort reached: its data, sent whole to a replica lacking
# the cohort (a partition's cells hold its mutations whole: none is torn).
cohort_partitions = Table(
    "cohort_partitions",
    metadata,
    Column("cohort_id", BigInteger, primary_key=True, autoincrement=False),
    Column("table_id", String(64), primary_key=True),
    Column("token", BigInteger, primary_key=True, autoincrement=False),
    Column("pkey", LargeBinary, primary_key=True),
    sqlite_with_rowid=False,
)
