"""Backpressure for deliveries: reconciliation shares the replicas with clients.

A token bucket of ``rate`` mutations a second, shared by every round of this reconciler (a burst
of at most one second's worth), and a back-off: a delivery some of whose mutations a target
refused (overloaded, behind) halves the rate, down to a tenth of it, and each delivery that went
through raises it back by a tenth. Pure but for the event loop's clock and sleep."""

from __future__ import annotations

import asyncio

MIN_SHARE = 0.1


class Pacer:
    def __init__(self, rate: int) -> None:
        if rate <= 0:
            raise ValueError(f"a delivery rate is > 0 mutations a second, got {rate}")
        self.rate = rate
        self.share = 1.0
        self._tokens = float(rate)
        self._at = 0.0

    @property
    def current_rate(self) -> float:
        return self.rate * self.share

    async def take(self, mutations: int) -> None:
        """Wait until ``mutations`` may be delivered (a batch larger than the bucket waits for
        as much as it lacks, then goes)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._at:
            self._tokens = min(
                self._tokens + (now - self._at) * self.current_rate, self.current_rate
            )
        self._at = now
        self._tokens -= mutations
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.current_rate)

    def back_off(self) -> None:
        self.share = max(self.share / 2, MIN_SHARE)

    def recovered(self) -> None:
        self.share = min(self.share + 0.1, 1.0)
