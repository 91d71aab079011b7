"""Expected conditions of mutation tracking (STYLE habit 5); the shell maps them to statuses.

``MalformedSummary`` is both a ``MutationTrackingError`` and a ``ValueError``: it is expected (a
peer sent bytes we cannot read) and it is also bad input, so callers may catch either family.
Broken invariants are asserts, never one of these.
"""

from __future__ import annotations


class MutationTrackingError(Exception):
    """Base of the expected conditions."""


class ClockSkew(MutationTrackingError):
    """A peer's HLC is further ahead of our physical clock than the configured limit allows."""

    def __init__(self, *, remote: str, local: str, ahead_ms: int, max_skew_ms: int) -> None:
        self.ahead_ms = ahead_ms
        self.max_skew_ms = max_skew_ms
        super().__init__(
            f"remote clock {remote} is {ahead_ms} ms ahead of the local physical clock {local}, "
            f"beyond max_skew_ms={max_skew_ms}; check time synchronisation (NTP) on both nodes "
            f"or raise max_skew_ms"
        )


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
