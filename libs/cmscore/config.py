"""What a CMS member core is configured with, and the bugs a simulator run may plant in it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from epochal.paxos import KNOWN_BUGS as PAXOS_BUGS
from epochal.paxos import PaxosSettings

# Bugs the simulator plants in the member core (never set outside it), to show its seeds catch
# them: each breaks one promise of the core.
BUG_ANSWER_FORWARDED_EARLY = "answer_forwarded_early"  # a forwarded commit answered at proposal
BUG_FORGET_ENTRY_ID = "forget_entry_id"  # apply keeps no record of an id: a retry commits again
BUG_SNAPSHOT_AS_IF_LAST = "snapshot_as_if_last"  # a snapshot mid-slot taken at the slot's end
MEMBER_BUGS = frozenset({BUG_ANSWER_FORWARDED_EARLY, BUG_FORGET_ENTRY_ID, BUG_SNAPSHOT_AS_IF_LAST})
KNOWN_BUGS = MEMBER_BUGS | PAXOS_BUGS

# Room in a slot besides the commits: the leader's InitializeCMS and TriggerSnapshot.
_OWN_ITEMS = 2
_OWN_ITEM_BYTES = 64 << 10


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberConfig:
    member_id: str
    members: Mapping[str, str]  # the initial voters (InitializeCMS names them): id -> address
    listen_address: str
    snapshot_frequency: int = 100
    heartbeat_interval_ms: int = 50
    election_timeout_ms: int = 500
    retransmit_interval_ms: int = 100
    leader_vote_delay_ms: int = 10
    leader_votes_small_slots_up_to: int = 2
    max_batch_values: int = 512
    max_batch_bytes: int = 4 << 20
    batch_linger_ms: float = 2.0
    batch_linger_commits: int = 3
    max_pending_commits: int = 20_000
    entry_id_retention_epochs: int = 100_000
    retain_slots: int = 1_000  # applied slots the Paxos core keeps for peers' catch-up
    # False only in the simulator: it stands for a leader of an older version, which batched a
    # client's TriggerSnapshot like any commit (epochal.cmscore.batching); the slots such a
    # leader chose must still apply alike everywhere, with each snapshot at its own epoch.
    snapshot_closes_slot: bool = True
    # A bound the shell's Ready protocol is held to (the simulator lowers it to catch a shell
    # that forgets to advance).
    max_unadvanced_readies: int = 256
    planted_bugs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        unknown = self.planted_bugs - KNOWN_BUGS
        if unknown:
            raise ValueError(f"unknown planted bugs {sorted(unknown)}; known: {sorted(KNOWN_BUGS)}")

    @classmethod
    def of(cls, settings: Any, **overrides: Any) -> MemberConfig:
        """The core's part of a member's settings (any object with these attributes)."""
        values = {
            f.name: getattr(settings, f.name)
            for f in fields(cls)
            if f.name not in overrides and hasattr(settings, f.name)
        }
        return cls(**values, **overrides)

    @property
    def joining(self) -> bool:
        """Not an initial voter: registers as a candidate through ``members``."""
        return self.member_id not in self.members

    def paxos_settings(self) -> PaxosSettings:
        """One slot in flight (DESIGN.md "Careful"); a batch may also carry the leader's own
        InitializeCMS and TriggerSnapshot."""
        values = self.max_batch_values + _OWN_ITEMS
        return PaxosSettings(
            max_in_flight_slots=1,
            max_batch_values=values,
            max_batch_bytes=self.max_batch_bytes + _OWN_ITEM_BYTES,
            max_pending_values=values,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            election_timeout_ms=self.election_timeout_ms,
            retransmit_interval_ms=self.retransmit_interval_ms,
            leader_vote_delay_ms=self.leader_vote_delay_ms,
            leader_votes_small_slots_up_to=self.leader_votes_small_slots_up_to,
            max_unadvanced_readies=self.max_unadvanced_readies,
            planted_bugs=self.planted_bugs & PAXOS_BUGS,
        )
