"""Tracked read repair (epochal.replica.read_repair) against in-memory replicas whose state moves
between the rounds of a read, as real ones do (a late write, another read's repair).

The property a QUORUM read needs: the answer holds every mutation any contacted replica held
when it was first asked, and when the read returns, every contacted replica holds every
mutation of the answer (so a later quorum read returns it too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.mtrack import LogDigests, MutationId, Sketch
from epochal.replica.codec import mutation_to_proto
from epochal.replica.coordinator import ReadStats
from epochal.replica.local_replica import Outcome, PartitionRead, PeerReply
from epochal.replica.model import Mutation, RowWrite, writer_of
from epochal.replica.read_repair import ReadRepair


def mutation(node: int, log: int, sequence: int) -> Mutation:
    return Mutation(
        id=MutationId(node=node, log=log, sequence=sequence, hlc=1_000 + sequence),
        keyspace="ks",
        table_id="t1",
        token=0,
        partition_key=b"\x01p\x00",
        rows=(RowWrite(f"r{node}.{log}.{sequence}".encode(), (("v", b"x"),)),),
        tracked=True,
    )


@dataclass
class FakeReplica:
    """A replica's mutations; ``arrivals[k]`` land right after its k-th read (0-based). Its
    summaries cover the ids at or above its ``low_bound`` and the one a read asks for."""

    node_id: str
    held: dict[tuple[int, int, int], Mutation]
    arrivals: dict[int, list[Mutation]] = field(default_factory=dict)
    reads: int = 0
    low_bound: int = 0
    bounds_asked: list[int] = field(default_factory=list)
    raised_after: dict[int, int] = field(default_factory=dict)  # read k -> new low bound

    def _done(self, reply: PeerReply) -> asyncio.Future[PeerReply]:
        future: asyncio.Future[PeerReply] = asyncio.get_running_loop().create_future()
        future.set_result(reply)
        return future

    def read(
        self,
        epoch: int,
        read: PartitionRead,
        *,
        data: bool,
        summary: bool,
        digest: bool,
        timeout_s: float,
        sketch_logs: Sequence[tuple[int, int]] = (),
        sketch_cells: int = 0,
    ) -> asyncio.Future[PeerReply]:
        bound = max(read.low_bound, self.low_bound)
        self.bounds_asked.append(read.low_bound)
        ids = [m.id for m in self.held.values() if m.id.hlc >= bound]
        wanted = set(sketch_logs)
        reply = PeerReply(
            epoch,
            Outcome.OK,
            cells=tuple(c for m in self.held.values() for c in m.cells()) if data else (),
            summary=LogDigests.of(ids, low_bound=bound),
            sketch=(
                Sketch.of([i for i in ids if i.log_key in wanted], sketch_cells)
                if sketch_cells
                else None
            ),
        )
        for arrived in self.arrivals.get(self.reads, ()):
            self.held.setdefault(arrived.id.key, arrived)
        self.low_bound = max(self.low_bound, self.raised_after.get(self.reads, 0))
        self.reads += 1
        return self._done(reply)

    def fetch(
        self,
        epoch: int,
        ids: Sequence[MutationId],
        *,
        timeout_s: float,
        keyspace: str = "",
        token: int = 0,
    ) -> asyncio.Future[PeerReply]:
        """Below its low bound its log is collected: those ids are answered as held."""
        logged = [i for i in ids if i.key in self.held and i.hlc >= self.low_bound]
        bodies = tuple(mutation_to_proto(self.held[i.key]).SerializeToString() for i in logged)
        held = tuple(i for i in ids if i.hlc < self.low_bound) if keyspace else ()
        return self._done(PeerReply(epoch, Outcome.OK, bodies=bodies, examined=len(ids), held=held))

    def repair(
        self, epoch: int, mutation: Mutation, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[PeerReply]:
        self.held.setdefault(mutation.id.key, mutation)
        return self._done(PeerReply(epoch, Outcome.OK))


class _Counter:
    def inc(self, amount: float = 1) -> None:
        pass


class _Metrics:
    summary_mismatches = _Counter()
    read_repaired_mutations = _Counter()


class _Follower:
    metadata = None


class FakeCoordinator:
    def __init__(self, replicas: dict[str, FakeReplica]) -> None:
        self.replicas = replicas
        self.metrics = _Metrics()
        self.follower = _Follower()

    def handle(self, metadata: object, node_id: str) -> FakeReplica:
        return self.replicas[node_id]


READ = PartitionRead("ks", "t1", 0, b"\x01p\x00")


async def reconcile(replicas: dict[str, FakeReplica]) -> tuple[set, ReadStats, set]:
    """Run a read: round 1 as the coordinator sends it (data from the first replica), then the
    repair. Returns (the answer's mutation keys, stats, the union first seen)."""
    names = list(replicas)
    first_seen = {key for r in replicas.values() for key in r.held}
    replies = {}
    for index, name in enumerate(names):
        replies[name] = await replicas[name].read(
            1, READ, data=index == 0, summary=True, digest=False, timeout_s=1.0
        )
    stats = ReadStats()
    repair = ReadRepair(FakeCoordinator(replicas))  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    cells = await repair.reconcile(1, READ, stats, replies, loop.time() + 5.0)
    by_writer = {writer_of(m.id): key for r in replicas.values() for key, m in r.held.items()}
    return {by_writer[c.writer] for c in cells}, stats, first_seen


def test_a_mutation_reaching_the_data_replica_between_rounds_is_in_the_answer() -> None:
    m1, m2, m3 = mutation(1, 1, 1), mutation(1, 1, 2), mutation(2, 1, 1)
    # D holds m1; m2 lands on D right after its first read (a late write, or another read's
    # repair). S holds m1, m2 and m3.
    data = FakeReplica("d", {m1.id.key: m1}, arrivals={0: [m2]})
    other = FakeReplica("s", {m.id.key: m for m in (m1, m2, m3)})
    answer, stats, _ = asyncio.run(reconcile({"d": data, "s": other}))
    assert answer == {m1.id.key, m2.id.key, m3.id.key}
    assert stats.summaries_agreed is False
    assert stats.differing == {"s": ((1, 1), (2, 1))}
    assert stats.summary_rounds == 2
    assert [i.key for i in stats.repaired] == [m3.id.key]


def test_a_write_in_a_log_that_agreed_in_round_one_is_compared_before_it_is_answered() -> None:
    m1, m2, late = mutation(1, 1, 1), mutation(2, 1, 1), mutation(3, 1, 1)
    # Log 3/1 agreed in round 1 (neither held it); an unacknowledged write lands on D only
    # before its second read: answering it without storing it on S could let it flap.
    data = FakeReplica("d", {m1.id.key: m1}, arrivals={0: [late]})
    other = FakeReplica("s", {m1.id.key: m1, m2.id.key: m2})
    answer, stats, _ = asyncio.run(reconcile({"d": data, "s": other}))
    assert late.id.key in answer
    assert late.id.key in other.held, "answered, so on every contacted replica"
    assert stats.summary_rounds == 3


def test_summaries_that_agree_answer_in_one_round() -> None:
    m1 = mutation(1, 1, 1)
    data = FakeReplica("d", {m1.id.key: m1})
    other = FakeReplica("s", {m1.id.key: m1})
    answer, stats, _ = asyncio.run(reconcile({"d": data, "s": other}))
    assert answer == {m1.id.key}
    assert (stats.summaries_agreed, stats.summary_rounds, stats.differing) == (True, 1, {})


UNIVERSE = [mutation(node, log, seq) for node in (1, 2, 3) for log in (1, 2) for seq in (1, 2, 3)]
subsets = st.sets(st.sampled_from(range(len(UNIVERSE))))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(subsets, min_size=2, max_size=3),
    st.lists(st.dictionaries(st.integers(0, 3), subsets, max_size=3), min_size=3, max_size=3),
)
def test_the_answer_holds_what_any_replica_held_and_every_replica_holds_the_answer(
    held: list[set[int]], arrivals: list[dict[int, set[int]]]
) -> None:
    replicas = {
        f"n{i}": FakeReplica(
            f"n{i}",
            {UNIVERSE[k].id.key: UNIVERSE[k] for k in sets},
            arrivals={r: [UNIVERSE[k] for k in ks] for r, ks in arrivals[i].items()},
        )
        for i, sets in enumerate(held)
    }
    answer, stats, first_seen = asyncio.run(reconcile(replicas))
    assert first_seen <= answer
    for replica in replicas.values():
        assert answer <= set(replica.held), replica.node_id
    assert stats.summary_rounds >= 1


def test_three_replicas_differing_in_different_logs_settle_in_one_sketch_round() -> None:
    """The sketch round asks every replica for the union of the logs any of them differs in,
    so a pair's sketches cover logs the pair agrees on; an explicit sketch against a table
    must still decode (it once needed another round, with twice the cells, every time)."""
    x = [mutation(1, 1, s) for s in range(1, 31)]  # 30 ids in log X = (1, 1)
    y = [mutation(2, 1, s) for s in (1, 2)]  # 2 ids in log Y = (2, 1)
    data = FakeReplica("d", {m.id.key: m for m in x + y})  # 32 ids: a table of 30 cells
    s1 = FakeReplica("s1", {m.id.key: m for m in x[:20] + y})  # lacks 10 of X: 30 cells
    s2 = FakeReplica("s2", {m.id.key: m for m in x})  # 30, explicit: differs in Y only
    answer, stats, first_seen = asyncio.run(reconcile({"d": data, "s1": s1, "s2": s2}))
    assert answer == first_seen
    assert stats.summary_rounds == 2


def test_replicas_at_different_low_bounds_are_compared_at_the_highest() -> None:
    """S advanced its low bound past m1 and m2 (every replica held them: its log is collected);
    D has not yet. Compared at S's bound they agree on the rest, and m4, which only S holds
    above it, is repaired onto D."""
    m1, m2, m3, m4 = (mutation(1, 1, s) for s in (1, 2, 3, 4))  # hlc 1001 .. 1004
    data = FakeReplica("d", {m.id.key: m for m in (m1, m2, m3)})
    other = FakeReplica("s", {m.id.key: m for m in (m1, m2, m3, m4)}, low_bound=1003)
    answer, stats, _ = asyncio.run(reconcile({"d": data, "s": other}))
    assert answer == {m.id.key for m in (m1, m2, m3, m4)}
    assert data.bounds_asked[1] == other.bounds_asked[1] == 1003  # asked again, at the highest
    assert [i.key for i in stats.repaired] == [m4.id.key] and m4.id.key in data.held
    assert stats.summaries_agreed is False


def test_replicas_at_different_low_bounds_that_agree_above_it_answer_without_repair() -> None:
    m1, m2 = mutation(1, 1, 1), mutation(1, 1, 2)
    data = FakeReplica("d", {m.id.key: m for m in (m1, m2)}, low_bound=1002)
    other = FakeReplica("s", {m.id.key: m for m in (m1, m2)})
    answer, stats, _ = asyncio.run(reconcile({"d": data, "s": other}))
    assert answer == {m1.id.key, m2.id.key}
    assert stats.repaired == [] and stats.summary_rounds == 2


def test_an_id_collected_below_a_holders_bound_before_the_fetch_takes_another_round() -> None:
    """D lacks m3, which S holds; before the coordinator fetches m3 from S, the reconciler
    delivers it to D and S's low bound passes it (its log entry collected). S answers m3 as
    held; the read takes another round at the bounds as they are now, and D's data of that
    round has m3."""
    m1, m2, m3 = (mutation(1, 1, s) for s in (1, 2, 3))  # hlc 1001 .. 1003
    data = FakeReplica("d", {m.id.key: m for m in (m1, m2)}, arrivals={1: [m3]})
    other = FakeReplica("s", {m.id.key: m for m in (m1, m2, m3)}, raised_after={1: 1004})
    answer, stats, _ = asyncio.run(reconcile({"d": data, "s": other}))
    assert answer == {m.id.key for m in (m1, m2, m3)}
    assert stats.repaired == [] and data.bounds_asked[-1] == 1004
