"""The progress barrier on the network: ask the nodes, count acknowledgements, fall back.

Theory of operation
-------------------
``epochal.tcm.barrier`` says which nodes must acknowledge an epoch and which level a set of
acknowledgements meets. Here every node the barrier names is asked ``AwaitEpoch(epoch)`` — it
catches up and answers the epoch it reached — again every ``--barrier-backoff-ms`` until it
acknowledges. The barrier starts at the head of the fallback chain; each time a level has waited
``--barrier-timeout-ms`` it falls back to the strongest level the acknowledgements already meet,
else to the next level, logging and counting each downgrade, never below
``--barrier-min-level``. At the minimum it keeps waiting, saying so every timeout (log, the
``epochal_progress_barrier_waiting`` gauge).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import trace

from epochal.errors import EpochalError
from epochal.replica.metrics import ReplicaMetrics
from epochal.replica.peer_client import PeerClient
from epochal.replica.settings import ReplicaSettings
from epochal.runtime.follower import MetadataFollower
from epochal.tcm.barrier import BarrierLevel, BarrierOutcome, ProgressBarrier, chain_down_to
from epochal.telemetry import attributes as attr
from epochal.telemetry import span

log = logging.getLogger(__name__)

ASK_TIMEOUT_S = 5.0


@dataclass(eq=False, repr=False)
class BarrierDriver:
    settings: ReplicaSettings
    follower: MetadataFollower
    peers: PeerClient
    metrics: ReplicaMetrics
    # The barriers waiting now: a key each -> when it began (monotonic).
    _waiting: dict[object, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.metrics.barrier_waiting_s.set_function(self._longest_wait)

    def _longest_wait(self) -> float:
        """Read by the scrape's thread: list() copies the values without letting go of the GIL."""
        began = list(self._waiting.values())
        return time.monotonic() - min(began) if began else 0.0

    async def wait(
        self,
        barrier: ProgressBarrier,
        what: str,
        on_level: Callable[[BarrierLevel], None] = lambda _: None,
    ) -> BarrierOutcome:
        """Until ``barrier`` is met at some level of its chain; the outcome names the level."""
        with span(attr.REPLICA_PROGRESS_BARRIER) as traced:
            traced.set_attribute(attr.OPERATION, what)
            traced.set_attribute(attr.EPOCH, barrier.epoch)
            traced.set_attribute(attr.NODES, len(barrier.nodes))
            outcome = await self._wait(barrier, what, on_level, traced)
            traced.set_attribute(attr.CONSISTENCY, outcome.level.value)
            traced.set_attribute(attr.VERDICT, outcome.verdict)
        return outcome

    async def _wait(
        self,
        barrier: ProgressBarrier,
        what: str,
        on_level: Callable[[BarrierLevel], None],
        traced: trace.Span,
    ) -> BarrierOutcome:
        started = time.monotonic()
        key = object()
        self._waiting[key] = started
        acked: set[str] = set()
        changed = asyncio.Event()
        askers = [
            asyncio.ensure_future(self._ask(node, barrier.epoch, acked, changed))
            for node in sorted(barrier.nodes)
        ]
        level = self._first_level(barrier)
        on_level(level)
        timeout_s = self.settings.barrier_timeout_ms / 1000
        loop = asyncio.get_running_loop()
        level_deadline = loop.time() + timeout_s
        try:
            while not barrier.met(level, acked):
                remaining = level_deadline - loop.time()
                if remaining > 0:
                    changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), remaining)
                    continue
                level_deadline = loop.time() + timeout_s
                missing = sorted(barrier.nodes - acked)
                lower = barrier.fall_back(level)
                if lower is None:
                    self.metrics.barrier_waiting.set(1)
                    log.warning(
                        "barrier for %s at epoch %d: still waiting at %s, the minimum "
                        "(--barrier-min-level); no acknowledgement from %s",
                        what,
                        barrier.epoch,
                        level.value,
                        ", ".join(missing),
                    )
                    continue
                met = barrier.outcome(acked)
                target = met.level if met is not None else lower
                log.warning(
                    "barrier for %s at epoch %d: %s timed out after %.0f s (no acknowledgement "
                    "from %s); falling back to %s",
                    what,
                    barrier.epoch,
                    level.value,
                    timeout_s,
                    ", ".join(missing),
                    target.value,
                )
                self.metrics.barrier_downgrades.labels(level.value, target.value).inc()
                traced.add_event(
                    attr.BARRIER_RELAXED,
                    {attr.RELAXED_FROM: level.value, attr.CONSISTENCY: target.value},
                )
                level = target
                on_level(level)
        finally:
            del self._waiting[key]
            self.metrics.barrier_waiting.set(0)
            for asker in askers:
                asker.cancel()
            await asyncio.gather(*askers, return_exceptions=True)
        outcome = BarrierOutcome(level=level, epoch=barrier.epoch)
        self.metrics.barrier_latency.observe(time.monotonic() - started)
        self.metrics.barriers.labels(level.value, outcome.verdict).inc()
        log.info(
            "barrier for %s at epoch %d %s at %s (%d of %d nodes acknowledged) in %.2f s",
            what,
            barrier.epoch,
            outcome.verdict,
            level.value,
            len(acked),
            len(barrier.nodes),
            time.monotonic() - started,
        )
        return outcome

    @staticmethod
    def _first_level(barrier: ProgressBarrier) -> BarrierLevel:
        return chain_down_to(barrier.minimum)[0]

    async def _ask(self, node: str, epoch: int, acked: set[str], changed: asyncio.Event) -> None:
        backoff_s = self.settings.barrier_backoff_ms / 1000
        while True:
            reached = await self._reached(node, epoch)
            if reached >= epoch:
                acked.add(node)
                changed.set()
                return
            self.metrics.barrier_retries.inc()
            await asyncio.sleep(backoff_s)

    async def _reached(self, node: str, epoch: int) -> int:
        """The epoch ``node`` answers (0 when it does not answer)."""
        if node == self.follower.node_id:
            await self.follower.catch_up(epoch, ASK_TIMEOUT_S)
            return self.follower.epoch
        info = self.follower.metadata.nodes.get(node)
        if info is None:
            return 0
        try:
            return await self.peers.await_epoch(info.address, epoch, wait_s=ASK_TIMEOUT_S)
        except EpochalError as error:
            log.debug("barrier: %s did not answer: %s", node, error.status)
            return 0
