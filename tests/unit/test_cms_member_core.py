"""The CMS member core, driven directly: three cores in one process, messages delivered at
once, writes durable at once, time moved by hand. Each test is a claim of the core's theory of
operation (``epochal.cmscore.core``); the simulator (tests/sim) runs the same core under faults.
"""

from __future__ import annotations

import random
from collections import deque

import pytest

from epochal.cmscore import MemberConfig, MemberCore, Route
from epochal.cmscore import effects as fx
from epochal.cmscore.batching import proposal_item
from epochal.cmscore.rows import StoredState
from epochal.cmscore.state_machine import CommitResult, ProposalItem
from epochal.errors import EpochalError, NotLeader, Overloaded, Unavailable
from epochal.paxos import ChosenSlot, Message, Ready
from epochal.tcm import Column, ColumnType, CreateKeyspace, CreateTable, ReplicationParams

MEMBERS = {f"m{i}": f"127.0.0.1:{7000 + i}" for i in (1, 2, 3)}
EMPTY = StoredState(None, (), 0, None, (), ())


class Waiter:
    def __init__(self) -> None:
        self.outcome: CommitResult | EpochalError | None = None

    def done(self) -> bool:
        return self.outcome is not None


class Cores:
    """Three member cores and the least of a shell: every Ready performed at once."""

    def __init__(self, **settings: object) -> None:
        self.now_ms = 0
        self.cores = {
            m: MemberCore(
                MemberConfig(member_id=m, members=MEMBERS, listen_address=a, **settings),
                EMPTY,
                [],
                random=random.Random(n).random,
                now_ms=0,
            )
            for n, (m, a) in enumerate(MEMBERS.items())
        }
        self.messages: deque[Message] = deque()
        self.effects: dict[str, list[fx.Effect]] = {m: [] for m in MEMBERS}
        self.hold: set[str] = set()  # members whose chosen slots are not applied yet
        self.held: dict[str, list[ChosenSlot]] = {m: [] for m in MEMBERS}
        self.unadvanced: dict[str, list[Ready]] = {m: [] for m in MEMBERS}

    def drain(self, member: str) -> None:
        core = self.cores[member]
        while True:
            ready = core.node.take_ready()
            if ready.is_empty():
                if core.after_readies(self.now_ms):
                    continue
                break
            self.messages.extend(ready.messages)
            self.messages.extend(ready.messages_after_persist)
            if member in self.hold:
                self.held[member].extend(ready.chosen)
                self.unadvanced[member].append(ready)  # advanced once its slots are applied
                continue
            if ready.chosen:
                core.apply(ready.chosen)
            core.node.advance(ready)
        self.perform(member)

    def perform(self, member: str) -> None:
        for effect in self.cores[member].take_effects():
            self.effects[member].append(effect)
            if isinstance(effect, fx.Settle):
                assert isinstance(effect.waiter, Waiter)
                effect.waiter.outcome = effect.outcome

    def release(self, member: str) -> None:
        self.hold.discard(member)
        core = self.cores[member]
        core.apply(tuple(self.held[member]))
        self.held[member] = []
        for ready in self.unadvanced[member]:
            core.node.advance(ready)
        self.unadvanced[member] = []
        self.drain(member)

    def run(self, ms: int = 0) -> None:
        end = self.now_ms + ms
        while True:
            while self.messages:
                message = self.messages.popleft()
                self.cores[message.dst].node.step(message, self.now_ms)
                self.drain(message.dst)
            for member in MEMBERS:
                self.drain(member)
            if self.messages:
                continue
            if self.now_ms >= end:
                return
            self.now_ms += 5
            for member, core in self.cores.items():
                core.node.tick(self.now_ms)
                self.drain(member)

    def leader(self) -> str:
        leaders = [m for m, c in self.cores.items() if c.node.is_leader]
        assert len(leaders) == 1, leaders
        return leaders[0]

    def settled(self, member: str) -> list[fx.Settle]:
        return [e for e in self.effects[member] if isinstance(e, fx.Settle)]


def keyspace(name: str, entry_id: str) -> ProposalItem:
    return proposal_item(
        CreateKeyspace(name=name, replication=ReplicationParams.simple(1)), entry_id
    )


def started(**settings: object) -> Cores:
    cores = Cores(batch_linger_ms=0, **settings)
    cores.run(2000)  # a leader is elected and InitializeCMS applied everywhere
    assert all(c.epoch == 1 for c in cores.cores.values())
    return cores


def test_the_first_leader_initializes_the_cms_with_the_initial_members() -> None:
    cores = started()
    for core in cores.cores.values():
        assert core.sm.metadata.cms_voters == frozenset(MEMBERS)
        assert core.ready


def test_a_follower_forwards_and_answers_once_it_applied_the_slot() -> None:
    cores = started()
    leader = cores.leader()
    follower = next(m for m in MEMBERS if m != leader)
    item = keyspace("ks", "c-1")
    routing = cores.cores[follower].route(item)
    assert routing.route is Route.FORWARD and routing.leader == leader
    at_follower, at_leader = Waiter(), Waiter()
    cores.cores[follower].commits.forwarding(item, at_follower)
    assert cores.cores[leader].route_forwarded(item) is None
    cores.hold.add(follower)  # the follower learns the slot chosen but applies it later
    cores.cores[leader].enqueue(item, at_leader, follower, cores.now_ms)
    cores.run()
    assert isinstance(at_leader.outcome, CommitResult) and at_leader.outcome.epoch == 2
    assert at_follower.outcome is None, "answered before this member applied the slot"
    cores.release(follower)
    assert at_follower.outcome == at_leader.outcome


def test_a_retry_under_a_known_entry_id_is_answered_from_the_record() -> None:
    cores = started()
    leader = cores.leader()
    first = Waiter()
    cores.cores[leader].enqueue(keyspace("ks", "c-1"), first, None, cores.now_ms)
    cores.run(200)  # the followers learn the slot from the leader's next message
    for core in cores.cores.values():
        routing = core.route(keyspace("ks", "c-1"))
        assert routing.route is Route.ANSWERED
        assert routing.answer == CommitResult(2, duplicate=True)
    reused = cores.cores[leader].route(keyspace("other", "c-1"))
    assert isinstance(reused.answer, EpochalError) and "entry_id_reused" in str(reused.answer)


def test_the_leader_keeps_one_slot_in_flight_and_batches_what_queued_behind_it() -> None:
    cores = started()
    leader = cores.leader()
    core = cores.cores[leader]
    waiters = [Waiter() for _ in range(4)]
    assert core.enqueue(keyspace("k0", "c-0"), waiters[0], None, cores.now_ms)
    cores.drain(leader)  # the Accepts leave; nothing is delivered yet
    for n in (1, 2, 3):
        proposed = core.enqueue(keyspace(f"k{n}", f"c-{n}"), waiters[n], None, cores.now_ms)
        assert not proposed, "a second slot while one is in flight"
        assert core.node.in_flight_slots == 1
    cores.run()
    results = [w.outcome for w in waiters]
    assert all(isinstance(r, CommitResult) for r in results)
    slots = {r.slot for r in results if isinstance(r, CommitResult)}
    assert len(slots) == 2, f"the three queued behind the first share one slot: {results}"


def test_a_commit_that_fails_only_after_another_in_its_batch_waits_for_the_next_slot() -> None:
    cores = started()
    leader = cores.leader()
    core = cores.cores[leader]
    table = proposal_item(
        CreateTable(
            keyspace="ks", name="t", columns=(Column("id", ColumnType.TEXT),), partition_key=("id",)
        ),
        "c-table",
    )
    first, blocker, second = Waiter(), Waiter(), Waiter()
    core.enqueue(keyspace("other", "c-0"), first, None, cores.now_ms)
    cores.drain(leader)
    core.enqueue(keyspace("ks", "c-ks"), blocker, None, cores.now_ms)
    core.enqueue(table, second, None, cores.now_ms)
    cores.run()
    assert isinstance(blocker.outcome, CommitResult) and isinstance(second.outcome, CommitResult)
    assert second.outcome.epoch == blocker.outcome.epoch + 1


def test_a_full_queue_refuses_with_overloaded() -> None:
    cores = started(max_pending_commits=2)
    leader = cores.leader()
    core = cores.cores[leader]
    core.enqueue(keyspace("a", "c-a"), Waiter(), None, cores.now_ms)
    cores.drain(leader)  # in flight: the next two queue
    core.enqueue(keyspace("b", "c-b"), Waiter(), None, cores.now_ms)
    core.enqueue(keyspace("c", "c-c"), Waiter(), None, cores.now_ms)
    with pytest.raises(Overloaded):
        core.enqueue(keyspace("d", "c-d"), Waiter(), None, cores.now_ms)


def test_a_busy_leader_lingers_once_then_proposes_when_told() -> None:
    cores = Cores(batch_linger_ms=3.0, batch_linger_commits=1)
    cores.run(2000)
    leader = cores.leader()
    core = cores.cores[leader]
    core.enqueue(keyspace("a", "c-a"), Waiter(), None, cores.now_ms)
    cores.run()  # the last slot carried one commit: the next one lingers
    waiter = Waiter()
    assert not core.enqueue(keyspace("b", "c-b"), waiter, None, cores.now_ms)
    assert not core.enqueue(keyspace("c", "c-c"), Waiter(), None, cores.now_ms)
    cores.perform(leader)
    lingers = [e for e in cores.effects[leader] if isinstance(e, fx.StartLinger)]
    assert lingers == [fx.StartLinger(3.0)], "one timer for the window"
    assert core.linger_over(cores.now_ms)
    cores.run()
    assert isinstance(waiter.outcome, CommitResult)


def test_a_leader_that_steps_down_fails_its_queued_commits_with_not_leader() -> None:
    cores = started()
    leader = cores.leader()
    core = cores.cores[leader]
    core.enqueue(keyspace("a", "c-a"), Waiter(), None, cores.now_ms)
    cores.drain(leader)
    queued = Waiter()
    core.enqueue(keyspace("b", "c-b"), queued, None, cores.now_ms)
    cores.messages.clear()  # the leader is cut off; the others elect another
    others = [m for m in MEMBERS if m != leader]
    for _ in range(400):
        cores.now_ms += 5
        for member in others:
            cores.cores[member].node.tick(cores.now_ms)
            cores.drain(member)
        while cores.messages:
            message = cores.messages.popleft()
            cores.cores[message.dst].node.step(message, cores.now_ms)
            cores.drain(message.dst)
        if queued.done():
            break
    assert isinstance(queued.outcome, NotLeader)
    assert any(isinstance(e, fx.LeaderChanged) and not e.is_leader for e in cores.effects[leader])


def test_a_chosen_value_this_version_cannot_read_stops_the_member_not_the_process() -> None:
    cores = started()
    follower = next(m for m in MEMBERS if not cores.cores[m].node.is_leader)
    core = cores.cores[follower]
    waiter = Waiter()
    core.commits.forwarding(keyspace("x", "c-x"), waiter)
    core.apply((ChosenSlot(slot=core.sm.applied_slot + 1, value=(b"\xff not an item",)),))
    cores.perform(follower)
    assert core.stopped_applying and "cannot apply slot" in core.stopped_applying
    assert any(isinstance(e, fx.StoppedApplying) for e in cores.effects[follower])
    assert isinstance(waiter.outcome, Unavailable)
    assert core.route(keyspace("y", "c-y")).route is Route.ANSWERED
    assert not core.ready
