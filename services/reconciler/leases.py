"""This reconciler's leases on ranges: taking them (grants committed to the metadata log),
claiming them at the replicas, renewing them, and stepping back.

Theory of operation
-------------------
Leases live in two places, on purpose. **Grants** are entries of the metadata log
(``GrantReconcileLease``): the CMS orders them, so the grant's epoch is a fencing token that only
grows, every replica and reconciler learns it in log order, and a grant names the token it
replaces (compare-and-set), so two contenders that both saw a lapsed lease cannot both take it.
**Renewals** stay out of the log (one per range every third of a lease would flood it): the
holder claims the range at each replica (``ReplicaReconcile.RangeState`` with ``claim``), and each
replica notes by its own clock when the token was last renewed there (``epochal.mtrack.leases``).

* A free range (no grant, or a released one) is granted to this reconciler when it holds fewer
  than its share (``--max-ranges``, else the ranges over the reconcilers the grants name). A
  grant in its own name from before this process started counts as free: each process start
  takes fresh tokens, so two processes under one ``--id`` never share one.
* A range granted to another reconciler is taken over only when a majority of its replicas say
  the token has not been renewed there for a whole lease (``may_take_over``).
* After a grant, the holder claims every replica before it acts; it acts while a majority
  acknowledged a renewal sent less than a lease (less a margin) ago (``HolderLease``).
* A refusal for the token (superseded, or lapsed at the replicas) ends the holding: this
  reconciler steps back, and takes the range again only by a new grant.
* On a graceful stop every held range is released (a grant to nobody), so another reconciler
  takes it at once instead of after a lease.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from epochal.cms_client import CMSClient
from epochal.errors import EpochalError
from epochal.mtrack.leases import HolderLease, may_take_over
from epochal.mtrack.range_calls import RangeRef
from epochal.reconciler.metrics import ReconcilerMetrics
from epochal.reconciler.replica_client import ReplicaClient
from epochal.reconciler.status import ReplicaRefused
from epochal.runtime.commit_tracing import traced_commit
from epochal.runtime.follower import MetadataFollower
from epochal.tcm.leases import GrantReconcileLease, LeaseGrant
from epochal.tcm.tokens import TokenRange, covers
from epochal.telemetry import attributes as attr

log = logging.getLogger(__name__)

Key = tuple[str, TokenRange]


@dataclass(frozen=True, slots=True)
class Target:
    """A range to hold, as the newest epoch places it."""

    keyspace: str
    range: TokenRange
    replicas: Mapping[str, str]  # node id -> address


def now_ms() -> float:
    return time.monotonic() * 1000


class Leases:
    def __init__(
        self,
        reconciler_id: str,
        follower: MetadataFollower,
        cms: CMSClient,
        client: ReplicaClient,
        metrics: ReconcilerMetrics,
        *,
        lease_ms: int,
        margin_ms: int,
        max_ranges: int,
    ) -> None:
        self.id = reconciler_id
        self.follower = follower
        self.cms = cms
        self.client = client
        self.metrics = metrics
        self.lease_ms = lease_ms
        self.margin_ms = margin_ms
        self.max_ranges = max_ranges
        self.held: dict[Key, HolderLease] = {}
        self.granted: set[int] = set()  # the tokens of the grants this process committed
        self._reserved = 0  # free ranges being taken
        self._claims: set[asyncio.Future[object]] = set()  # lease claims still out

    def ref(self, target: Target, token: int) -> RangeRef:
        return RangeRef(
            self.follower.epoch,
            target.keyspace,
            target.range,
            token,
            tuple(sorted(target.replicas)),
        )

    def share(self, ranges: int) -> int:
        if self.max_ranges:
            return self.max_ranges
        metadata = self.follower.metadata
        holders = {g.holder for g in metadata.reconcile_leases if g.holder} | {self.id}
        return math.ceil(ranges / len(holders))

    async def acquire(self, target: Target, ranges: int) -> HolderLease | None:
        """The lease on ``target`` if this reconciler holds it or may take it now; else None.
        Several run at once: a free range is taken only while the ranges held and being taken
        stay within the share."""
        key = (target.keyspace, target.range)
        lease = self.held.get(key)
        if lease is not None:
            return lease
        grant = self.follower.metadata.lease_of(target.keyspace, target.range)
        mine = grant is not None and grant.epoch in self.granted
        if not mine and (grant is None or not grant.holder or grant.holder == self.id):
            # A free range: taken only within the share, counting those being taken.
            if len(self.held) + self._reserved >= self.share(ranges):
                return None
            self._reserved += 1
            try:
                return await self._acquire(key, target, grant)
            finally:
                self._reserved -= 1
        return await self._acquire(key, target, grant)

    async def _acquire(
        self, key: Key, target: Target, grant: LeaseGrant | None
    ) -> HolderLease | None:
        token = 0
        if grant is not None and grant.epoch in self.granted and covers(grant.range, target.range):
            # Granted to this process (a piece of a split keeps it). A range merged from ours
            # and another's needs a grant of its own, replacing the highest token it meets; so
            # does one granted before this process started (another process with the same
            # --id must not share its tokens).
            token = grant.epoch
        elif grant is None or not grant.holder or grant.holder == self.id:
            pass  # free (the caller checked the share)
        elif not await self._lapsed(target, grant.epoch):
            return None
        if not token:
            token = await self._grant(target, grant.epoch if grant is not None else 0)
            if not token:
                return None
        lease = HolderLease(token, self.lease_ms, self.margin_ms)
        renewed = await self.renew(target, lease, every=True)
        if renewed == "lapsed" and grant is not None and token == grant.epoch:
            # Our own grant lapsed at the replicas (this reconciler was down or paused past
            # it): only a new grant may act. (A renewal a majority did not answer is no lapse:
            # granting again then would only flood the log.)
            token = await self._grant(target, token)
            lease = HolderLease(token, self.lease_ms, self.margin_ms)
            renewed = await self.renew(target, lease, every=True) if token else "short"
        if renewed != "ok":
            return None
        self.held[key] = lease
        self.metrics.lease_changes.labels("taken").inc()
        self.metrics.ranges_held.set(len(self.held))
        log.info("holding %s of %s under lease token %d", target.range, target.keyspace, token)
        return lease

    async def _lapsed(self, target: Target, token: int) -> bool:
        ref = self.ref(target, token)
        answers = await asyncio.gather(
            *(self.client.state(address, ref) for address in target.replicas.values()),
            return_exceptions=True,
        )
        idle: dict[str, float | None] = {}
        for node, answer in zip(target.replicas, answers, strict=True):
            if isinstance(answer, EpochalError):
                continue  # an unreachable, refusing or overloaded replica says nothing either way
            if isinstance(answer, BaseException):
                raise answer
            if answer.lease_token > token:
                return False  # a newer grant exists: the follower will show it
            idle[node] = answer.lease_idle_ms
        return may_take_over(idle, len(target.replicas), lease_ms=self.lease_ms)

    async def _grant(self, target: Target, replaces: int) -> int:
        grant = GrantReconcileLease(
            keyspace=target.keyspace, range=target.range, holder=self.id, replaces=replaces
        )
        try:
            committed = await traced_commit(
                self.cms, attr.RECONCILER_COMMIT, grant, uuid.uuid4().hex
            )
        except EpochalError as error:
            log.info("lease grant of %s in %s refused: %s", target.range, target.keyspace, error)
            return 0
        await self.follower.catch_up(committed.epoch, 5.0)
        self.granted.add(committed.epoch)
        return committed.epoch

    async def renew(self, target: Target, lease: HolderLease, *, every: bool = False) -> str:
        """Claim (renew) at every replica: "ok" when a majority acknowledged; "superseded"
        when a replica has seen a higher token, "lapsed" when one saw this one lapse (either
        ends the holding: the caller steps back); else "short" (no majority answered).

        A renewal of a lease held (``every`` False) is "ok" as soon as a majority acknowledged:
        a replica that does not answer holds it up no longer than the majority takes, and a
        refusal that comes later reaches a round. Taking a lease (``every``) hears every
        replica out, to its state deadline: a replica that saw the token lapse must be heard,
        or the range would be taken under a token it refuses, round after round. The claims
        still out when it returns go on to the replicas (the last to answer renews too)."""
        sent = now_ms()
        ref = self.ref(target, lease.token)
        claims = [
            asyncio.ensure_future(
                self.client.state(address, ref, claim=True, lease_ms=self.lease_ms)
            )
            for address in target.replicas.values()
        ]
        for claim in claims:
            self._claims.add(claim)
            claim.add_done_callback(self._claim_done)
        acknowledged = 0
        for answered in asyncio.as_completed(claims):
            try:
                await answered
            except ReplicaRefused as refused:
                if refused.outcome in ("superseded", "lapsed"):
                    return refused.outcome
                continue
            except Exception:  # unreachable, overloaded, ...: says nothing either way
                continue
            acknowledged += 1
            if not every and acknowledged > len(target.replicas) // 2:
                lease.renewed(sent)
                return "ok"
        if acknowledged > len(target.replicas) // 2:
            lease.renewed(sent)
            return "ok"
        return "short"

    def _claim_done(self, claim: asyncio.Future[object]) -> None:
        """A claim's outcome nobody awaits any more (``renew`` returned first) is still read;
        one that is not an expected error is a bug, logged."""
        self._claims.discard(claim)
        if claim.cancelled():
            return
        error = claim.exception()
        if error is not None and not isinstance(error, EpochalError):
            log.error("a lease claim failed unexpectedly", exc_info=error)

    def drop(self, key: Key, why: str, lease: HolderLease | None = None) -> None:
        """Step back from ``key`` (only from ``lease`` when given: a late answer about a lease
        that was taken again since must not drop the new one)."""
        if lease is not None and self.held.get(key) is not lease:
            return
        if self.held.pop(key, None) is not None:
            self.metrics.lease_changes.labels("lost").inc()
            self.metrics.ranges_held.set(len(self.held))
            log.warning("stepped back from %s of %s: %s", key[1], key[0], why)

    async def release_all(self) -> None:
        """Grant every held range to nobody (a graceful stop)."""
        for (keyspace, token_range), lease in list(self.held.items()):
            release = GrantReconcileLease(
                keyspace=keyspace, range=token_range, holder="", replaces=lease.token
            )
            try:
                await traced_commit(self.cms, attr.RECONCILER_COMMIT, release, uuid.uuid4().hex)
                self.metrics.lease_changes.labels("released").inc()
            except EpochalError as error:
                log.info("releasing %s of %s failed: %s", token_range, keyspace, error)
        self.held.clear()
        self.metrics.ranges_held.set(0)
