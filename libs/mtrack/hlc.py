"""Hybrid logical clock: physical milliseconds plus a logical counter, in one int.

Theory of operation. An HLC value is ``physical_ms << LOGICAL_BITS | logical``. Because it is one
int, a logical counter that passes 65535 within one millisecond simply carries into the
millisecond part; order is plain int order.

``HybridClock`` keeps two numbers: ``last``, the greatest value it issued or observed, and
``ceiling``, a durable upper bound on what it may issue. Invariants, in this order:

1. Every value ``tick`` issues is ``> last`` (strictly monotone, whatever the physical clock does:
   backwards steps only make the logical part grow) and ``>= make_hlc(physical_ms)``.
2. Every value issued is ``< ceiling`` as it is on disk. When a tick reaches the ceiling, it
   raises the ceiling by ``reserve_ms`` and returns it in ``Tick.persist_ceiling``: the shell
   makes it durable BEFORE it uses the hlc. So one write in a reservation block costs an fsync.
3. After a crash the clock is rebuilt from the persisted ceiling and starts there, so it never
   reissues a value it may have issued before the crash.
4. ``observe`` moves ``last`` up to a remote value unless that value is more than
   ``max_skew_ms`` ahead of our physical clock (``ClockSkew``): a clock far in the future would
   otherwise drag every node's HLC with it.

The clock is owned by one event loop, like a Raft node; it is not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from epochal.errors import ClockSkew

LOGICAL_BITS = 16
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
# HLCs are stored as signed 64-bit integers (SQLite's INTEGER, PostgreSQL's BIGINT): every value
# a node issues, observes or accepts from a message is at most this.
MAX_HLC = (1 << 63) - 1


def make_hlc(physical_ms: int, logical: int = 0) -> int:
    if physical_ms < 0 or physical_ms > MAX_HLC >> LOGICAL_BITS:
        raise ValueError(f"physical_ms must be in 0..2^47-1, got {physical_ms}")
    if logical < 0 or logical > LOGICAL_MASK:
        raise ValueError(f"logical must be in 0..{LOGICAL_MASK}, got {logical}")
    return physical_ms << LOGICAL_BITS | logical


def physical_ms_of(hlc: int) -> int:
    return hlc >> LOGICAL_BITS


def logical_of(hlc: int) -> int:
    return hlc & LOGICAL_MASK


def format_hlc(hlc: int) -> str:
    """``2024-05-01T12:00:00.123Z+7`` (UTC time of the physical part, then the logical part)."""
    physical_ms = physical_ms_of(hlc)
    try:
        moment = datetime.fromtimestamp(physical_ms / 1000, tz=UTC)
    except (OverflowError, ValueError, OSError):  # beyond year 9999: show the raw number
        return f"{physical_ms}ms+{logical_of(hlc)}"
    return f"{moment.isoformat(timespec='milliseconds')[:-6]}Z+{logical_of(hlc)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Tick:
    """A new HLC. If ``persist_ceiling`` is set, make it durable before using ``hlc``."""

    hlc: int
    persist_ceiling: int | None


class HybridClock:
    __slots__ = ("_ceiling", "_last", "max_skew_ms", "reserve_ms")

    def __init__(self, *, max_skew_ms: int, reserve_ms: int, ceiling: int = 0) -> None:
        if max_skew_ms <= 0:
            raise ValueError(f"max_skew_ms must be > 0, got {max_skew_ms}")
        if reserve_ms <= 0:
            raise ValueError(f"reserve_ms must be > 0, got {reserve_ms}")
        if ceiling < 0 or ceiling > MAX_HLC:
            raise ValueError(f"ceiling must be in 0..2^63-1, got {ceiling}")
        self.max_skew_ms = max_skew_ms
        self.reserve_ms = reserve_ms
        self._ceiling = ceiling
        self._last = ceiling  # everything issued before a crash is below the persisted ceiling

    @property
    def last(self) -> int:
        """The greatest value issued or observed (the ceiling itself right after a restart)."""
        return self._last

    @property
    def ceiling(self) -> int:
        return self._ceiling

    def tick(self, physical_ms: int) -> Tick:
        hlc = max(self._last + 1, make_hlc(physical_ms))
        assert hlc <= MAX_HLC, f"HLC exhausted at {hlc}"
        persist_ceiling = None
        if hlc >= self._ceiling:
            persist_ceiling = make_hlc(physical_ms_of(hlc) + self.reserve_ms)
            assert persist_ceiling > hlc
            self._ceiling = persist_ceiling
        self._last = hlc
        return Tick(hlc=hlc, persist_ceiling=persist_ceiling)

    def observe(self, remote_hlc: int, physical_ms: int) -> None:
        """Take a peer's HLC into account so the next tick is above it."""
        if remote_hlc < 0 or remote_hlc > MAX_HLC:
            raise ValueError(f"remote_hlc must be in 0..2^63-1, got {remote_hlc}")
        ahead_ms = physical_ms_of(remote_hlc) - physical_ms
        if ahead_ms > self.max_skew_ms:
            raise ClockSkew(
                remote=format_hlc(remote_hlc),
                local=format_hlc(make_hlc(physical_ms)),
                ahead_ms=ahead_ms,
                max_skew_ms=self.max_skew_ms,
            )
        self._last = max(self._last, remote_hlc)
