"""What the SDK answers a write and a read with: frozen domain values, built from the replica's
reply by ``epochal.encoding`` and handed to the user by ``epochal.client.Client``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epochal.mtrack import MutationId


@dataclass(frozen=True, slots=True)
class WriteResult:
    mutation_id: MutationId
    epoch: int
    acknowledged: tuple[str, ...]
    coordinator: str
    attempts: int


@dataclass(frozen=True, slots=True)
class ReadStats:
    replicas: tuple[str, ...]
    data_replica: str
    repaired_mutations: int
    repaired: tuple[MutationId, ...]
    digest_mismatch: bool
    repaired_cells: int
    # Tracked: rounds of summary comparison (1: the summaries agreed at once), whether they
    # agreed in the first round, and per replica the logs (node, log) that differed then.
    summary_rounds: int = 0
    summaries_agreed: bool = False
    differing: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReadResult:
    rows: list[dict[str, Any]]
    stats: ReadStats
    epoch: int
    coordinator: str
    # When each cell was written (its HLC), by row index and column.
    written: list[dict[str, int]] = field(default_factory=list)
