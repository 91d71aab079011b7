"""Which peers this replica cannot reach, as its own calls to them found (a reconciler asks, to
know which replicas of a range can reconcile together: ``RangeState.unreachable_peers``).

A peer is unreachable when a call to it failed at the transport (``PeerFailed``) more recently
than one succeeded, within ``RECENT_S``; and always when a test cut it off (``cut_off``: calls
to it fail at once, as if the network between the two were down — set on both sides, a
partition)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

RECENT_S = 10.0


@dataclass(slots=True)
class PeerReach:
    cut_off: frozenset[str] = frozenset()  # test hook: calls to these fail at once
    _failed_at: dict[str, float] = field(default_factory=dict)
    _ok_at: dict[str, float] = field(default_factory=dict)

    def record(self, node_id: str, *, ok: bool) -> None:
        (self._ok_at if ok else self._failed_at)[node_id] = time.monotonic()

    def unreachable(self) -> frozenset[str]:
        now = time.monotonic()
        failing = {
            node
            for node, failed in self._failed_at.items()
            if now - failed < RECENT_S and failed > self._ok_at.get(node, float("-inf"))
        }
        return self.cut_off | failing
