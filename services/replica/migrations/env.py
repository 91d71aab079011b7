"""Alembic environment: run on the connection the storage hands over (see storage._migrate)."""

from __future__ import annotations

from alembic import context

from epochal.replica.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
