"""The leader's batch builder against the state machine: whatever slot the builder emits from
commits of every transformation kind, queued in any order, the leader (applying its own
validated batch) and every follower (applying the chosen value decoded from the wire) reach the
same state, report the same outcomes, and keep each snapshot at the state of its own epoch; and
a chosen slot that no builder made — any items in any order, snapshots anywhere — applies the
same way on every member, without raising (DESIGN.md principle 7)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.cmscore.batching import Batch, BatchLimits, Decision, answer_to, build_batch
from epochal.cmscore.batching import proposal_item as item
from epochal.cmscore.state_machine import (
    CommitResult,
    MetadataStateMachine,
    ProposalItem,
    SlotResult,
)
from epochal.errors import Rejected
from epochal.tcm import (
    ALL_KINDS,
    AddCMSCandidate,
    AdvanceSequence,
    AlterKeyspace,
    AlterTable,
    CancelSequence,
    ClusterMetadata,
    CMSMember,
    Column,
    ColumnType,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    FinishAddToCMS,
    GrantReconcileLease,
    InitializeCMS,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    Register,
    RegisterReconciler,
    RemoveFromCMS,
    ReplicationParams,
    ReplicationType,
    StartAddToCMS,
    Step,
    TokenRange,
    Transformation,
    TriggerSnapshot,
    Unregister,
    apply_transformation,
)
from epochal.wire.metadata import decode_transformation
from epochal.wire.proposal import decode_item, encode_item

# Small pools of names, so that the commits of a batch meet: a table of a keyspace created just
# before, a join of a node registered in the same slot, a second voter change after a first.
KEYSPACES = ("ks0", "ks1")
TABLES = ("t0", "t1")
NODES = tuple(f"node-{n}" for n in range(1, 6))
CMS_IDS = ("cms1", "cms2", "cms3", "cms4")

keyspaces = st.sampled_from(KEYSPACES)
tables = st.sampled_from(TABLES)
nodes = st.sampled_from(NODES)
cms_ids = st.sampled_from(CMS_IDS)
steps = st.sampled_from(list(Step))
tokens = st.integers(-(2**63) + 1, 2**63 - 1)

INITIALIZE = InitializeCMS(members=(CMSMember("cms1", "127.0.0.1:701"),))

# One strategy per transformation kind, each drawing values that often apply.
BY_KIND: dict[type[Transformation], st.SearchStrategy[Transformation]] = {
    InitializeCMS: st.just(INITIALIZE),
    CreateKeyspace: st.builds(
        CreateKeyspace,
        name=keyspaces,
        replication=st.integers(1, 3).map(ReplicationParams.simple),
        replication_type=st.sampled_from(list(ReplicationType)),
    ),
    AlterKeyspace: st.builds(AlterKeyspace, name=keyspaces, options=st.just((("comment", "x"),))),
    DropKeyspace: st.builds(DropKeyspace, name=keyspaces),
    CreateTable: st.builds(
        CreateTable,
        keyspace=keyspaces,
        name=tables,
        columns=st.just((Column("id", ColumnType.TEXT), Column("v", ColumnType.INT))),
        partition_key=st.just(("id",)),
    ),
    AlterTable: st.builds(
        AlterTable,
        keyspace=keyspaces,
        name=tables,
        add_columns=st.just((Column("w", ColumnType.TEXT),)),
    ),
    DropTable: st.builds(DropTable, keyspace=keyspaces, name=tables),
    Register: st.builds(
        Register,
        address=st.integers(1, 8).map(lambda n: f"127.0.0.1:{9000 + n}"),
        datacenter=st.just("dc1"),
        rack=st.sampled_from(("r1", "r2")),
        version=st.just("1.0.0"),
    ),
    Unregister: st.builds(Unregister, node_id=nodes),
    TriggerSnapshot: st.just(TriggerSnapshot()),
    PrepareJoin: st.builds(PrepareJoin, node_id=nodes, num_tokens=st.integers(1, 4)),
    PrepareLeave: st.builds(PrepareLeave, node_id=nodes, remove=st.booleans()),
    PrepareReplace: st.builds(PrepareReplace, node_id=nodes, replaced=nodes),
    PrepareMove: st.builds(
        PrepareMove, node_id=nodes, tokens=st.lists(tokens, min_size=1, max_size=2).map(tuple)
    ),
    AdvanceSequence: st.builds(AdvanceSequence, node_id=nodes, step=steps),
    CancelSequence: st.builds(CancelSequence, node_id=nodes),
    AddCMSCandidate: st.builds(
        AddCMSCandidate, cms_ids, cms_ids.map(lambda m: f"127.0.0.1:70{m[-1]}")
    ),
    StartAddToCMS: st.builds(StartAddToCMS, cms_ids),
    FinishAddToCMS: st.builds(FinishAddToCMS, cms_ids),
    RemoveFromCMS: st.builds(RemoveFromCMS, cms_ids),
    GrantReconcileLease: st.builds(
        GrantReconcileLease,
        keyspace=keyspaces,
        range=st.just(TokenRange(-100, 100)),
        holder=st.sampled_from(("", "rec-1", "rec-2")),
        replaces=st.integers(0, 3),
    ),
    RegisterReconciler: st.builds(
        RegisterReconciler,
        reconciler_id=st.sampled_from(("rec-1", "rec-2")),
        address=st.sampled_from(("", "127.0.0.1:9101", "127.0.0.1:9102")),
    ),
}
TRANSFORMATIONS = st.one_of(*BY_KIND.values())


def prelude() -> list[ClusterMetadata]:
    """The states of a small cluster the commits act on: two CMS members (one a learner), five
    nodes registered and three of them joined, a tracked keyspace with a table."""
    prelude: list[Transformation] = [
        INITIALIZE,
        AddCMSCandidate("cms2", "127.0.0.1:702"),
        *(
            Register(address=f"127.0.0.1:{9000 + n}", datacenter="dc1", rack="r1", version="1.0.0")
            for n in range(1, 6)
        ),
    ]
    for node in NODES[:3]:
        prelude.append(PrepareJoin(node_id=node, num_tokens=2))
        prelude += [AdvanceSequence(node_id=node, step=s) for s in list(Step)[1:]]
    prelude += [
        CreateKeyspace(
            name="ks0",
            replication=ReplicationParams.simple(2),
            replication_type=ReplicationType.TRACKED,
        ),
        CreateTable(
            keyspace="ks0",
            name="t0",
            columns=(Column("id", ColumnType.TEXT),),
            partition_key=("id",),
        ),
    ]
    states = [ClusterMetadata.empty()]
    for transformation in prelude:
        states.append(apply_transformation(states[-1], transformation))
    return states


PRELUDE = prelude()


def test_every_transformation_kind_is_drawn() -> None:
    assert {kind.kind for kind in BY_KIND} == {kind.kind for kind in ALL_KINDS}


@dataclass
class Queued:
    item: ProposalItem
    origin: str | None


def over_the_wire(items: list[ProposalItem]) -> list[ProposalItem]:
    """What a follower decodes from the chosen value."""
    return [decode_item(encode_item(i)) for i in items]


class Replayed:
    """The state at every epoch, from the log entries the members report (what a restarted
    member or a follower node rebuilds)."""

    def __init__(self) -> None:
        self.states = dict(enumerate(PRELUDE))

    def add(self, result: SlotResult) -> None:
        for entry in result.entries:
            before = self.states[entry.epoch - 1]
            self.states[entry.epoch] = decode_transformation(entry.encoded).execute(before)

    def check_snapshots(self, result: SlotResult) -> None:
        for epoch, state in result.snapshots:
            assert state.epoch == epoch and state == self.states[epoch], epoch


def apply_on_two(
    leader: MetadataStateMachine,
    follower: MetadataStateMachine,
    slot: int,
    items: list[ProposalItem],
    states: list[ClusterMetadata],
) -> SlotResult:
    mine = leader.apply_validated(slot, items, states)
    theirs = follower.apply_slot(slot, over_the_wire(items))
    assert mine == theirs, "the leader's own batch and the decoded slot applied differently"
    assert leader.metadata == follower.metadata and leader.entry_ids() == follower.entry_ids()
    return mine


# Entry ids from a small pool, so that commits share them — the same transformation (a retry)
# or another (a reused id), in one slot or across slots — and ids of the members' own commits
# (a client cannot send those: the codec refuses them; the builder must not trip on them).
ENTRY_IDS = st.sampled_from(
    [f"e{n}" for n in range(10)] + [f"cms:snapshot@{epoch}" for epoch in range(23, 40)]
)


def check_decisions(batch: Batch[Queued], known: dict[str, tuple[int, int]]) -> None:
    """Every commit the builder took is answered as the entry ids say, in the order taken: a
    known id with its first epoch (or as reused), an id proposed earlier in this slot joined
    (or refused as reused)."""
    in_slot: dict[str, int] = {}
    for decided in batch.decided:
        entry_id, digest = decided.commit.item.entry_id, decided.commit.item.digest
        reused = (entry_id in known and known[entry_id][1] != digest) or (
            in_slot.get(entry_id, digest) != digest
        )
        answer = decided.answer
        if decided.decision is Decision.PROPOSED:
            assert entry_id not in known and entry_id not in in_slot, entry_id
            in_slot[entry_id] = digest
        elif decided.decision is Decision.JOINED:
            assert in_slot.get(entry_id) == digest, entry_id
        elif isinstance(answer, CommitResult):
            assert answer.duplicate and known[entry_id] == (answer.epoch, digest), entry_id
        elif reused:
            assert isinstance(answer, Rejected) and answer.rule == "entry_id_reused", answer
        elif decided.decision is Decision.ANSWERED:
            assert isinstance(answer, Rejected) and entry_id not in known, (entry_id, answer)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(TRANSFORMATIONS, ENTRY_IDS, st.sampled_from((None, "cms2", "cms3"))),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 12),
    st.integers(2, 9),
)
def test_whatever_the_builder_emits_every_member_applies_it_alike(
    queue: list[tuple[Transformation, str, str | None]], max_values: int, snapshot_frequency: int
) -> None:
    leader = MetadataStateMachine(PRELUDE[-1], 1)
    follower = MetadataStateMachine(PRELUDE[-1], 1)
    replayed = Replayed()
    pending = [Queued(item(t, entry_id), origin) for t, entry_id, origin in queue]
    limits = BatchLimits(
        max_values=max_values, max_bytes=1 << 20, snapshot_frequency=snapshot_frequency
    )
    last_snapshot = 0
    slot = 1
    while pending:
        base = leader.metadata
        known = {entry_id: (epoch, d) for entry_id, epoch, d in leader.entry_ids()}
        batch = build_batch(
            base,
            iter(list(pending)),
            item_of=lambda q: q.item,
            origin_of=lambda q: q.origin,
            lookup=leader.lookup,
            limits=limits,
            last_snapshot_epoch=last_snapshot,
        )
        taken = len(batch.decided)
        deferred = [d.commit for d in batch.decided if d.decision is Decision.DEFERRED]
        pending = deferred + pending[taken:]
        check_decisions(batch, known)
        # The slot the builder emits: states that follow each other from the base, one voter
        # change at most, a snapshot only as its last item, no entry id twice or known.
        assert [s.epoch for s in batch.states] == list(
            range(base.epoch + 1, base.epoch + 1 + len(batch.items))
        )
        voters = [base.cms_voters, *(s.cms_voters for s in batch.states)]
        assert len({frozenset(v) for v in voters}) <= 2
        assert all(not isinstance(i.transformation, TriggerSnapshot) for i in batch.items[:-1]), (
            "a snapshot ends its slot"
        )
        ids = [i.entry_id for i in batch.items]
        assert len(set(ids)) == len(ids) and not set(ids) & set(known), ids
        if not batch.items:
            assert all(d.decision is not Decision.PROPOSED for d in batch.decided)
            if not deferred and taken == 0:
                break
            if taken and all(d.decision is Decision.DEFERRED for d in batch.decided):
                raise AssertionError("commits deferred with nothing proposed before them")
            continue
        slot += 1
        result = apply_on_two(leader, follower, slot, batch.items, batch.states)
        assert all(o.committed and not o.duplicate for o in result.outcomes)
        replayed.add(result)
        replayed.check_snapshots(result)
        if result.snapshots:
            last_snapshot = result.snapshots[-1][0]
    assert leader.metadata == replayed.states[leader.epoch]


KEYSPACE_KS1 = CreateKeyspace(name="ks1", replication=ReplicationParams.simple(1))


def test_the_leaders_own_snapshot_makes_way_for_an_id_already_taken() -> None:
    """A snapshot due at epoch N whose entry id some commit took already (only a member could:
    clients may not send such ids) is left for the next slot, under another id; a leader that
    applied such a batch of its own anyway applies it as any member would."""
    base = PRELUDE[-1]
    due = base.epoch + 2
    taken = item(TriggerSnapshot(), f"cms:snapshot@{due}")
    machine = MetadataStateMachine(base, 1)
    batch = build_batch(
        base,
        iter(
            [
                Queued(
                    item(
                        CreateKeyspace(name="ks1", replication=ReplicationParams.simple(1)),
                        f"cms:snapshot@{due}",
                    ),
                    None,
                )
            ]
        ),
        item_of=lambda q: q.item,
        origin_of=lambda q: q.origin,
        lookup=machine.lookup,
        limits=BatchLimits(max_values=8, max_bytes=1 << 20, snapshot_frequency=1),
        last_snapshot_epoch=0,
    )
    assert [(i.transformation, i.entry_id) for i in batch.items] == [
        (KEYSPACE_KS1, f"cms:snapshot@{due}")
    ]
    # A leader's own batch that breaks the builder's promises is applied the long way.
    follower = MetadataStateMachine(base, 1)
    twice = [taken, taken]
    states = [taken.transformation.execute(base)]
    states.append(taken.transformation.execute(states[0]))
    result = machine.apply_validated(2, twice, states)
    assert result == follower.apply_slot(2, twice) and machine.epoch == base.epoch + 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(TRANSFORMATIONS, st.integers(0, 30)), min_size=0, max_size=12),
        min_size=1,
        max_size=6,
    )
)
def test_a_slot_no_builder_made_applies_alike_everywhere(
    slots: list[list[tuple[Transformation, int]]],
) -> None:
    """Chosen values straight from a client's queue (entry ids reused, snapshots anywhere):
    two members applying them (one from the items, one from the wire) agree on every outcome
    and state, and every snapshot is the state at its own epoch."""
    one = MetadataStateMachine(PRELUDE[-1], 1)
    other = MetadataStateMachine(PRELUDE[-1], 1)
    replayed = Replayed()
    chosen = [[item(t, f"e{n}") for t, n in values] for values in slots]
    for slot, items in enumerate(chosen, start=2):
        mine = one.apply_slot(slot, items)
        theirs = other.apply_slot(slot, over_the_wire(items))
        assert mine == theirs and one.metadata == other.metadata
        replayed.add(mine)
        replayed.check_snapshots(mine)
    assert one.metadata == replayed.states[one.epoch]


def test_a_commit_waiting_on_an_entry_id_is_never_told_another_transformations_epoch() -> None:
    """A follower forwarded (X, T2) while the slot being chosen carries (X, T1): applying the
    slot answers T1's callers with its epoch and T2's as reused — never "committed at T1's
    epoch" — and leaves T2 open when the slot recorded nothing under X (T1 was refused)."""
    machine = MetadataStateMachine(PRELUDE[-1], 1)
    first = item(KEYSPACE_KS1, "x")
    second = item(CreateKeyspace(name="ks2", replication=ReplicationParams.simple(1)), "x")
    (outcome,) = machine.apply_slot(2, [first]).outcomes
    known = machine.lookup("x")
    committed = answer_to(outcome, first.digest, known, 1, 2)
    assert isinstance(committed, CommitResult) and committed.epoch == outcome.epoch
    reused = answer_to(outcome, second.digest, known, 1, 2)
    assert isinstance(reused, Rejected) and reused.rule == "entry_id_reused"
    (refused,) = machine.apply_slot(3, [item(KEYSPACE_KS1, "y")]).outcomes  # ks1 exists
    assert refused.rejection is not None
    assert answer_to(refused, second.digest, machine.lookup("y"), 1, 3) is None
