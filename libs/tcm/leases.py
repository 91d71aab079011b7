"""Reconciler leases in the metadata log: a grant per token range, its epoch the fencing token.
Pure.

Theory of operation
-------------------
Reconcilers share the token ranges of tracked keyspaces. One takes a range by committing
``GrantReconcileLease``; the grant's epoch is the lease's **token**, so tokens only grow and every
follower of the log learns them in log order (``epochal.mtrack.leases`` is the replicas' side:
renewals, lapses, and refusing any token below the highest seen). Renewals are not in the log.

* *A range's token* (``ClusterMetadata.lease_of``) is the grant with the highest epoch among the
  keyspace's grants whose range intersects it. Ranges split and merge under the grants: a piece
  split from a granted range is still held under the old token, and a merged range answers the
  highest token of what it merged — a holder of either side may still be acting on it.
* *A grant is a compare-and-set*: ``replaces`` is the token its grantor saw for the range, and
  the CMS, which validates each commit against the tail of the log, refuses it once any other
  grant intersecting the range came in between (``lease_changed``). Of two contenders that both
  saw a lapsed lease, the second is refused and so never holds the range with the first.
* *A release is a grant to nobody* (holder ""): the range is free for any reconciler, and its
  token still rises, so the former holder is fenced like after any other grant.
* *Grants stay few*: a grant whose range is covered by the grants of higher epochs of its
  keyspace can never answer ``lease_of`` again, and is dropped when the covering grant is
  added. Dropping a keyspace drops its grants (``DropKeyspace``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.schema import ReplicationType
from epochal.tcm.tokens import TokenRange, check_token, union_covers
from epochal.tcm.transformations import Transformation

MAX_HOLDER_CHARS = 256
FREE = ""  # the holder of a released range: nobody


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """``holder`` (FREE: nobody) took ``range`` of ``keyspace`` at ``epoch``, its token."""

    keyspace: str
    range: TokenRange
    holder: str
    epoch: int

    def __str__(self) -> str:
        return f"{self.keyspace} {self.range} -> {self.holder or 'free'} @{self.epoch}"


class LeaseChanged(Rejected):
    """A grant's ``replaces`` is not the range's token: another grant came in between."""

    def __init__(self, keyspace: str, token_range: TokenRange, current: LeaseGrant | None) -> None:
        token = current.epoch if current is not None else 0
        if current is None:
            now = f"no grant holds it: it is free (grant with replaces={token})"
        elif current.holder == FREE:
            now = f"it was released at token {token}: it is free (grant with replaces={token})"
        else:
            now = (
                f"it is held by {current.holder!r} under token {token} (granted for "
                f"{current.range}); grant with replaces={token} only once that lease has lapsed"
            )
        super().__init__("lease_changed", f"the lease of {keyspace} {token_range} changed: {now}")
        self.holder = current.holder if current is not None else FREE
        self.token = token


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantReconcileLease(Transformation):
    """Gives ``range`` of ``keyspace`` to ``holder`` (a reconciler's id; FREE releases it) if its
    token is still ``replaces`` (0: never granted)."""

    keyspace: str
    range: TokenRange
    holder: str
    replaces: int
    kind: ClassVar[str] = "grant_reconcile_lease"

    def check_input(self) -> None:
        """A holder of at most MAX_HOLDER_CHARS, a range of real tokens (each such range holds
        some: ``(t, t]`` is the whole ring), a token that is an epoch."""
        if len(self.holder) > MAX_HOLDER_CHARS:
            raise Rejected(
                "bad_lease",
                f"holder is {len(self.holder)} characters; a reconciler id is 1..{MAX_HOLDER_CHARS}"
                ' ("" releases the range)',
            )
        for end in (self.range.left, self.range.right):
            try:
                check_token(end)
            except ValueError as error:
                raise Rejected("bad_lease", f"range {self.range}: {error}") from None
        if self.replaces < 0:
            raise Rejected("bad_lease", f"replaces is a token (an epoch, 0: none): {self.replaces}")

    def check(self, metadata: ClusterMetadata) -> None:
        self.check_input()  # born with the kind: chosen entries are held to it too
        keyspace = metadata.keyspaces.get(self.keyspace)
        if keyspace is None:
            raise Rejected("keyspace_not_found", f"keyspace {self.keyspace!r} does not exist")
        if keyspace.replication_type is not ReplicationType.TRACKED:
            raise Rejected(
                "keyspace_not_tracked",
                f"keyspace {self.keyspace!r} is {keyspace.replication_type.value}: only the "
                "ranges of tracked keyspaces are reconciled",
            )
        current = metadata.lease_of(self.keyspace, self.range)
        if (current.epoch if current is not None else 0) != self.replaces:
            raise LeaseChanged(self.keyspace, self.range, current)

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        granted = LeaseGrant(
            keyspace=self.keyspace, range=self.range, holder=self.holder, epoch=epoch
        )
        return replace(metadata, reconcile_leases=with_grant(metadata.reconcile_leases, granted))

    def __str__(self) -> str:
        who = self.holder or "nobody (release)"
        return f"GrantReconcileLease({self.keyspace} {self.range} -> {who}, {self.replaces})"


def with_grant(grants: tuple[LeaseGrant, ...], granted: LeaseGrant) -> tuple[LeaseGrant, ...]:
    """``grants`` plus ``granted`` (the highest epoch so far), less the grants of its keyspace
    whose range the grants of higher epochs cover; sorted by keyspace, range, epoch."""
    assert all(g.epoch < granted.epoch for g in grants), "a grant's epoch is the newest"
    same = [g for g in grants if g.keyspace == granted.keyspace]
    others = [g for g in grants if g.keyspace != granted.keyspace]
    kept = [
        g
        for g in same
        if not union_covers((h.range for h in (*same, granted) if h.epoch > g.epoch), g.range)
    ]
    return tuple(sorted((*others, *kept, granted), key=lambda g: (g.keyspace, g.range, g.epoch)))
