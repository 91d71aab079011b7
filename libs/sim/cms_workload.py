"""What the simulated clients commit: every transformation kind, drawn from small pools of
names so that the commits of a run meet (a table of a keyspace created just before, a join of a
node registered in the same slot, a voter change after another), each under its own entry id.
The CMS membership kinds name the simulated members themselves, so they change the voters."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from epochal.cmscore.batching import proposal_item
from epochal.cmscore.state_machine import ProposalItem
from epochal.tcm import (
    ALL_KINDS,
    AddCMSCandidate,
    AdvanceSequence,
    AlterKeyspace,
    AlterTable,
    CancelSequence,
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
)

KEYSPACES = ("ks0", "ks1")
TABLES = ("t0", "t1")
NODES = tuple(f"node-{n}" for n in range(1, 6))
COLUMNS = (Column("id", ColumnType.TEXT), Column("v", ColumnType.INT))

Draw = Callable[[random.Random, Sequence[str], Callable[[str], str]], Transformation]


def _token(rng: random.Random) -> int:
    return rng.randint(-(2**63) + 1, 2**63 - 1)


# One way to draw each kind: (rng, the members' ids, a member's address) -> a transformation.
BY_KIND: dict[type[Transformation], Draw] = {
    InitializeCMS: lambda r, ms, addr: InitializeCMS(
        members=tuple(CMSMember(m, addr(m)) for m in ms[:1])
    ),
    CreateKeyspace: lambda r, ms, addr: CreateKeyspace(
        name=r.choice(KEYSPACES),
        replication=ReplicationParams.simple(r.randint(1, 3)),
        replication_type=r.choice(list(ReplicationType)),
    ),
    AlterKeyspace: lambda r, ms, addr: AlterKeyspace(
        name=r.choice(KEYSPACES), options=(("comment", str(r.randint(0, 9))),)
    ),
    DropKeyspace: lambda r, ms, addr: DropKeyspace(name=r.choice(KEYSPACES)),
    CreateTable: lambda r, ms, addr: CreateTable(
        keyspace=r.choice(KEYSPACES), name=r.choice(TABLES), columns=COLUMNS, partition_key=("id",)
    ),
    AlterTable: lambda r, ms, addr: AlterTable(
        keyspace=r.choice(KEYSPACES),
        name=r.choice(TABLES),
        add_columns=(Column(f"w{r.randint(0, 3)}", ColumnType.TEXT),),
    ),
    DropTable: lambda r, ms, addr: DropTable(keyspace=r.choice(KEYSPACES), name=r.choice(TABLES)),
    Register: lambda r, ms, addr: Register(
        address=f"127.0.0.1:{9000 + r.randint(1, 8)}",
        datacenter="dc1",
        rack=r.choice(("r1", "r2")),
        version="1.0.0",
    ),
    Unregister: lambda r, ms, addr: Unregister(node_id=r.choice(NODES)),
    TriggerSnapshot: lambda r, ms, addr: TriggerSnapshot(),
    PrepareJoin: lambda r, ms, addr: PrepareJoin(
        node_id=r.choice(NODES), num_tokens=r.randint(1, 4)
    ),
    PrepareLeave: lambda r, ms, addr: PrepareLeave(
        node_id=r.choice(NODES), remove=r.random() < 0.5
    ),
    PrepareReplace: lambda r, ms, addr: PrepareReplace(
        node_id=r.choice(NODES), replaced=r.choice(NODES)
    ),
    PrepareMove: lambda r, ms, addr: PrepareMove(
        node_id=r.choice(NODES), tokens=tuple(_token(r) for _ in range(r.randint(1, 2)))
    ),
    AdvanceSequence: lambda r, ms, addr: AdvanceSequence(
        node_id=r.choice(NODES), step=r.choice(list(Step))
    ),
    CancelSequence: lambda r, ms, addr: CancelSequence(node_id=r.choice(NODES)),
    AddCMSCandidate: lambda r, ms, addr: AddCMSCandidate((m := r.choice(ms)), addr(m)),
    StartAddToCMS: lambda r, ms, addr: StartAddToCMS(r.choice(ms)),
    FinishAddToCMS: lambda r, ms, addr: FinishAddToCMS(r.choice(ms)),
    RemoveFromCMS: lambda r, ms, addr: RemoveFromCMS(r.choice(ms)),
    GrantReconcileLease: lambda r, ms, addr: GrantReconcileLease(
        keyspace=r.choice(KEYSPACES),
        range=TokenRange(-100, 100),
        holder=r.choice(("", "rec-1", "rec-2")),
        replaces=r.randint(0, 3),
    ),
    RegisterReconciler: lambda r, ms, addr: RegisterReconciler(
        reconciler_id=r.choice(("rec-1", "rec-2")),
        address=r.choice(("", "127.0.0.1:9101", "127.0.0.1:9102")),
    ),
}
assert {kind.kind for kind in BY_KIND} == {kind.kind for kind in ALL_KINDS}
_KINDS = sorted(BY_KIND, key=lambda kind: kind.kind)
# The kinds that move nodes through their sequences, drawn more often so that joins finish.
_TOPOLOGY_WEIGHT = {
    Register: 3,
    PrepareJoin: 2,
    AdvanceSequence: 4,
    CreateKeyspace: 2,
    CreateTable: 2,
}


def draw_commit(
    rng: random.Random, members: Sequence[str], address_of: Callable[[str], str], entry_id: str
) -> ProposalItem:
    """A commit of a kind drawn at random, under ``entry_id``."""
    weights = [_TOPOLOGY_WEIGHT.get(kind, 1) for kind in _KINDS]
    kind = rng.choices(_KINDS, weights)[0]
    return proposal_item(BY_KIND[kind](rng, members, address_of), entry_id)


def operator_script(rng: random.Random) -> list[Transformation]:
    """What an operator commits, in order, so that nodes get through whole operations: five
    nodes registered, three joined step by step, then a move, a leave and a replace (random
    clients rarely draw a sequence's steps in order). A step refused because the state is not
    what the script expects (another client's commits meet it) is refused, not retried."""
    later = list(Step)[1:]
    script: list[Transformation] = [
        Register(address=f"127.0.0.1:{9100 + n}", datacenter="dc1", rack="r1", version="1.0.0")
        for n in range(1, 6)
    ]
    for node in NODES[:3]:
        script.append(PrepareJoin(node_id=node, num_tokens=2))
        script += [AdvanceSequence(node_id=node, step=step) for step in later]
    script.append(PrepareMove(node_id=NODES[0], tokens=(_token(rng),)))
    script += [AdvanceSequence(node_id=NODES[0], step=step) for step in later]
    script.append(PrepareLeave(node_id=NODES[1], remove=True))
    script += [AdvanceSequence(node_id=NODES[1], step=step) for step in later]
    script.append(PrepareReplace(node_id=NODES[3], replaced=NODES[2]))
    script += [AdvanceSequence(node_id=NODES[3], step=step) for step in later]
    return script
