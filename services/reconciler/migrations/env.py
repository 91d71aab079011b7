"""Alembic environment: migrate on the connection the storage hands over
(epochal.runtime.database.migrate)."""

from epochal.reconciler.tables import metadata
from epochal.runtime.database import run_migrations

run_migrations(metadata)
