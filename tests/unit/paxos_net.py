"""A hand-driven network of pure Paxos cores for the tests: each Ready performed and advanced
as a shell must (``take``), messages delivered, dropped or held on command."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from epochal.paxos import (
    Membership,
    Message,
    PaxosNode,
    PaxosSettings,
    Ready,
    StateTransfer,
)

SETTINGS = PaxosSettings(
    max_in_flight_slots=2,
    max_batch_values=3,
    max_pending_values=8,
    heartbeat_interval_ms=10,
    election_timeout_ms=100,
    retransmit_interval_ms=20,
    max_unadvanced_readies=1,  # these shells perform each Ready before taking the next
)


def take(node: PaxosNode) -> Ready:
    """Take a Ready and acknowledge it: the test is the shell, and does with it what it says."""
    ready = node.take_ready()
    node.advance(ready)
    return ready


@dataclass
class Net:
    """Delivers messages in FIFO order; persists are instant; `down` members get nothing."""

    ids: tuple[str, ...] = ("a", "b", "c")
    settings: PaxosSettings = SETTINGS
    now: int = 0
    nodes: dict[str, PaxosNode] = field(default_factory=dict)
    queue: deque[Message] = field(default_factory=deque)
    applied: dict[str, list[tuple[int, tuple[bytes, ...]]]] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    transfers: dict[str, StateTransfer] = field(default_factory=dict)
    auto_apply: bool = True  # the shell applies what is chosen at once and tells the core
    applied_through: dict[str, int] = field(default_factory=dict)
    unadvanced: dict[str, deque[Ready]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        membership = Membership.initial(frozenset(self.ids))
        for node_id in self.ids:
            self.nodes[node_id] = PaxosNode(node_id, membership, self.settings, lambda: 0.0, 0)
            self.applied[node_id] = []
            self.applied_through[node_id] = 0
            self.unadvanced[node_id] = deque()

    def pump(self, node_id: str) -> None:
        ready = self.nodes[node_id].take_ready()
        self.unadvanced[node_id].append(ready)
        self.queue.extend(ready.messages)
        self.queue.extend(ready.messages_after_persist)
        self.applied[node_id].extend((c.slot, c.value) for c in ready.chosen)
        if ready.chosen and self.auto_apply:  # applied: the core knows the voters past them
            self.apply(node_id, ready.chosen[-1].slot)
        if ready.state_transfer is not None:
            self.transfers[node_id] = ready.state_transfer
        self.advance(node_id)

    def apply(self, node_id: str, up_to: int) -> None:
        node = self.nodes[node_id]
        node.applied(up_to, node.membership)
        self.applied_through[node_id] = up_to
        self.advance(node_id)

    def advance(self, node_id: str) -> None:
        """Acknowledge, in the order taken, every Ready performed: its chosen slots applied."""
        taken = self.unadvanced[node_id]
        while taken and (
            not taken[0].chosen or taken[0].chosen[-1].slot <= self.applied_through[node_id]
        ):
            self.nodes[node_id].advance(taken.popleft())

    def run(self, max_steps: int = 10_000) -> None:
        for node_id in self.ids:
            self.pump(node_id)
        for _ in range(max_steps):
            if not self.queue:
                return
            message = self.queue.popleft()
            if message.dst in self.down:
                continue
            self.nodes[message.dst].step(message, self.now)
            self.pump(message.dst)
        raise AssertionError("network did not settle")

    def elect(self, node_id: str) -> None:
        self.now += 1_000
        self.nodes[node_id].tick(self.now)
        self.run()
        assert self.nodes[node_id].is_leader
