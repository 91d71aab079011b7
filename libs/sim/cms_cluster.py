"""A CMS under seeded faults: members running the member core the server runs, clients that
commit every transformation kind, and the invariants checked after every event.

Theory of operation
-------------------
Three or five members start from empty disks with the same initial voters; every third seed
adds two joiners, which register as candidates through the initial members and follow the log
as learners, as ``epochal.cms`` does. Clients commit transformations of every kind (the CMS
membership kinds naming the simulated members, so the voters change as the run goes), each
under its own entry id, to any member — leaders and followers alike — and retry the same commit
under the same entry id after a timeout or a refusal that asks for it; some commit again what
was already answered. A run has a fault phase (drops, duplicates, delays, partitions, crashes,
power loss, bursts of lost Accepts: ``epochal.sim.cms_faults``) and then a healed phase that
must converge: every client done, every member at the same applied slot and epoch.

Invariants (``epochal.sim.cms_checks``), checked as the core emits what they are about:
  * at most one value is chosen per slot, across every member that learned it;
  * every member's applied log is a prefix of one log, and an entry id is in it at most once;
  * every member's state is the same at the same epoch, and each snapshot holds the state of
    its own epoch;
  * a commit is answered at most once by each member it waits at, and a committed answer names
    the epoch at which the log holds that very transformation, applied somewhere (so chosen)
    before the answer left — a forwarded commit included — and every committed answer for one
    entry id agrees (that a commit told it was refused never commits is not held: see
    ``Checks.at_the_end``);
  * no member stops applying.
The cores assert their own invariants as they run: a seed that trips one fails with it too.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from epochal.cmscore import MemberConfig
from epochal.cmscore.batching import proposal_item
from epochal.cmscore.state_machine import CommitResult, ProposalItem
from epochal.errors import EpochalError, NotLeader, Rejected
from epochal.paxos import Message
from epochal.sim.cms_checks import Checks, Coverage, InvariantViolation
from epochal.sim.cms_faults import Faults
from epochal.sim.cms_member import SimShell
from epochal.sim.cms_workload import draw_commit, operator_script
from epochal.sim.world import World
from epochal.tcm import Transformation

EXTRA_MEMBERS = 2  # joiners at the start of a reconfiguring run
CLIENT_TIMEOUT_MS = 150
REDIRECT_PAUSE_MS = 10


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    members: int  # initial voters
    reconfiguring: bool
    ok: bool
    failure: str
    coverage: Coverage
    acknowledged: int
    trace_digest: str
    trace: tuple[str, ...]
    end_ms: int
    kinds: frozenset[str]  # the transformation kinds in the log


@dataclass(slots=True)
class SimClient:
    id: str
    remaining: int
    item: ProposalItem | None = None
    attempt: int = 0
    target: str | None = None
    recommit: bool = False  # commit the answered item once more (its entry id's record answers)
    script: list[Transformation] | None = None  # an operator's commits, in order


def address_of(member_id: str) -> str:
    return f"127.0.0.1:{7000 + int(member_id[1:])}"


class CMSCluster:
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
        initial = [f"m{i}" for i in range(1, members + 1)]
        extras = [f"m{members + i}" for i in range(1, EXTRA_MEMBERS + 1)] if reconfigure else []
        self.initial = {m: address_of(m) for m in initial}
        self.tick_ms = 5
        self.flush_interval_ms = rng.choice([0, 2, 10])
        self.commit_timeout_ms = 300
        self.max_disk_delay_ms = rng.choice([1, 3, 8, 30])
        # The CMS's settings, at the simulator's pace: smaller snapshot intervals and slot
        # retention, so that snapshots, catch-up and state transfer happen within a run.
        config = MemberConfig(
            member_id="",
            members=self.initial,
            listen_address="",
            snapshot_frequency=rng.choice([4, 10, 100]),
            heartbeat_interval_ms=20,
            election_timeout_ms=80,
            retransmit_interval_ms=30,
            leader_vote_delay_ms=rng.choice([0, 0, 8, 25]),
            leader_votes_small_slots_up_to=rng.choice([0, 1, 2]),
            max_batch_values=rng.choice([1, 2, 4, 64]),
            batch_linger_ms=rng.choice([0.0, 2.0, 5.0]),
            batch_linger_commits=rng.choice([1, 3]),
            max_pending_commits=rng.choice([4, 1000]),
            retain_slots=rng.choice([2, 8, 1000]),
            # Half the seeds stand for a leader of an older version, whose slots may hold a
            # client's snapshot in the middle: apply must take it at its own epoch.
            snapshot_closes_slot=rng.random() < 0.5,
            # The slow disk holds a few Readies in flight: a shell that forgets to advance one
            # reaches this bound within a run.
            max_unadvanced_readies=64,
            planted_bugs=planted_bugs,
        )
        self.members = {m: SimShell(self, _for_member(config, m)) for m in initial + extras}
        self.checks = Checks(self)
        self.coverage = self.checks.coverage
        self.faults = Faults(self)
        self.clients = [
            SimClient(f"c{i}", remaining=rng.randint(4, 10)) for i in range(rng.choice([3, 6]))
        ]
        script = operator_script(rng)
        self.clients.append(SimClient("op", remaining=len(script), script=script))
        self._next_request = 0
        self.failure = ""

    # -------------------------------------------------------------- for the shells

    def member_random(self, member_id: str) -> Callable[[], float]:
        return random.Random(self.world.rng.random()).random

    def peer_ids(self, member_id: str) -> list[str]:
        return [m for m in self.members if m != member_id]

    def initial_member(self) -> str:
        return self.world.rng.choice(sorted(self.initial))

    def disk_delay_ms(self) -> int:
        return self.world.rng.randint(0, self.max_disk_delay_ms)

    def fail(self, failure: str) -> None:
        raise InvariantViolation(failure)

    def check_chosen(self, member: str, slot: int, value: tuple[bytes, ...]) -> None:
        self.checks.chosen(member, slot, value)

    def check_state(self, member: str, core: Any) -> None:
        self.checks.state(member, core)

    def check_published(self, member: str, rows: Any) -> None:
        self.checks.published(member, rows)

    def check_snapshots(self, member: str, rows: Any) -> None:
        self.checks.snapshots(member, rows)

    # -------------------------------------------------------------- the network

    def send(self, message: Message) -> None:
        target = self.members.get(message.dst)
        if target is None:
            return
        incarnation = target.incarnation

        def deliver() -> None:
            if target.alive(incarnation):
                target.deliver(message)

        if message.dst == message.src:
            self.world.schedule(0, f"{type(message).__name__} {message.src}->self", deliver)
        else:
            self.world.send(message.src, message.dst, type(message).__name__, deliver)

    def request(
        self,
        src: str,
        dst: str,
        label: str,
        ask: Callable[[SimShell], Any],
        on_reply: Callable[[Any], None],
    ) -> None:
        """A request to ``dst`` answered from its state on arrival; the answer comes back over
        the network to ``src``'s incarnation that asked (a lost one is never answered)."""
        asker, target = self.members[src], self.members[dst]
        incarnation = asker.incarnation

        def arrive() -> None:
            if not (target.up and target.accepting):
                return
            answer = ask(target)

            def back() -> None:
                if asker.alive(incarnation):
                    on_reply(answer)

            self.world.send(dst, src, f"{label} reply", back)

        self.world.send(src, dst, label, arrive)

    def forward(
        self,
        src: str,
        leader: str,
        item: ProposalItem,
        on_outcome: Callable[[CommitResult | EpochalError], None],
    ) -> None:
        """A follower forwards a commit; the leader's answer comes back when it has one."""
        asker, target = self.members[src], self.members.get(leader)
        if target is None:
            return
        incarnation = asker.incarnation
        self.coverage.forwarded_commits += 1

        def arrive() -> None:
            def reply(outcome: CommitResult | EpochalError) -> None:
                self.checks.answer_leaves(leader, item, outcome)

                def back() -> None:
                    if asker.alive(incarnation):
                        on_outcome(outcome)

                self.world.send(leader, src, "ForwardReply", back)

            target.commit_forwarded(item, src, reply)

        self.world.send(src, leader, "Forward", arrive)

    def submit(
        self,
        client: str,
        member: str,
        item: ProposalItem,
        on_outcome: Callable[[CommitResult | EpochalError], None],
    ) -> None:
        """A client's commit to ``member``; its answer comes back over the network."""
        target = self.members[member]
        deadline = [0]

        def reply(outcome: CommitResult | EpochalError) -> None:
            self.checks.answer_leaves(member, item, outcome)
            self.world.send(member, client, "answer", lambda: on_outcome(outcome))

        def arrive() -> None:
            deadline[0] = self.world.now_ms + self.commit_timeout_ms
            target.commit(item, reply, deadline[0])

        self.world.send(client, member, "submit", arrive)

    # -------------------------------------------------------------- clients

    def _client(self, client_id: str) -> SimClient:
        return next(c for c in self.clients if c.id == client_id)

    def _next(self, client: SimClient) -> None:
        if client.item is not None or client.remaining <= 0:
            return
        self._next_request += 1
        entry_id = f"{client.id}-{self._next_request}"
        if client.script:
            client.item = proposal_item(client.script.pop(0), entry_id)
        else:
            client.item = draw_commit(self.world.rng, sorted(self.members), address_of, entry_id)
        client.attempt = 0
        client.recommit = self.world.rng.random() < 0.2
        self._attempt(client)

    def _attempt(self, client: SimClient) -> None:
        item = client.item
        if item is None:
            return
        client.attempt += 1
        attempt = client.attempt
        target = client.target or self.world.rng.choice(sorted(self.members))
        client.target = None
        self.submit(client.id, target, item, lambda outcome: self._answered(client, item, outcome))

        def timeout() -> None:
            if client.item is item and client.attempt == attempt:
                self._attempt(client)

        self.world.schedule(CLIENT_TIMEOUT_MS, f"client {client.id} timeout", timeout)

    def _answered(
        self, client: SimClient, item: ProposalItem, outcome: CommitResult | EpochalError
    ) -> None:
        if client.item is not item:
            return  # an answer to an attempt the client no longer waits for
        if isinstance(outcome, CommitResult | Rejected):
            self.checks.answer_arrives(item, outcome)
            if isinstance(outcome, CommitResult) and client.recommit:
                client.recommit = False  # once more under the same id: the record answers
                self._retry(client, None)
                return
            client.item = None
            client.remaining -= 1
            self.world.schedule(1, f"client {client.id} next", lambda: self._next(client))
            return
        leader = outcome.leader_id if isinstance(outcome, NotLeader) else None
        self._retry(client, leader)

    def _retry(self, client: SimClient, target: str | None) -> None:
        client.target = target
        attempt = client.attempt

        def retry() -> None:
            if client.item is not None and client.attempt == attempt:
                self._attempt(client)

        self.world.schedule(REDIRECT_PAUSE_MS, f"client {client.id} retry", retry)

    # -------------------------------------------------------------- a run

    def converged(self) -> bool:
        if any(c.remaining > 0 or c.item is not None for c in self.clients):
            return False
        members = list(self.members.values())
        if not all(m.up and m.accepting for m in members):
            return False
        chosen = {m.core.node.chosen_up_to for m in members}
        applied = {m.core.sm.applied_slot for m in members}
        epochs = {m.core.epoch for m in members}
        return len(chosen) == 1 and applied == chosen and len(epochs) == 1

    def run(self, fault_ms: int = 1500, heal_ms: int = 8000) -> RunResult:
        failure = ""
        try:
            for member in self.members.values():
                member.start()
            for client in self.clients:
                self.world.schedule(
                    self.world.rng.randint(0, 100),
                    f"client {client.id} start",
                    lambda client=client: self._next(client),  # type: ignore[misc]
                )
            self.faults.schedule(fault_ms)
            self.world.run_until(fault_ms, lambda: None)
            self.faults.heal()
            if not self.world.run_while(
                fault_ms + heal_ms, lambda: not self.converged(), lambda: None
            ):
                failure = "no progress after healing: " + self.describe()
            else:
                self.checks.at_the_end()
        except InvariantViolation as violation:
            failure = str(violation)
        except AssertionError as violation:  # the cores' own invariants, reported with the seed
            failure = f"{type(violation).__name__} in a core: {violation}"
        except Exception as error:  # a bug anywhere else, reported with the seed too
            failure = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
        self.checks.collect()
        return RunResult(
            seed=self.world.seed,
            members=self.voters,
            reconfiguring=len(self.members) > self.voters,
            ok=not failure,
            failure=failure,
            coverage=self.coverage,
            acknowledged=self.checks.acknowledged,
            trace_digest=self.world.trace_digest,
            trace=tuple(self.world.trace),
            end_ms=self.world.now_ms,
            kinds=frozenset(self.checks.kinds),
        )

    def describe(self) -> str:
        parts = []
        for member in self.members.values():
            if not member.up:
                parts.append(f"{member.id}(down)")
                continue
            status = member.core.node.status()
            parts.append(
                f"{member.id}(role={status.role.value} chosen={status.chosen_up_to}"
                f" applied={member.core.sm.applied_slot} epoch={member.core.epoch}"
                f" leader={status.leader_id})"
            )
        waiting = [c.id for c in self.clients if c.remaining > 0 or c.item is not None]
        return " ".join(parts) + f" clients waiting: {waiting}"


def _for_member(config: MemberConfig, member_id: str) -> MemberConfig:
    return replace(config, member_id=member_id, listen_address=address_of(member_id))


def run_seed(
    seed: int,
    *,
    members: int | None = None,
    planted_bugs: frozenset[str] = frozenset(),
    trace: bool = False,
) -> RunResult:
    """One simulation; the member count alternates 3/5 with the seed unless given, and every
    third seed adds two joiners."""
    count = members if members is not None else (3 if seed % 2 == 0 else 5)
    return CMSCluster(
        seed, members=count, planted_bugs=planted_bugs, trace=trace, reconfigure=seed % 3 == 0
    ).run()
