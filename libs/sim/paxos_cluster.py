"""A cluster of Paxos cores under seeded faults, with the invariants checked after every event.

Theory of operation
-------------------
Each ``SimMember`` wraps a ``PaxosNode`` and plays its shell the way ``epochal.cms`` does:
persists go to a simulated disk that completes them in order, each after a random delay;
acceptor replies leave only when their write (and every write before it) completed; chosen slots
are applied to a tiny state machine (each distinct value gets the next epoch; a value seen before
is a duplicate and a no-op — at-most-once at apply) and applied state is written lazily,
together with forgetting the accepted slots it covers; each Ready is advanced once performed
(its write completed, or at once if it waits for none). A crash drops everything not yet on
disk; a restart rebuilds the core from the disk alone.

Clients submit unique values to any member, follow "not leader" hints, and retry the *same*
value after a timeout, so duplicates reach the log and must be answered with the first epoch.

Reconfiguration (a third of the seeds): two more members start as learners, and a client
submits membership changes ("cfg/<n>/+m4", "cfg/<n>/-m1") among the values. Every member's
state machine applies a change that is valid against its voters (one member in or out, at least
three voters left) as the CMS does: the voters a slot s makes govern from s + α, and the shell
tells the core with ``applied``. The membership is durable with the applied state, so a
restarted member rebuilds it; a state transfer copies it.

A run has a fault phase (drops, duplicates, delays, partitions, crashes, restarts) and then a
healed phase that must reach convergence: every client done, every member at the same chosen
prefix with the same applied log. Invariants checked after every event:
  * at most one value is chosen per slot (across every member that learned it);
  * every member's applied log is a prefix of one log;
  * an acknowledged value is applied at the epoch it was acknowledged with, and only once.
The core asserts its own invariants as it runs: a seed that trips one fails with it too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from epochal.paxos import (
    ZERO_BALLOT,
    AcceptedSlot,
    Ballot,
    ChosenSlot,
    Configuration,
    Membership,
    Message,
    NotLeader,
    Overloaded,
    PaxosNode,
    PaxosSettings,
    Ready,
    SlotValue,
)
from epochal.sim.world import World


class InvariantViolation(AssertionError):
    pass


MIN_VOTERS = 3
EXTRA_MEMBERS = 2  # learners at the start of a reconfiguring run
RECONFIGURATION_CLIENT = "cfg"


@dataclass(slots=True)
class Coverage:
    leader_changes: int = 0
    reproposed_values: int = 0
    noop_fills: int = 0
    crashes: int = 0
    crashes_losing_unsynced_state: int = 0
    duplicated_messages: int = 0
    dropped_messages: int = 0
    state_transfers: int = 0
    duplicate_commits_answered: int = 0
    reconfigurations: int = 0  # membership changes applied (counted once, by the first member)
    leader_votes_needed: int = 0  # lazy own votes cast because the followers lagged
    small_slots: int = 0  # slots whose Accept went to a quorum only
    small_slot_fallbacks: int = 0  # of those, sent to everyone because the quorum lagged
    catch_up_elections: int = 0  # leaders that ran phase 1 again: their catch-up never came

    def add(self, other: Coverage) -> None:
        for name in self.__slots__:  # type: ignore[attr-defined]
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


@dataclass(slots=True)
class Disk:
    """What survives a crash."""

    promised: Ballot = ZERO_BALLOT
    accepted: dict[int, AcceptedSlot] = field(default_factory=dict)
    applied_slot: int = 0
    applied: list[tuple[int, bytes]] = field(default_factory=list)  # (epoch, value)
    membership: Membership | None = None  # as of applied_slot; None: the initial one


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    members: int  # voters at the start
    reconfiguring: bool
    alpha: int
    ok: bool
    failure: str
    coverage: Coverage
    acknowledged: int
    trace_digest: str
    trace: tuple[str, ...]
    end_ms: int


class SimMember:
    def __init__(self, cluster: PaxosCluster, member_id: str) -> None:
        self.cluster = cluster
        self.id = member_id
        self.disk = Disk()
        self.rng = random.Random(cluster.world.rng.random())
        self.up = False
        self.incarnation = 0
        self.node: PaxosNode
        self.applied_slot = 0
        self.epoch = 0
        self.epoch_of: dict[bytes, int] = {}
        self.applied: list[tuple[int, bytes]] = []
        self.waiters: dict[bytes, str] = {}  # value -> client waiting for its epoch
        self.pending_disk_writes = 0
        # Acceptor writes complete in the order queued, the last one at acceptor_writes_done_ms.
        self.acceptor_writes_queued = 0
        self.acceptor_writes_done_ms = 0
        self.transferring = False

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        world = self.cluster.world
        self.up = True
        self.incarnation += 1
        self.applied_slot = self.disk.applied_slot
        self.applied = list(self.disk.applied)
        self.epoch = len(self.applied)
        self.epoch_of = {value: epoch for epoch, value in self.applied}
        self.waiters = {}
        self.pending_disk_writes = 0
        self.acceptor_writes_queued = 0
        self.acceptor_writes_done_ms = 0
        self.transferring = False
        self.membership = self.disk.membership or self.cluster.membership
        self.node = PaxosNode(
            self.id,
            self.membership,
            self.cluster.settings,
            self.rng.random,
            world.now_ms,
            promised=self.disk.promised,
            accepted=self.disk.accepted.values(),
            chosen_up_to=self.disk.applied_slot,
        )
        self._schedule_tick(self.incarnation)

    def crash(self) -> bool:
        """Returns whether unsynced state was lost."""
        lost = self.pending_disk_writes > 0
        self.up = False
        self.incarnation += 1
        return lost

    def _schedule_tick(self, incarnation: int) -> None:
        def tick() -> None:
            if self.up and self.incarnation == incarnation:
                self.node.tick(self.cluster.world.now_ms)
                self.process()
                self._schedule_tick(incarnation)

        self.cluster.world.schedule(self.cluster.tick_ms, f"tick {self.id}", tick)

    # -------------------------------------------------------------- the shell

    def alive(self, incarnation: int) -> bool:
        return self.up and self.incarnation == incarnation

    def deliver(self, message: Message) -> None:
        if not self.up:
            return
        self.node.step(message, self.cluster.world.now_ms)
        self.process()

    def process(self) -> None:
        """Drain Readies: send, persist, then send acceptor replies, apply, and advance each
        once all of that is done (after its write completes, if it waits for one)."""
        while self.up:
            ready = self.node.take_ready()
            if ready.is_empty():
                return
            self._send_all(ready.messages)
            written_later = ready.needs_persist or self.acceptor_writes_queued > 0
            if written_later:
                self._persist_then_send(ready)  # after the writes of the Readies before it
            else:
                self._send_all(ready.messages_after_persist)
            self._apply(ready.chosen)
            if ready.state_transfer is not None:
                self._state_transfer(ready.state_transfer.peer)
            if not written_later:
                self.node.advance(ready)

    def _send_all(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.cluster.send(message)

    def _persist_then_send(self, ready: Ready) -> None:
        """Write the Ready's acceptor state after every write queued before it, then send the
        replies that depend on it (on every write before it, too: a Ready with no write of its
        own can carry a reply, a repeated Promise, that an earlier write backs)."""
        incarnation = self.incarnation
        world = self.cluster.world
        delay_ms = 0
        if ready.needs_persist:
            self.pending_disk_writes += 1
            delay_ms = self.cluster.disk_delay_ms()
        self.acceptor_writes_queued += 1
        self.acceptor_writes_done_ms = max(self.acceptor_writes_done_ms, world.now_ms + delay_ms)

        def complete() -> None:
            if not self.alive(incarnation):
                return
            self.acceptor_writes_queued -= 1
            if ready.needs_persist:
                self.pending_disk_writes -= 1
            if ready.persist_promise is not None:
                self.disk.promised = max(self.disk.promised, ready.persist_promise)
            for record in ready.persist_accepted:
                if record.slot > self.disk.applied_slot:
                    self.disk.accepted[record.slot] = record
            self._send_all(ready.messages_after_persist)
            self.node.advance(ready)  # applied when it was taken

        world.schedule(self.acceptor_writes_done_ms - world.now_ms, f"fsync {self.id}", complete)

    def _apply(self, chosen: Iterable[ChosenSlot]) -> None:
        for record in chosen:
            self.cluster.check_chosen(self.id, record.slot, record.value)
            assert record.slot == self.applied_slot + 1, (self.id, record.slot, self.applied_slot)
            self.applied_slot = record.slot
            for value in record.value:
                self._apply_value(value, record.slot)
            self.node.applied(record.slot, self.membership)
            self._write_applied_lazily(record.slot)

    def _apply_value(self, value: bytes, slot: int) -> None:
        first_epoch = self.epoch_of.get(value)
        if first_epoch is None:
            self.epoch += 1
            first_epoch = self.epoch_of[value] = self.epoch
            self.applied.append((self.epoch, value))
            self.cluster.check_applied(self.id, self.epoch, value)
            if value.startswith(b"cfg/"):
                self._reconfigure(value, slot)
        client = self.waiters.pop(value, None)
        if client is not None:
            self.cluster.acknowledge(self.id, client, value, first_epoch)

    def _reconfigure(self, value: bytes, slot: int) -> None:
        """Apply a membership change if it is valid against the current voters."""
        change = value.decode().rsplit("/", 1)[1]
        op, member = change[0], change[1:]
        latest = self.membership.configurations[-1]
        voters = set(latest.voters)
        if op == "+" and member not in voters:
            voters.add(member)
        elif op == "-" and member in voters and len(voters) > MIN_VOTERS:
            voters.discard(member)
        else:
            return  # not a change: the entry still takes its epoch, as a rejection would not
        configuration = Configuration(
            from_slot=slot + self.cluster.alpha,
            voters=frozenset(voters),
            learners=frozenset(self.cluster.members) - voters,
        )
        kept = tuple(
            c for c in self.membership.configurations if c.from_slot < configuration.from_slot
        )
        self.membership = Membership((*kept, configuration))
        self.cluster.note_reconfiguration(value)

    def _write_applied_lazily(self, slot: int) -> None:
        incarnation = self.incarnation
        applied = list(self.applied)
        membership = self.membership
        self.pending_disk_writes += 1

        def complete() -> None:
            if not self.alive(incarnation):
                return
            self.pending_disk_writes -= 1
            if slot <= self.disk.applied_slot:
                return
            self.disk.applied_slot = slot
            self.disk.applied = applied
            self.disk.membership = membership
            for s in [s for s in self.disk.accepted if s <= slot]:
                del self.disk.accepted[s]
            self.node.durable(slot)  # a crash from now on restarts at least here
            # Keep a few applied slots for catch-up, forget the rest.
            self.node.compact(max(0, slot - self.cluster.retain_slots))

        self.cluster.world.schedule(self.cluster.disk_delay_ms(), f"apply {self.id}", complete)

    def _state_transfer(self, peer_id: str) -> None:
        """Copy a peer's durable applied state (the CMS does this with FetchLog)."""
        if self.transferring:
            return
        peer = self.cluster.members[peer_id]
        self.transferring = True
        incarnation = self.incarnation

        def install() -> None:
            if not self.alive(incarnation):
                return
            self.transferring = False
            if not peer.up or peer.disk.applied_slot <= self.applied_slot:
                return
            slot = peer.disk.applied_slot
            for epoch, value in peer.disk.applied[self.epoch :]:
                self.epoch = epoch
                self.epoch_of[value] = epoch
                self.applied.append((epoch, value))
                self.cluster.check_applied(self.id, epoch, value)
            self.applied_slot = slot
            self.membership = peer.disk.membership or self.cluster.membership
            self.disk.applied_slot = slot
            self.disk.applied = list(self.applied)
            self.disk.membership = self.membership
            for s in [s for s in self.disk.accepted if s <= slot]:
                del self.disk.accepted[s]
            self.node.install_state(slot)
            self.node.applied(slot, self.membership)
            self.node.durable(slot)
            self.cluster.coverage.state_transfers += 1
            self.process()

        self.cluster.world.send(peer_id, self.id, "state-transfer", install)

        def give_up() -> None:
            # The transfer can be lost like any message; a later catch-up reply asks again.
            if self.alive(incarnation):
                self.transferring = False

        self.cluster.world.schedule(200, f"state-transfer timeout {self.id}", give_up)

    # -------------------------------------------------------------- clients

    def submit(self, client: str, value: bytes) -> None:
        if not self.up:
            return
        first_epoch = self.epoch_of.get(value)
        if first_epoch is not None:
            self.cluster.coverage.duplicate_commits_answered += 1
            self.cluster.acknowledge(self.id, client, value, first_epoch)
            return
        # Name random members as learners, as the CMS names the members that forwarded a
        # value: they learn its slot from the votes themselves.
        learners = [m for m in self.cluster.members if self.rng.random() < 0.5]
        try:
            self.node.propose([value], self.cluster.world.now_ms, learners)
        except NotLeader as error:
            self.cluster.redirect(self.id, client, value, error.leader_id)
            return
        except Overloaded:
            return
        self.waiters[value] = client
        self.process()


@dataclass(slots=True)
class SimClient:
    id: str
    remaining: int
    value: bytes | None = None
    attempt: int = 0
    target: str | None = None


class PaxosCluster:
    def __init__(
        self,
        seed: int,
        *,
        members: int,
        planted_bugs: frozenset[str] = frozenset(),
        trace: bool = False,
        reconfigure: bool = False,
    ) -> None:
        self.world = World(seed, trace=trace)
        self.voters = members
        rng = self.world.rng
        self.alpha = rng.choice([1, 2, 3, 4])
        self.settings = PaxosSettings(
            max_in_flight_slots=self.alpha,
            max_batch_values=rng.choice([1, 2, 4]),
            max_pending_values=64,
            max_catch_up_slots=4,
            heartbeat_interval_ms=20,
            election_timeout_ms=80,
            retransmit_interval_ms=30,
            # Half the seeds let the followers decide and the leader vote only when they lag.
            leader_vote_delay_ms=rng.choice([0, 0, 8, 25]),
            leader_votes_small_slots_up_to=rng.choice([0, 1, 2]),
            # A third of the seeds give acceptors the smallest windows allowed, so that votes
            # at the window's edge, and crashes that lose applied state, meet.
            accept_window_slots=rng.choice([self.alpha + 4, self.alpha + 6, 1 << 14]),
            # The slow disk holds at most 18 Readies in flight over 2,000 seeds: a shell that
            # forgets to advance one reaches this within a run (256 it may never reach).
            max_unadvanced_readies=64,
            planted_bugs=planted_bugs,
        )
        self.tick_ms = 5
        self.retain_slots = rng.choice([2, 8, 1000])
        self.max_disk_delay_ms = rng.choice([1, 3, 8, 30])
        voters = [f"m{i}" for i in range(1, members + 1)]
        extras = [f"m{members + i}" for i in range(1, EXTRA_MEMBERS + 1)] if reconfigure else []
        self.membership = Membership.initial(frozenset(voters), learners=frozenset(extras))
        self.members = {member_id: SimMember(self, member_id) for member_id in voters + extras}
        self.reconfigured: set[bytes] = set()
        self.coverage = Coverage()
        self.chosen: dict[int, SlotValue] = {}
        self.log: dict[int, bytes] = {}  # epoch -> value, the one applied log
        self.acknowledged: dict[bytes, int] = {}
        self._healed = False
        self.clients = [
            SimClient(f"c{i}", remaining=rng.randint(4, 10)) for i in range(rng.choice([3, 6]))
        ]
        if reconfigure:
            self.clients.append(SimClient(RECONFIGURATION_CLIENT, remaining=rng.randint(6, 12)))
        self._next_request = 0

    def note_reconfiguration(self, value: bytes) -> None:
        if value not in self.reconfigured:
            self.reconfigured.add(value)
            self.coverage.reconfigurations += 1

    # -------------------------------------------------------------- invariants

    def check_chosen(self, member: str, slot: int, value: SlotValue) -> None:
        known = self.chosen.setdefault(slot, value)
        if known != value:
            raise InvariantViolation(
                f"two values chosen for slot {slot}: {known!r} and {value!r} (at {member})"
            )

    def check_applied(self, member: str, epoch: int, value: bytes) -> None:
        known = self.log.setdefault(epoch, value)
        if known != value:
            raise InvariantViolation(
                f"{member} applied {value!r} at epoch {epoch}, others applied {known!r}: "
                "applied logs are not prefixes of one log"
            )

    def acknowledge(self, member: str, client_id: str, value: bytes, epoch: int) -> None:
        first = self.acknowledged.get(value)
        if first is not None and first != epoch:
            raise InvariantViolation(
                f"{value!r} acknowledged at epoch {first} and again at epoch {epoch} (by {member})"
            )

        def arrive() -> None:
            self.acknowledged.setdefault(value, epoch)
            client = self._client(client_id)
            if client.value == value:
                client.value = None
                client.remaining -= 1
                self.world.schedule(1, f"client {client.id} next", lambda: self._next(client))

        self.world.send(member, client_id, "ack", arrive)

    def check_acknowledged_everywhere(self) -> None:
        for value, epoch in self.acknowledged.items():
            for member in self.members.values():
                if member.epoch_of.get(value) != epoch:
                    raise InvariantViolation(
                        f"{value!r} was acknowledged at epoch {epoch} but {member.id} has it at "
                        f"{member.epoch_of.get(value)}"
                    )

    # -------------------------------------------------------------- network and clients

    def send(self, message: Message) -> None:
        target = self.members[message.dst]
        incarnation = target.incarnation
        src = self.members[message.src]

        def deliver() -> None:
            if target.alive(incarnation):
                target.deliver(message)

        if message.dst == message.src:
            # Local delivery: no network, but still after the current handler returns.
            self.world.schedule(0, f"{type(message).__name__} {src.id}->self", deliver)
        else:
            self.world.send(message.src, message.dst, type(message).__name__, deliver)

    def _client(self, client_id: str) -> SimClient:
        return next(c for c in self.clients if c.id == client_id)

    def _next(self, client: SimClient) -> None:
        if client.value is not None or client.remaining <= 0:
            return
        self._next_request += 1
        client.value = f"{client.id}/{self._next_request}".encode()
        if client.id == RECONFIGURATION_CLIENT:
            op = self.world.rng.choice("+-")
            member = self.world.rng.choice(sorted(self.members))
            client.value += f"/{op}{member}".encode()
        client.attempt = 0
        self._attempt(client)

    def _attempt(self, client: SimClient) -> None:
        value = client.value
        if value is None:
            return
        client.attempt += 1
        attempt = client.attempt
        target = client.target or self.world.rng.choice(sorted(self.members))
        client.target = None
        member = self.members[target]
        self.world.send(client.id, target, "submit", lambda: member.submit(client.id, value))

        def timeout() -> None:
            if client.value == value and client.attempt == attempt:
                self._attempt(client)

        self.world.schedule(150, f"client {client.id} timeout", timeout)

    def redirect(self, member: str, client_id: str, value: bytes, leader: str | None) -> None:
        def arrive() -> None:
            client = self._client(client_id)
            if client.value == value:
                client.target = leader
                attempt = client.attempt

                def retry() -> None:
                    if client.value == value and client.attempt == attempt:
                        self._attempt(client)

                self.world.schedule(10, f"client {client.id} redirect", retry)

        self.world.send(member, client_id, "not-leader", arrive)

    # -------------------------------------------------------------- faults

    def disk_delay_ms(self) -> int:
        return self.world.rng.randint(0, self.max_disk_delay_ms)

    def _fault(self) -> None:
        rng = self.world.rng
        faults = self.world.faults
        choice = rng.random()
        ids = sorted(self.members)
        if choice < 0.05:
            # Power loss: every member at once loses what its disk had not made durable.
            for member_id in ids:
                member = self.members[member_id]
                if member.up:
                    self.coverage.crashes += 1
                    if member.crash():
                        self.coverage.crashes_losing_unsynced_state += 1
            self.world.record("power loss")
        elif choice < 0.35:
            down = [m for m in ids if not self.members[m].up]
            up = [m for m in ids if self.members[m].up]
            if down and (rng.random() < 0.5 or len(up) <= 1):
                member = self.members[rng.choice(down)]
                member.start()
                self.world.record(f"restart {member.id}")
            elif up:
                # Half the crashes aim at the leader, mid-proposal more often than not.
                leaders = [m for m in up if self.members[m].node.is_leader]
                pool = leaders if leaders and rng.random() < 0.5 else up
                member = self.members[rng.choice(pool)]
                self.coverage.crashes += 1
                if member.crash():
                    self.coverage.crashes_losing_unsynced_state += 1
                self.world.record(f"crash {member.id}")
        elif choice < 0.6:
            shuffled = list(ids)
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(ids) - 1)
            faults.partition = (frozenset(shuffled[:cut]), frozenset(shuffled[cut:]))
            self.world.record(f"partition {sorted(shuffled[:cut])}")
        elif choice < 0.7:
            faults.partition = None
            self.world.record("heal partition")
        elif choice < 0.75:
            # A burst of lost Accepts: slots get accepted out of order, leaving holes.
            # Then the leader dies mid-burst, before it retransmits.
            faults.drop_probability_by_label = {"Accept": 0.7}
            self.world.schedule(30, "accept loss ends", faults.drop_probability_by_label.clear)
            self.world.schedule(rng.randint(2, 20), "leader crash", self._crash_leader)
            self.world.record("accept loss burst")
        else:
            faults.drop_probability = rng.choice([0.0, 0.05, 0.2, 0.4])
            faults.duplicate_probability = rng.choice([0.0, 0.05, 0.2])
            faults.max_delay_ms = rng.choice([2, 5, 20])
            faults.slow_probability = rng.choice([0.0, 0.02, 0.1])
            self.world.record(
                f"network drop={faults.drop_probability} dup={faults.duplicate_probability}"
            )

    def _crash_leader(self) -> None:
        if self._healed:
            return
        for member in self.members.values():
            if member.up and member.node.is_leader:
                self.coverage.crashes += 1
                if member.crash():
                    self.coverage.crashes_losing_unsynced_state += 1
                self.world.record(f"crash leader {member.id}")

    def _schedule_faults(self, until_ms: int) -> None:
        at = 0
        while True:
            at += self.world.rng.randint(10, 120)
            if at >= until_ms:
                return
            self.world.schedule(at, "fault", self._fault)

    def _heal(self) -> None:
        self._healed = True
        faults = self.world.faults
        faults.partition = None
        faults.drop_probability = 0.0
        faults.duplicate_probability = 0.0
        faults.max_delay_ms = 4
        faults.slow_probability = 0.0
        faults.drop_probability_by_label.clear()
        for member in self.members.values():
            if not member.up:
                member.start()
        self.world.record("heal all")

    def _converged(self) -> bool:
        if any(c.remaining > 0 or c.value is not None for c in self.clients):
            return False
        members = list(self.members.values())
        chosen = {m.node.chosen_up_to for m in members}
        applied = {m.applied_slot for m in members}
        # Equal prefixes are not enough: a slot a member applied and acknowledged may have been
        # lost from every applied state by power loss, and only a new leader's phase 1 brings it
        # back (it is still accepted durably). Converged means every acknowledged value is in
        # every member's log again.
        return (
            len(chosen) == 1
            and applied == chosen
            and all(
                m.epoch_of.get(value) == epoch
                for value, epoch in self.acknowledged.items()
                for m in members
            )
        )

    # -------------------------------------------------------------- a run

    def run(self, fault_ms: int = 1500, heal_ms: int = 8000) -> RunResult:
        failure = ""
        try:
            for member in self.members.values():
                member.start()
            for client in self.clients:
                self.world.schedule(
                    self.world.rng.randint(0, 100),
                    f"client {client.id} start",
                    self._make_start(client),
                )
            self._schedule_faults(fault_ms)
            self.world.run_until(fault_ms, lambda: None)
            self._heal()
            if not self.world.run_while(
                fault_ms + heal_ms, lambda: not self._converged(), lambda: None
            ):
                failure = "no progress after healing: " + self._describe()
            else:
                self.check_acknowledged_everywhere()
        except InvariantViolation as violation:
            failure = str(violation)
        except AssertionError as violation:  # the core's own invariants, reported with the seed
            failure = f"{type(violation).__name__} in the core: {violation}"
        self._collect_coverage()
        return RunResult(
            seed=self.world.seed,
            members=self.voters,
            reconfiguring=len(self.members) > self.voters,
            alpha=self.alpha,
            ok=not failure,
            failure=failure,
            coverage=self.coverage,
            acknowledged=len(self.acknowledged),
            trace_digest=self.world.trace_digest,
            trace=tuple(self.world.trace),
            end_ms=self.world.now_ms,
        )

    def _make_start(self, client: SimClient) -> Callable[[], None]:
        return lambda: self._next(client)

    def _collect_coverage(self) -> None:
        for member in self.members.values():
            stats = member.node.stats
            self.coverage.leader_changes += stats.leader_changes
            self.coverage.reproposed_values += stats.reproposed_values
            self.coverage.noop_fills += stats.noop_fills
            self.coverage.leader_votes_needed += stats.own_votes_needed
            self.coverage.small_slots += stats.small_slots
            self.coverage.small_slot_fallbacks += stats.small_slot_fallbacks
            self.coverage.catch_up_elections += stats.catch_up_elections
        self.coverage.duplicated_messages = self.world.counters.duplicated
        self.coverage.dropped_messages = self.world.counters.dropped

    def _describe(self) -> str:
        parts = []
        for member in self.members.values():
            status = member.node.status()
            parts.append(
                f"{member.id}(up={member.up} role={status.role.value} chosen={status.chosen_up_to}"
                f" applied={member.applied_slot} leader={status.leader_id})"
            )
        waiting = [c.id for c in self.clients if c.remaining > 0 or c.value is not None]
        return " ".join(parts) + f" clients waiting: {waiting}"


def run_seed(
    seed: int,
    *,
    members: int | None = None,
    planted_bugs: frozenset[str] = frozenset(),
    trace: bool = False,
) -> RunResult:
    """One simulation; the member count alternates 3/5 with the seed unless given, and every
    third seed changes the membership as it runs."""
    count = members if members is not None else (3 if seed % 2 == 0 else 5)
    return PaxosCluster(
        seed,
        members=count,
        planted_bugs=planted_bugs,
        trace=trace,
        reconfigure=seed % 3 == 0,
    ).run()
