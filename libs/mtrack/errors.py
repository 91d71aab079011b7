"""Conditions between the summaries of two replicas, which the read path answers by asking
again; none reaches a client (a clock too far ahead is ``epochal.errors.ClockSkew``).

``MalformedSummary`` is both a ``MutationTrackingError`` and a ``ValueError``: it is expected (a
peer sent bytes we cannot read) and it is also bad input, so callers may catch either family.
Broken invariants are asserts, never one of these.
"""

from __future__ import annotations


class MutationTrackingError(Exception):
    """Base of the expected conditions."""


class LowBoundMismatch(MutationTrackingError):
    """Two summaries name different low bounds; ask both sides again with ``low_bound``."""

    def __init__(self, *, low_bound_a: int, low_bound_b: int) -> None:
        self.low_bound = max(low_bound_a, low_bound_b)
        super().__init__(
            f"summaries have different low bounds ({low_bound_a} vs {low_bound_b}); "
            f"ask again with low_bound={self.low_bound}"
        )


class Undecodable(MutationTrackingError):
    """A sketch did not decode to a verified difference; ask again with twice the cells."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"sketch difference did not decode: {reason}; ask again with more cells")


class MalformedSummary(MutationTrackingError, ValueError):
    """Encoded summary bytes that cannot be read."""
