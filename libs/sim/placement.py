"""The placement simulator: random topology operations, invariants checked after every epoch.

One seed picks a cluster (3 to 50 nodes, 1 to 3 datacenters, 1 to 5 racks each: fewer, as many
or more racks than a datacenter's RF), keyspaces (SimpleStrategy RF 1 to 5, or rack-aware
NetworkTopologyStrategy RF 1 to 3 per datacenter) and a run of random joins, leaves, removes,
replaces (half of them by a node registered in another rack of the datacenter), moves, steps and
cancels, several sequences in flight where their locks allow. After every applied transformation
``check`` compares the placements with a naive reference that recomputes them from scratch:

- the ranges' right ends are exactly the owned tokens plus the tokens of sequences in flight
  (so the ranges cover the ring exactly once, split where a sequence needs and merged after);
- read group = the natural replicas of the token map; per datacenter that is RF replicas when
  the datacenter has RF nodes;
- write group = read group, plus — for a range a sequence in its dual-write steps (START or MID
  done) has locked — the natural replicas of the token map with that sequence's MID toggled; so
  write groups contain read groups and over-replication exists only inside a sequence.

At the end two quorum checkers read the whole history: ``check_adjacent_views`` (a read group
and a write group of the same or adjacent epochs must meet, every node able to answer: the rule
PREPARE enforces as ``quorum_intersection``, computed again from the history) and
``check_history`` (epochs further apart, behind the barriers the steps passed). A refused
PREPARE is a normal outcome, counted by rule and kind. The planted bug
``BUG_SKIP_QUORUM_INTERSECTION`` executes a PREPARE that only that rule refused, as a CMS without
the rule would: the first checker must catch it.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from epochal.sim.quorums import Gate, Outage, check_adjacent_views, check_history
from epochal.tcm import (
    AdvanceSequence,
    CancelSequence,
    ClusterMetadata,
    CMSMember,
    CreateKeyspace,
    InitializeCMS,
    InProgressSequence,
    NodeState,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    Register,
    Rejected,
    ReplicationParams,
    Step,
    Transformation,
    natural_groups,
)
from epochal.tcm.barrier import BarrierLevel, at_least, barrier_for_step
from epochal.tcm.schema import Strategy
from epochal.tcm.sequences import NEXT_STEP, SequenceKind
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN

BUG_SKIP_QUORUM_INTERSECTION = "skip_quorum_intersection"
KNOWN_BUGS = frozenset({BUG_SKIP_QUORUM_INTERSECTION})


@dataclass
class PlacementRun:
    seed: int
    nodes: int = 0
    datacenters: int = 0
    epochs: int = 0
    barrier_minimum: BarrierLevel = BarrierLevel.EACH_QUORUM
    failure: str | None = None
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return self.failure is None


class PlacementViolation(AssertionError):
    pass


def reference_check(md: ClusterMetadata) -> None:
    """Raise ``PlacementViolation`` where the placements differ from the naive reference."""
    locations = md.locations()
    expected_points = set(md.tokens.ring_tokens)
    for sequence in md.sequences.values():
        expected_points |= sequence.split_tokens | sequence.merge_tokens
    dual = [s for s in md.sequences.values() if s.done in (Step.START, Step.MID)]
    for params, placement in md.placements.items():
        if set(placement.points) != expected_points:
            extra = sorted(set(placement.points) - expected_points)[:3]
            missing = sorted(expected_points - set(placement.points))[:3]
            raise PlacementViolation(f"{params}: split points extra {extra} missing {missing}")
        if list(placement.points) != sorted(placement.points):
            raise PlacementViolation(f"{params}: split points out of order")
        reads = natural_groups(params, md.tokens, locations, placement.points)
        toggled = {
            s.node_id: natural_groups(params, _toggled(md, s), locations, placement.points)
            for s in dual
        }
        for i, token_range in enumerate(r for r, _, _ in placement.ranges()):
            read, write = placement.reads[i], placement.writes[i]
            if read != frozenset(reads[i]):
                raise PlacementViolation(
                    f"{params} {token_range}: read group {sorted(read)} != natural "
                    f"{sorted(reads[i])}"
                )
            _check_factor(md, params, token_range, read)
            expected = set(read)
            for s in dual:
                if any(token_range.intersects(lock) for lock in s.locked):
                    expected |= set(toggled[s.node_id][i])
            if write != expected:
                raise PlacementViolation(
                    f"{params} {token_range}: write group {sorted(write)} != expected "
                    f"{sorted(expected)} (sequences {[s.describe() for s in dual]})"
                )


def _toggled(md: ClusterMetadata, sequence: InProgressSequence):  # type: ignore[no-untyped-def]
    if sequence.done is Step.MID:
        return sequence.before_mid(md.tokens)
    return sequence.after_mid(md.tokens)


def _check_factor(md, params, token_range, read) -> None:  # type: ignore[no-untyped-def]
    owners = set(md.tokens.owners)
    for datacenter, factor in params.factors:
        if params.strategy is Strategy.SIMPLE:
            available, members = len(owners), len(read)
        else:
            available = sum(1 for n in owners if md.nodes[n].datacenter == datacenter)
            members = sum(1 for n in read if md.nodes[n].datacenter == datacenter)
        if members != min(factor, available):
            raise PlacementViolation(
                f"{params} {token_range}: {members} replicas in {datacenter or 'the ring'}, "
                f"expected {min(factor, available)}"
            )


# A barrier's minimum level, drawn per seed: the default, or the weaker one that is still safe.
_MINIMUMS = (BarrierLevel.EACH_QUORUM,) * 3 + (BarrierLevel.QUORUM,)
_SLOW_NODE_CHANCE = 0.25  # how often a replica has not acknowledged an epoch in time


class _Driver:
    def __init__(
        self, seed: int, barriers: bool, planted_bugs: frozenset[str] = frozenset()
    ) -> None:
        unknown = planted_bugs - KNOWN_BUGS
        assert not unknown, f"unknown planted bugs {sorted(unknown)}; known: {sorted(KNOWN_BUGS)}"
        self.rng = random.Random(seed)
        self.run = PlacementRun(seed)
        self.planted_bugs = planted_bugs
        self.md = ClusterMetadata.empty()
        self.address = 0
        self.barriers = barriers
        self.run.barrier_minimum = self.rng.choice(_MINIMUMS)
        self.history: list[ClusterMetadata] = [self.md]
        self.gates: list[Gate] = []
        self.outages: dict[str, Outage] = {}  # the node a remove or replace declares down
        self.history_outages: list[Outage] = []  # outages that ended
        # node -> (epoch, metadata before, metadata after) of its sequence's last step
        self.last_step: dict[str, tuple[int, ClusterMetadata, ClusterMetadata]] = {}

    def apply(self, transformation: Transformation, what: str) -> bool:
        rejection = transformation.validate(self.md)
        if rejection is not None:
            self.run.counts[f"rejected {rejection.rule}"] += 1
            if rejection.rule == "quorum_intersection":
                self.run.counts[f"rejected quorum_intersection: {what}"] += 1
            planted = BUG_SKIP_QUORUM_INTERSECTION in self.planted_bugs
            if not (planted and rejection.rule == "quorum_intersection"):
                return False
        node = getattr(transformation, "node_id", None)
        gate = self.pass_barrier(node) if node in self.last_step else None
        before, self.md = self.md, transformation.execute(self.md)
        self.history.append(self.md)
        if gate is not None:
            self.gates.append(gate)
        if node in self.md.sequences:
            self.last_step[node] = (self.md.epoch, before, self.md)
            self.note_outage(self.md.sequences[node])
        else:
            self.last_step.pop(node, None)
            self.end_outage(before.sequences.get(node))
        self.run.epochs += 1
        self.run.counts[what] += 1
        reference_check(self.md)
        return True

    @staticmethod
    def dead_node(sequence: InProgressSequence) -> str | None:
        if sequence.kind is SequenceKind.REMOVE:
            return sequence.node_id
        return sequence.replaced if sequence.kind is SequenceKind.REPLACE else None

    def note_outage(self, sequence: InProgressSequence) -> None:
        dead = self.dead_node(sequence)
        if dead is not None and dead not in self.outages:
            self.outages[dead] = Outage(dead, since=self.md.epoch)

    def end_outage(self, sequence: InProgressSequence | None) -> None:
        """A cancelled remove or replace: the operator brought the node back."""
        dead = self.dead_node(sequence) if sequence is not None else None
        if dead is not None and sequence is not None and sequence.cancelling:
            outage = self.outages.pop(dead)
            self.history_outages.append(Outage(dead, outage.since, until=self.md.epoch))

    def pass_barrier(self, node: str) -> Gate | None:
        """Wait for the barrier on ``node``'s last step, as the sequence's driver would: some
        replicas are slow; the strongest level the others meet counts, down to the minimum;
        when not even that is met, the driver keeps retrying until everyone has caught up."""
        if not self.barriers:
            return None
        epoch, before, after = self.last_step[node]
        sequence = after.sequences[node]
        driver = self.driving_node(after, sequence.node_id, sequence.kind)
        dead = self.dead_node(sequence)
        barrier = barrier_for_step(
            before.placements,
            after.placements,
            sequence.locked,
            epoch=epoch,
            locations=after.locations(),
            local_node=driver,
            minimum=self.run.barrier_minimum,
            dead=frozenset({dead} if dead else ()),
        )
        acked = frozenset(
            n for n in sorted(barrier.nodes) if n == driver or self.rng.random() > _SLOW_NODE_CHANCE
        )
        outcome = barrier.outcome(acked)
        if outcome is None:  # below the minimum: the driver retries until the slow ones catch up
            acked = barrier.nodes
            outcome = barrier.outcome(acked)
        assert outcome is not None, f"the barrier of epoch {epoch} cannot be met"
        self.run.counts[f"barrier {outcome.level.value}"] += 1
        return Gate(
            committed=self.md.epoch + 1,
            epoch=epoch,
            acked=acked,
            level=outcome.level,
            locked=sequence.locked,
        )

    @staticmethod
    def driving_node(md: ClusterMetadata, node: str, kind: SequenceKind) -> str:
        """The node under operation drives it, except a removed one: it is dead, so the
        operator's node does (here: the first other joined node of its datacenter)."""
        if kind is not SequenceKind.REMOVE:
            return node
        datacenter = md.nodes[node].datacenter
        others = sorted(
            n
            for n, info in md.nodes.items()
            if n != node and info.state is NodeState.JOINED and info.datacenter == datacenter
        )
        return others[0] if others else node

    def register(self, datacenter: str, rack: str) -> str:
        self.address += 1
        self.apply(
            Register(
                address=f"10.0.0.{self.address}:7000",
                datacenter=datacenter,
                rack=rack,
                version="1.0.0",
            ),
            "register",
        )
        return f"node-{self.md.next_node_number - 1}"

    def random_tokens(self, count: int) -> tuple[int, ...]:
        return tuple(self.rng.randint(MIN_TOKEN + 1, MAX_TOKEN) for _ in range(count))

    def location(self) -> tuple[str, str]:
        datacenter = f"dc{self.rng.randrange(self.run.datacenters) + 1}"
        return datacenter, self.random_rack(datacenter)

    def random_rack(self, datacenter: str) -> str:
        racks = self.racks[int(datacenter.removeprefix("dc")) - 1]
        return f"rack{self.rng.randrange(racks) + 1}"

    def setup(self) -> None:
        rng = self.rng
        self.run.nodes = rng.choice([3, 4, 5, 6, 8, 12] * 3 + [20, 50])
        self.run.datacenters = rng.randint(1, 3)
        self.racks = [rng.randint(1, 5) for _ in range(self.run.datacenters)]
        self.num_tokens = rng.choice([1, 1, 2, 4])
        self.apply(InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),)), "initialize")
        for k in range(rng.randint(1, 3)):
            if rng.random() < 0.5:
                params = ReplicationParams.simple(rng.randint(1, 5))
            else:
                factors = {f"dc{d + 1}": rng.randint(1, 3) for d in range(self.run.datacenters)}
                params = ReplicationParams.network_topology(factors)
            self.apply(CreateKeyspace(name=f"ks{k}", replication=params), "create_keyspace")
        for _ in range(self.run.nodes):
            node = self.register(*self.location())
            tokens = () if rng.random() < 0.5 else self.random_tokens(self.num_tokens)
            if self.apply(
                PrepareJoin(node_id=node, tokens=tokens, num_tokens=self.num_tokens), "join"
            ):
                for step in (Step.START, Step.MID, Step.FINISH):
                    self.apply(AdvanceSequence(node_id=node, step=step), "step")
        for params in self.md.placements:
            if params.strategy is Strategy.NETWORK_TOPOLOGY:
                for datacenter, factor in params.factors:
                    racks = len(self.racks_in(datacenter))
                    shape = (
                        "fewer racks than"
                        if racks < factor
                        else "more racks than"
                        if racks > factor
                        else "as many racks as"
                    )
                    self.run.counts[f"rack-aware datacenter with {shape} RF"] += 1

    def racks_in(self, datacenter: str) -> set[str]:
        """The racks of the datacenter's nodes that own tokens."""
        nodes = self.md.nodes
        return {nodes[n].rack for n in self.md.tokens.owners if nodes[n].datacenter == datacenter}

    def nodes_in(self, state: NodeState) -> list[str]:
        return sorted(
            n
            for n, info in self.md.nodes.items()
            if info.state is state and n not in self.md.sequences
        )

    def act(self) -> None:
        rng = self.rng
        roll = rng.random()
        sequences = sorted(self.md.sequences)
        if sequences and roll < 0.55:
            node = rng.choice(sequences)
            sequence = self.md.sequences[node]
            if sequence.cancelling or rng.random() < 0.12:
                self.apply(CancelSequence(node_id=node), "cancel_step")
            else:
                step = NEXT_STEP[sequence.done]
                self.apply(AdvanceSequence(node_id=node, step=step), f"step {step.value}")
            return
        joined = self.nodes_in(NodeState.JOINED)
        choice = rng.choice(["join", "join", "leave", "remove", "replace", "move"])
        if choice == "join":
            node = self.register(*self.location())
            tokens = () if rng.random() < 0.5 else self.random_tokens(self.num_tokens)
            self.apply(
                PrepareJoin(node_id=node, tokens=tokens, num_tokens=self.num_tokens),
                self.counted_as("prepare join", node),
            )
        elif joined and choice in ("leave", "remove"):
            node = rng.choice(joined)
            self.apply(
                PrepareLeave(node_id=node, remove=choice == "remove"),
                self.counted_as(f"prepare {choice}", node),
            )
        elif joined and choice == "replace":
            dead = rng.choice(joined)
            info = self.md.nodes[dead]
            rack = info.rack
            if rng.random() < 0.5:  # the operator registered the replacement in another rack
                rack = self.random_rack(info.datacenter)
            node = self.register(info.datacenter, rack)
            where = "same rack" if rack == info.rack else "other rack"
            self.apply(PrepareReplace(node_id=node, replaced=dead), f"prepare replace {where}")
        elif joined and choice == "move":
            node = rng.choice(joined)
            count = len(self.md.tokens.owners.get(node, ())) or 1
            self.apply(
                PrepareMove(node_id=node, tokens=self.random_tokens(count)),
                self.counted_as("prepare move", node),
            )

    def counted_as(self, what: str, node: str) -> str:
        """``what``, marked "racked" when ``node``'s datacenter owns tokens in several racks and a
        NetworkTopologyStrategy keyspace replicates there (rack diversity shapes its groups)."""
        datacenter = self.md.nodes[node].datacenter
        rack_aware = any(
            params.strategy is Strategy.NETWORK_TOPOLOGY and datacenter in dict(params.factors)
            for params in self.md.placements
        )
        return f"{what} racked" if rack_aware and len(self.racks_in(datacenter)) > 1 else what


def placement_history(seed: int, actions: int = 60) -> list[ClusterMetadata]:
    """The metadata after every epoch of one seeded history (for tests of other layers)."""
    driver = _Driver(seed, barriers=False)
    driver.setup()
    for _ in range(actions):
        driver.act()
    return driver.history


def run_placement_seed(
    seed: int,
    actions: int = 60,
    *,
    barriers: bool = True,
    planted_bugs: frozenset[str] = frozenset(),
) -> PlacementRun:
    """One seeded history, checked after every epoch against the reference and, at the end, by
    both quorum-intersection checkers; ``barriers=False`` commits steps without any barrier."""
    driver = _Driver(seed, barriers, planted_bugs)
    try:
        driver.setup()
        for _ in range(actions):
            driver.act()
        # Drain: finish or cancel whatever is in flight, then the ring must be merged exactly.
        for _ in range(4 * len(driver.md.sequences) + 4):
            if not driver.md.sequences:
                break
            node = sorted(driver.md.sequences)[0]
            sequence = driver.md.sequences[node]
            if sequence.cancelling:
                driver.apply(CancelSequence(node_id=node), "cancel_step")
            else:
                driver.apply(
                    AdvanceSequence(node_id=node, step=NEXT_STEP[sequence.done]), "drain step"
                )
        if driver.md.sequences:
            raise PlacementViolation(
                f"sequences left after draining: {sorted(driver.md.sequences)}"
            )
        views = check_adjacent_views(driver.history, limit=1)
        driver.run.counts["view checks"] += views.checks
        if views.misses:
            raise PlacementViolation(f"quorum intersection of adjacent views: {views.misses[0]}")
        outages = driver.history_outages + list(driver.outages.values())
        violations = check_history(
            driver.history,
            driver.gates,
            outages,
            local_quorum=at_least(driver.run.barrier_minimum, BarrierLevel.EACH_QUORUM),
            limit=1,
        )
        if violations:
            raise PlacementViolation(f"quorum intersection: {violations[0]}")
    except (PlacementViolation, AssertionError) as error:
        driver.run.failure = f"epoch {driver.md.epoch}: {error}"
    except Rejected as error:  # a transformation that validated and then failed to execute
        driver.run.failure = f"epoch {driver.md.epoch}: execute raised {error}"
    return driver.run
