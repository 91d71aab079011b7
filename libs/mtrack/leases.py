"""Reconciliation leases and their fencing tokens, without I/O: one reconciler at a time per
range, also across a pause. Pure; clocks are given as milliseconds of a monotonic clock.

Theory of operation. A reconciler takes a range by committing a grant to the metadata log
(``epochal.tcm.leases``); the grant's epoch is its **token**, so tokens only grow and every
replica learns them in log order. Renewals stay out of the log: the holder renews at each
replica of the range, and each replica notes, by its own clock, when the token was last renewed
there (``TokenGuard``). Three rules:

1. *A replica refuses any token below the highest it has seen* — seen in a claim, in a renewal,
   or in the metadata log. It persists the highest token in the transaction of the action the
   token allows, so a restart does not forget it.
2. *A replica refuses an action whose token it has not heard renewed within the lease*, by its
   own clock, and refuses to renew a lease that lapsed there: only a new grant may act then. A
   reconciler paused past its lease (SIGSTOP, a long GC) finds every action and renewal refused
   when it wakes, even where no successor has claimed yet, and steps back.
3. *A successor claims every replica of the range before it acts* (``TokenGuard.claim``) and
   adopts the highest fence they report, so it never fences below its predecessor.

A contender takes over (``may_take_over``) only when a majority of the range's replicas report
that the holder's token has not been renewed there for a whole lease: a holder that renews
keeps its range; one that cannot reach a majority could not finish a round anyway.

The holder's own view (``HolderLease``) is conservative: it counts its lease from when it *sent*
the renewal a majority acknowledged, and stops acting a margin before that lease ends, so by
rule 2 it stops no later than the replicas do (clocks run at about the same rate; the margin
covers the difference over one lease).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Verdict(enum.Enum):
    OK = "ok"
    SUPERSEDED = "superseded"  # a higher token was seen: step back
    LAPSED = "lapsed"  # not renewed here within the lease: renew first


@dataclass(slots=True)
class TokenGuard:
    """One replica's view of the leases of one range: the highest token seen and when it was
    last renewed here. ``changed`` says the highest token rose and must be persisted with the
    action it allows."""

    lease_ms: int
    highest: int = 0
    renewed_ms: float | None = None  # when ``highest`` was last claimed or renewed here
    changed: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.lease_ms <= 0:
            raise ValueError(f"a lease lasts more than 0 ms, got {self.lease_ms}")

    def learn(self, token: int) -> None:
        """A grant seen in the metadata log: lower tokens are refused from now on."""
        if token > self.highest:
            self.highest, self.renewed_ms, self.changed = token, None, True

    def claim(self, token: int, now_ms: float) -> Verdict:
        """A holder claims the range (and renews): refused below the highest token seen, and
        for a token whose lease lapsed here — once a contender may have seen it lapse, only a
        new grant (a higher token) may act, or two holders could."""
        if token < self.highest:
            return Verdict.SUPERSEDED
        idle = self.idle_ms(now_ms)
        if token == self.highest and idle is not None and idle >= self.lease_ms:
            return Verdict.LAPSED
        self.learn(token)
        self.renewed_ms = now_ms
        return Verdict.OK

    renew = claim  # the same rule: a renewal is a claim of a token the replica may know

    def admit(self, token: int, now_ms: float) -> Verdict:
        """An action (fence, delivery, low bound) under ``token``."""
        if token < self.highest:
            return Verdict.SUPERSEDED
        if token > self.highest or self.renewed_ms is None:
            return Verdict.LAPSED  # a token never claimed here: claim it first
        if now_ms - self.renewed_ms >= self.lease_ms:
            return Verdict.LAPSED
        return Verdict.OK

    def idle_ms(self, now_ms: float) -> float | None:
        """How long the highest token has gone without a renewal here (None: never renewed)."""
        return None if self.renewed_ms is None else now_ms - self.renewed_ms


def may_take_over(
    idle_ms_by_replica: Mapping[str, float | None], replicas: int, *, lease_ms: int
) -> bool:
    """Whether a contender may grant itself the range: a majority of the ``replicas`` report the
    current token not renewed for a whole lease (or never renewed)."""
    lapsed = sum(1 for idle in idle_ms_by_replica.values() if idle is None or idle >= lease_ms)
    return lapsed > replicas // 2


@dataclass(slots=True)
class HolderLease:
    """The holder's side: it acts only while its lease, counted from when it sent the last
    renewal a majority acknowledged, has more than ``margin_ms`` left."""

    token: int
    lease_ms: int
    margin_ms: int
    sent_ms: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.margin_ms < self.lease_ms:
            raise ValueError(
                f"the margin must be under the lease: margin {self.margin_ms} ms, "
                f"lease {self.lease_ms} ms"
            )

    def renewed(self, sent_ms: float) -> None:
        """A majority acknowledged the renewal sent at ``sent_ms``."""
        if self.sent_ms is None or sent_ms > self.sent_ms:
            self.sent_ms = sent_ms

    def may_act(self, now_ms: float) -> bool:
        if self.sent_ms is None:
            return False
        return now_ms < self.sent_ms + self.lease_ms - self.margin_ms

    def renew_due(self, now_ms: float) -> bool:
        """Renew at a third of the lease: two renewals may fail before it runs out."""
        return self.sent_ms is None or now_ms >= self.sent_ms + self.lease_ms / 3
