"""A CMS member's Prometheus metrics: the seed's TCM metrics as a member sees them.

- ``epochal_current_epoch``, ``epochal_cms_members`` (voters), ``epochal_cms_is_leader``: read
  from the member when scraped.
- ``epochal_cms_unreachable_members``: the other voters that did not answer their last health
  check (``PeerHealth``: each is asked every second, with a one-second deadline).
- ``epochal_cms_commit_latency_seconds{outcome,kind}``: a client's commit on the member the
  client called, from its arrival to the answer. A commit forwarded to the leader counts at the
  follower that received it (its latency includes the forward), not again at the leader, so the
  sum over the members counts each client commit once. ``outcome``: ``success`` (committed, or
  committed before: a retry's duplicate), ``rejection`` (a rule refused it, or it was
  malformed), ``failure`` (not committed in time, overloaded, shutting down); ``kind``: the
  transformation's group (``epochal.tcm.groups``).
"""

from __future__ import annotations

from collections.abc import Callable

from epochal.errors import EpochalError, InvalidRequest, Rejected
from epochal.runtime.commit_metrics import OUTCOMES
from epochal.tcm.groups import GROUPS, group_of
from epochal.telemetry.metrics import Metrics, zeroed


def outcome_of(error: EpochalError | None) -> str:
    if error is None:
        return "success"
    return "rejection" if isinstance(error, Rejected | InvalidRequest) else "failure"


class CMSMetrics:
    def __init__(self) -> None:
        m = self.metrics = Metrics()
        self.current_epoch = m.gauge(
            "epochal_current_epoch", "the newest epoch this member has applied"
        )
        self.members = m.gauge(
            "epochal_cms_members", "voting CMS members, as the metadata this member applied says"
        )
        self.unreachable = m.gauge(
            "epochal_cms_unreachable_members",
            "other voting CMS members that did not answer their last health check (each is "
            "checked every second)",
        )
        self.is_leader = m.gauge("epochal_cms_is_leader", "1 while this member leads")
        self.commit_latency = m.histogram(
            "epochal_cms_commit_latency_seconds",
            "clients' commits on the member they called, from arrival to answer, by outcome "
            "(success, rejection, failure) and group of transformation",
            ("outcome", "kind"),
        )
        zeroed(self.commit_latency, OUTCOMES, GROUPS)

    def read_from(
        self,
        epoch: Callable[[], float],
        members: Callable[[], float],
        unreachable: Callable[[], float],
        is_leader: Callable[[], float],
    ) -> None:
        """The gauges read these when scraped (from the scrape's thread: each reads one value
        the member's loop replaces whole)."""
        self.current_epoch.set_function(epoch)
        self.members.set_function(members)
        self.unreachable.set_function(unreachable)
        self.is_leader.set_function(is_leader)

    def committed(self, kind: str, error: EpochalError | None, seconds: float) -> None:
        self.commit_latency.labels(outcome_of(error), group_of(kind)).observe(seconds)
