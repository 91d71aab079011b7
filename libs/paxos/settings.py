"""Bounds and timers of a Paxos member, checked when built (STYLE habit 6)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Test-only switches that plant known bugs, so the simulator can show it catches them.
BUG_SKIP_REPROPOSAL = "skip_reproposal"  # a new leader fills open slots with no-ops
BUG_REPLY_BEFORE_DURABLE = "reply_before_durable"  # acceptor replies before its write is durable
KNOWN_BUGS = frozenset({BUG_SKIP_REPROPOSAL, BUG_REPLY_BEFORE_DURABLE})


@dataclass(frozen=True, slots=True, kw_only=True)
class PaxosSettings:
    # α: at most this many slots proposed and not yet chosen. Slot s is governed by the
    # membership applied at slot s - α, so a leader always knows the voters of what it proposes.
    max_in_flight_slots: int = 1
    max_batch_values: int = 256
    max_batch_bytes: int = 1 << 20
    max_pending_values: int = 10_000
    max_catch_up_slots: int = 64
    heartbeat_interval_ms: int = 50
    election_timeout_ms: int = 300
    retransmit_interval_ms: int = 100
    # 0: the leader accepts its own proposals at once. Otherwise it lets the followers form the
    # quorum and casts its own vote only for a slot still not chosen after this long (then at
    # once, until a periodic probe finds the followers answering again): one fsync fewer per
    # slot while they are healthy, no stall when one is not.
    leader_vote_delay_ms: int = 0
    # With a vote delay: a slot of 1..this many values (a quiet log) gets the leader's vote at
    # once and goes to just enough followers for a quorum; the others get its value once it is
    # chosen (leader.py, "The leader's own vote"). Larger slots mean a busy log, where skipping
    # the leader's write saves its time. 0: off.
    leader_votes_small_slots_up_to: int = 0
    # An acceptor neither stores nor votes for a slot more than this many past its own durably
    # applied prefix (it catches up first), so a new leader never has more than this many open
    # slots to re-propose or fill: an Accept or a Promise naming a slot further out (a forged
    # one; a leader proposes at most α past its prefix) cannot make a member allocate without
    # bound. At least α + max_catch_up_slots, so that a member catching up keeps voting.
    accept_window_slots: int = 1 << 14
    # Readies the shell may have taken and not yet advanced (node.py, "The shell's side"): it
    # may take the next Ready while a write is in flight, but one it forgot fails loudly here
    # instead of stalling the member. A shell that performs each Ready before the next needs 1;
    # the CMS's loop reached 14 under the batching tests, the simulator's slow disk 18.
    max_unadvanced_readies: int = 256
    planted_bugs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        positive = {
            "max_in_flight_slots": self.max_in_flight_slots,
            "max_batch_values": self.max_batch_values,
            "max_batch_bytes": self.max_batch_bytes,
            "max_pending_values": self.max_pending_values,
            "max_catch_up_slots": self.max_catch_up_slots,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "election_timeout_ms": self.election_timeout_ms,
            "retransmit_interval_ms": self.retransmit_interval_ms,
            "max_unadvanced_readies": self.max_unadvanced_readies,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"PaxosSettings.{name} must be > 0, got {value}")
        if self.heartbeat_interval_ms * 2 > self.election_timeout_ms:
            raise ValueError(
                "PaxosSettings.election_timeout_ms must be at least twice heartbeat_interval_ms "
                f"(got {self.election_timeout_ms} and {self.heartbeat_interval_ms})"
            )
        if self.accept_window_slots < self.max_in_flight_slots + self.max_catch_up_slots:
            raise ValueError(
                "PaxosSettings.accept_window_slots must be at least max_in_flight_slots + "
                f"max_catch_up_slots (got {self.accept_window_slots}, {self.max_in_flight_slots} "
                f"and {self.max_catch_up_slots})"
            )
        if self.leader_votes_small_slots_up_to < 0:
            raise ValueError(
                "PaxosSettings.leader_votes_small_slots_up_to must be >= 0, "
                f"got {self.leader_votes_small_slots_up_to}"
            )
        if self.leader_vote_delay_ms < 0:
            raise ValueError(
                f"PaxosSettings.leader_vote_delay_ms must be >= 0, got {self.leader_vote_delay_ms}"
            )
        unknown = self.planted_bugs - KNOWN_BUGS
        if unknown:
            raise ValueError(f"unknown planted bugs {sorted(unknown)}; known: {sorted(KNOWN_BUGS)}")
