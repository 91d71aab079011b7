"""How a member that fell behind catches up, and how a joiner becomes a candidate: the core's
decisions (the shell fetches and writes). A member far behind at start copies a peer's state
(``learned_target``); one the peers' catch-up cannot serve is told to (``BeginStateTransfer``);
the copied state is installed whole (``install``); below an installed snapshot the log is filled
in from peers (``log_whole_up_to``). Part of ``MemberCore``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from epochal.cmscore.effects import BeginStateTransfer, Effect, PeersChanged, ReadinessChanged
from epochal.paxos import Membership, PaxosNode
from epochal.tcm import AddCMSCandidate, ClusterMetadata

if TYPE_CHECKING:
    from epochal.cmscore.commits import Commits
    from epochal.cmscore.config import MemberConfig
    from epochal.cmscore.state_machine import MetadataStateMachine

log = logging.getLogger("epochal.cmscore.core")


class CatchingUp:
    # Shared with MemberCore (declared here for the type checker).
    config: MemberConfig
    member_id: str
    sm: MetadataStateMachine
    node: PaxosNode
    commits: Commits
    snapshot_epochs: list[int]
    snapshots_installed: int
    target_epoch: int
    ready: bool
    stopped_applying: str
    _effects: list[Effect]

    if TYPE_CHECKING:  # MemberCore's

        def membership_of(self, metadata: ClusterMetadata) -> Membership: ...

        def peer_addresses(self, metadata: ClusterMetadata) -> dict[str, str]: ...

    def learned_target(self, epochs: Sequence[tuple[int, str]]) -> str | None:
        """The epochs peers reported at start: readiness waits for the newest; the peer to copy
        a state from when this member is more than a snapshot's worth behind it."""
        peer = None
        if epochs:
            self.target_epoch, newest = max(epochs)
            if self.target_epoch - self.sm.epoch > self.config.snapshot_frequency:
                peer = newest
        self.check_ready()
        return peer

    def check_ready(self) -> None:
        ready = self.sm.epoch >= max(self.target_epoch, 1) and not self.stopped_applying
        if ready != self.ready:
            self.ready = ready
            log.info(
                "member %s %s at epoch %d",
                self.member_id,
                "ready" if ready else "not ready",
                self.sm.epoch,
            )
            self._effects.append(ReadinessChanged(ready))

    def install(
        self,
        metadata: ClusterMetadata,
        applied_slot: int,
        entry_ids: list[tuple[str, int, int]],
        snapshot_epoch: int | None,
    ) -> bool:
        """A state copied from a peer (state transfer): False when it is not ahead of this
        member's. The shell wrote what was applied before (``take_applied``) and writes the
        installed state at once (it is durable when ``node.durable`` is told)."""
        if applied_slot <= self.sm.applied_slot:
            return False
        self.sm.install(metadata, applied_slot, entry_ids)
        self.node.install_state(applied_slot)
        # Every slot up to the installed one is chosen: the installed members govern the rest.
        self.node.applied(applied_slot, self.membership_of(metadata))
        self._effects.append(PeersChanged(self.peer_addresses(metadata)))
        self.commits.answer_installed(self.sm.lookup)  # slots the transfer skipped
        if snapshot_epoch is not None:
            self.snapshot_epochs.append(snapshot_epoch)
            self.snapshots_installed += 1
        self.check_ready()
        return True

    def begin_state_transfer(self, peer: str) -> None:
        self._effects.append(BeginStateTransfer(peer))

    def log_whole_up_to(self) -> int:
        """The epoch this member's stored log must hold every entry up to (below an installed
        snapshot, the backfill fetches them from peers)."""
        target = self.snapshot_epochs[-1] if self.snapshot_epochs else 0
        return min(target, self.sm.epoch)

    def candidacy(self) -> tuple[AddCMSCandidate, str] | None:
        """The commit a joiner sends the running CMS to become a candidate (transformation,
        entry id), or None once it is a member (or was never a joiner)."""
        if not self.config.joining or self.sm.metadata.cms_member(self.member_id) is not None:
            return None
        address = self.config.listen_address
        return AddCMSCandidate(self.member_id, address), f"cms-candidate:{self.member_id}:{address}"
