"""This reconciler's entry in the metadata log: the address it advertises
(``RegisterReconciler``, ``epochal.tcm.reconcilers``), so that an operator's tool finds every
reconciler from the metadata alone.

Theory of operation
-------------------
* *At start*, once the follower has caught up, the reconciler registers ``--advertise`` under its
  id — unless the metadata already names it there (a restart): then there is nothing to commit.
* *It does not wait long*: the server reports SERVING once registered or ``WAIT_S`` later,
  whichever comes first. A CMS that does not answer now must not keep the reconciler from its
  work (its rounds under leases already granted need no commit); the registration goes on in the
  background. Each failed commit is logged once, then it waits a backoff (doubling from
  ``FIRST_BACKOFF_S`` to ``MAX_BACKOFF_S``) and tries again, until it is registered or the
  reconciler stops (but for an address the CMS refuses as malformed: logged as an error, once).
  Every attempt carries one entry id: a commit whose answer was lost is
  committed once, and its retry answers the first epoch.
* *A clean stop* (after the leases are released) deregisters — a registration at no address —
  best effort, within the grace left: a reconciler stopped on purpose no longer appears. One that
  was killed stays registered, and a tool shows it unreachable.
* *It deregisters only its own entry*: when the metadata names its id at another address,
  another process registered under the same id since (two processes with one ``--id``), and that
  entry stays.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from epochal.cms_client import CMSClient
from epochal.errors import EpochalError, InvalidRequest, Rejected
from epochal.reconciler.metrics import ReconcilerMetrics
from epochal.runtime.commit_tracing import traced_commit
from epochal.runtime.follower import MetadataFollower
from epochal.tcm.reconcilers import DEREGISTERED, NOT_REGISTERED, RegisterReconciler
from epochal.telemetry import attributes as attr

log = logging.getLogger(__name__)

WAIT_S = 3.0  # the longest a start waits for its registration before it reports SERVING
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
CATCH_UP_S = 5.0  # to learn the epoch of a commit from the log


class Registration:
    def __init__(
        self,
        reconciler_id: str,
        address: str,
        follower: MetadataFollower,
        cms: CMSClient,
        metrics: ReconcilerMetrics,
    ) -> None:
        self.id = reconciler_id
        self.address = address
        self.follower = follower
        self.cms = cms
        self.metrics = metrics
        self.sent = False  # this process sent its registration (it may be committed)

    @property
    def registered(self) -> bool:
        """The metadata this reconciler follows names it at its address."""
        return self.follower.metadata.reconcilers.get(self.id) == self.address

    async def register(self) -> None:
        """Until the metadata names this reconciler at its address: commit, and on a failure
        log it, back off and commit again (the caller cancels it at a stop)."""
        if self.registered:
            log.info("%s is registered at %s already", self.id, self.address)
            self.metrics.registered.set(1)
            return
        entry_id = f"register-reconciler-{uuid.uuid4().hex}"
        backoff_s = FIRST_BACKOFF_S
        while True:
            self.sent = True
            try:
                epoch = await self._commit(self.address, entry_id)
                break
            except InvalidRequest as error:  # the CMS refuses the address itself: for good
                self.metrics.registration_changes.labels("failed").inc()
                log.error(
                    "cannot register %s at %s: %s; set --advertise", self.id, self.address, error
                )
                return
            except EpochalError as error:
                self.metrics.registration_changes.labels("failed").inc()
                log.warning(
                    "registering %s at %s failed (%s); trying again in %.1f s",
                    self.id,
                    self.address,
                    error,
                    backoff_s,
                )
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
        self.metrics.registration_changes.labels("registered").inc()
        self.metrics.registered.set(1)
        log.info("registered %s at %s (epoch %d)", self.id, self.address, epoch)
        await self.follower.catch_up(epoch, CATCH_UP_S)

    async def deregister(self) -> None:
        """Remove this reconciler's entry, if it is its own (a clean stop: one commit, which
        the caller bounds)."""
        current = self.follower.metadata.reconcilers.get(self.id)
        if current is None and not self.sent:
            log.info("%s was not registered: nothing to deregister", self.id)
            return
        if current is not None and current != self.address:
            log.info(
                "not deregistering %s: the metadata names it at %s since, not at %s",
                self.id,
                current,
                self.address,
            )
            return
        try:
            epoch = await self._commit(DEREGISTERED, f"deregister-reconciler-{uuid.uuid4().hex}")
        except EpochalError as error:
            if isinstance(error, Rejected) and error.rule == NOT_REGISTERED:
                log.info("%s was not registered: nothing to deregister", self.id)
                return
            self.metrics.registration_changes.labels("failed").inc()
            log.warning("deregistering %s failed (%s): it stays registered", self.id, error)
            return
        self.metrics.registration_changes.labels("deregistered").inc()
        self.metrics.registered.set(0)
        log.info("deregistered %s from %s (epoch %d)", self.id, self.address, epoch)

    async def _commit(self, address: str, entry_id: str) -> int:
        transformation = RegisterReconciler(reconciler_id=self.id, address=address)
        committed = await traced_commit(self.cms, attr.RECONCILER_COMMIT, transformation, entry_id)
        return committed.epoch
