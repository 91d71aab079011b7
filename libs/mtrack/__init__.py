"""Mutation tracking with no I/O: HLC, mutation ids, and summaries sized by the difference.

See ``hlc``, ``ids`` and ``summary`` for the theory of operation of each part.
"""

from epochal.errors import ClockSkew
from epochal.mtrack.errors import (
    LowBoundMismatch,
    MalformedSummary,
    MutationTrackingError,
    Undecodable,
)
from epochal.mtrack.hlc import (
    LOGICAL_BITS,
    HybridClock,
    Tick,
    format_hlc,
    logical_of,
    make_hlc,
    physical_ms_of,
)
from epochal.mtrack.iblt import MAX_CELLS
from epochal.mtrack.ids import MutationId, SequenceBlock
from epochal.mtrack.summary import (
    EXPLICIT_CELLS,
    MAX_SKETCH_ROUNDS,
    Difference,
    LogDigest,
    LogDigests,
    Sketch,
    cells_for,
    difference,
    differing_logs,
    more_cells,
    reconcile,
)

__all__ = [
    "EXPLICIT_CELLS",
    "LOGICAL_BITS",
    "MAX_CELLS",
    "MAX_SKETCH_ROUNDS",
    "ClockSkew",
    "Difference",
    "HybridClock",
    "LogDigest",
    "LogDigests",
    "LowBoundMismatch",
    "MalformedSummary",
    "MutationId",
    "MutationTrackingError",
    "SequenceBlock",
    "Sketch",
    "Tick",
    "Undecodable",
    "cells_for",
    "difference",
    "differing_logs",
    "format_hlc",
    "logical_of",
    "make_hlc",
    "more_cells",
    "physical_ms_of",
    "reconcile",
]
