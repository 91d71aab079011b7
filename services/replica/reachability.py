"""Which peers this replica cannot reach, as its own calls to them found (a reconciler asks, to
know which replicas of a range can reconcile together: ``RangeState.unreachable_peers``).

A peer is unreachable when a call to it got no answer (``counts_as_unreachable``) more recently
than one was answered, within ``RECENT_S``; and always when a test cut it off (``cut_off``:
calls to it fail at once, as if the network between the two were down — set on both sides, a
partition).

Only a call that got no answer while this process was running says so. Not one the peer
answered, even with a refusal or a reply that could not be used; not one refused here before it
was sent (too many in flight, too large); not one its caller gave up on; and not a deadline
noticed well after it passed: this process was stopped or its loop blocked (SIGSTOP, swap, a
long pause), and the answer may be waiting unread. After a SIGCONT every call in flight expires
at once — a healthy peer reported unreachable would be left out of the reconciler's rounds, and
folded without (issue 28)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import grpc

from epochal.wire.status import NO_ANSWER

RECENT_S = 10.0
# A deadline noticed this long after it passed was missed by this process, not by the peer.
STALLED_S = 0.5


def counts_as_unreachable(code: grpc.StatusCode, overdue_s: float) -> bool:
    """Whether a call that failed with ``code``, noticed ``overdue_s`` after its deadline, says
    that the peer may be unreachable."""
    if code not in NO_ANSWER:
        return False
    return not (code is grpc.StatusCode.DEADLINE_EXCEEDED and overdue_s > STALLED_S)


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
