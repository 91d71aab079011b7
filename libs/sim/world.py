"""The deterministic world: one virtual clock, one event queue, one network, one root seed.

Theory of operation
-------------------
Everything that happens is an event in a single priority queue ordered by (virtual time,
sequence number), so two runs of one seed pop the same events in the same order. The network
delays each message by a random number of milliseconds (which reorders them), and while faults
are on it drops, duplicates and cuts links between partitions. All randomness comes from the
world's ``random.Random``; nothing reads the wall clock.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class NetworkFaults:
    drop_probability: float = 0.0
    # Loss that hits one kind of message harder (a burst while a link flaps), keyed by label.
    drop_probability_by_label: dict[str, float] = field(default_factory=dict)
    duplicate_probability: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 4
    # A few messages take far longer (a slow link, a GC pause): heavy reordering.
    slow_probability: float = 0.0
    slow_delay_ms: int = 300
    # Members in different groups cannot talk; None = fully connected.
    partition: tuple[frozenset[str], ...] | None = None

    def connected(self, a: str, b: str) -> bool:
        if self.partition is None or a == b:
            return True
        return any(a in group and b in group for group in self.partition)


@dataclass(slots=True)
class NetworkCounters:
    sent: int = 0
    delivered: int = 0
    dropped: int = 0
    duplicated: int = 0
    cut_by_partition: int = 0


@dataclass(order=True, slots=True)
class _Event:
    at_ms: int
    seq: int
    action: Callable[[], None] = field(compare=False)
    label: str = field(compare=False)


class World:
    def __init__(self, seed: int, *, trace: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.faults = NetworkFaults()
        self.counters = NetworkCounters()
        self._queue: list[_Event] = []
        self._seq = 0
        self._trace_enabled = trace
        self.trace: list[str] = []
        self._digest = hashlib.blake2b(digest_size=16)

    def schedule(self, delay_ms: int, label: str, action: Callable[[], None]) -> None:
        assert delay_ms >= 0
        self._seq += 1
        heapq.heappush(self._queue, _Event(self.now_ms + delay_ms, self._seq, action, label))

    def send(self, src: str, dst: str, label: str, deliver: Callable[[], None]) -> None:
        """Deliver later, subject to the network faults in force now."""
        self.counters.sent += 1
        if not self.faults.connected(src, dst):
            self.counters.cut_by_partition += 1
            return
        drop = self.faults.drop_probability_by_label.get(label, self.faults.drop_probability)
        if src != dst and self.rng.random() < drop:
            self.counters.dropped += 1
            return
        copies = 1
        if src != dst and self.rng.random() < self.faults.duplicate_probability:
            self.counters.duplicated += 1
            copies = 2
        for _ in range(copies):
            delay = self.rng.randint(self.faults.min_delay_ms, self.faults.max_delay_ms)
            if src != dst and self.rng.random() < self.faults.slow_probability:
                delay += self.rng.randint(0, self.faults.slow_delay_ms)
            self.schedule(delay, f"{label} {src}->{dst}", self._delivery(deliver))

    def _delivery(self, deliver: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            self.counters.delivered += 1
            deliver()

        return run

    def run_until(self, end_ms: int, after_each: Callable[[], None]) -> None:
        while self._queue and self._queue[0].at_ms <= end_ms:
            event = heapq.heappop(self._queue)
            self.now_ms = event.at_ms
            self.record(f"{event.at_ms} {event.label}")
            event.action()
            after_each()
        self.now_ms = max(self.now_ms, end_ms)

    def run_while(
        self, end_ms: int, keep_going: Callable[[], bool], after_each: Callable[[], None]
    ) -> bool:
        """Run until ``keep_going()`` is false (True) or ``end_ms`` passes (False)."""
        while keep_going():
            if not self._queue or self._queue[0].at_ms > end_ms:
                return False
            event = heapq.heappop(self._queue)
            self.now_ms = event.at_ms
            self.record(f"{event.at_ms} {event.label}")
            event.action()
            after_each()
        return True

    @property
    def trace_digest(self) -> str:
        return self._digest.hexdigest()

    def record(self, line: str) -> None:
        # A rolling digest makes "the same seed gives the same trace" cheap to check.
        self._digest.update(line.encode())
        self._digest.update(b"\n")
        if self._trace_enabled:
            self.trace.append(line)
