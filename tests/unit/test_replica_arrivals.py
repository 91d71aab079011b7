"""What a coordinator's replies add up to (epochal.replica.arrivals): ``Progress`` keeps the
replicas that answered no (refused, with the reply's outcome and message) apart from those that
gave no answer (not answering: could not be asked, or the call failed); and a failed request's
``ReplicaOutcome`` names every member of the token's group — one whose call is still out at the
deadline as not answering "no answer within <timeout> ms", one never asked as "not asked"."""

from __future__ import annotations

import asyncio

from epochal.errors import ReplicaOutcome
from epochal.replica.arrivals import Progress, collect
from epochal.replica.coordinator_plan import Plan, Planner
from epochal.replica.handles import PeerFailed
from epochal.replica.local_replica import Outcome, PeerReply
from epochal.tcm import ReplicationParams, Step
from epochal.tcm.consistency import Consistency

from .seed_ring import Cluster, ring

TOKENS = {"A": 100, "B": 200, "C": 300}
RING = ring(TOKENS, Cluster({"ks": ReplicationParams.simple(3)}))  # RF 3: all three, everywhere
A, B, C = (RING.ids[name] for name in "ABC")
TOKEN = 150
PLANNER = Planner(A, "dc1")


def plan(level: Consistency = Consistency.ALL) -> Plan:
    return PLANNER.plan(RING.md, level, "ks", TOKEN, write=True)


def reply(outcome: Outcome, message: str = "", fence: int = 0) -> PeerReply:
    return PeerReply(RING.md.epoch, outcome, message, fence=fence)


def test_a_refusal_and_a_failure_to_answer_are_kept_apart() -> None:
    progress = Progress(view=RING.md)
    assert progress.note_reply(A, reply(Outcome.OK))
    assert not progress.note_reply(B, reply(Outcome.FENCED, "below the fence 9", fence=9))
    progress.note_failure(C, "no answer from C within 2.000 s")
    assert progress.answered == {A}
    assert progress.refused == {B: "fenced: below the fence 9"}
    assert progress.not_answering == {C: "no answer from C within 2.000 s"}
    assert progress.fence == 9 and progress.malformed == {}
    assert progress.outcome(plan(), needed=3, timeout_ms=2000, timed_out=False) == ReplicaOutcome(
        consistency="ALL",
        required=3,
        replicas=tuple(sorted((A, B, C))),
        acknowledged=(A,),
        refused=((B, "fenced: below the fence 9"),),
        not_answering=((C, "no answer from C within 2.000 s"),),
    )


def test_a_replica_silent_at_the_deadline_is_named_not_answering() -> None:
    """Its call never settled, so nothing but the outcome names it."""

    async def scenario() -> ReplicaOutcome:
        loop = asyncio.get_running_loop()
        answers = {A: reply(Outcome.OK), B: reply(Outcome.OK)}

        def send(node: str) -> asyncio.Future[PeerReply]:
            future: asyncio.Future[PeerReply] = loop.create_future()
            if node in answers:
                future.set_result(answers[node])
            return future  # C's never settles

        progress = Progress(view=RING.md)
        made = plan()

        async def done() -> bool:
            return PLANNER.satisfied(progress.view, made, progress.answered)

        assert not await collect(sorted((A, B, C)), send, progress, loop.time() + 0.05, done)
        assert progress.asked == {A, B, C} and progress.not_answering == {}
        return progress.outcome(made, needed=3, timeout_ms=50, timed_out=True)

    outcome = asyncio.run(scenario())
    assert outcome.acknowledged == tuple(sorted((A, B)))
    assert outcome.not_answering == ((C, "no answer within 50 ms"),)
    assert outcome.describe() == (
        f"ALL needs 3 of {', '.join(sorted((A, B, C)))}: acknowledged "
        f"{', '.join(sorted((A, B)))}; not answering {C} (no answer within 50 ms)"
    )


def test_one_that_could_not_be_asked_is_not_answering_with_the_reason() -> None:
    async def scenario() -> Progress:
        loop = asyncio.get_running_loop()

        def send(node: str) -> asyncio.Future[PeerReply]:
            if node == C:
                raise PeerFailed(C, "not in the directory at epoch 3")
            future: asyncio.Future[PeerReply] = loop.create_future()
            future.set_result(reply(Outcome.NOT_A_REPLICA, f"{node} is not in the group"))
            return future

        progress = Progress(view=RING.md)

        async def never() -> bool:
            return False

        assert not await collect(sorted((A, B, C)), send, progress, loop.time() + 5, never)
        return progress

    progress = asyncio.run(scenario())
    outcome = progress.outcome(plan(Consistency.QUORUM), needed=2, timeout_ms=2000, timed_out=False)
    assert outcome.acknowledged == ()
    assert outcome.refused == tuple(
        (node, f"not_a_replica: {node} is not in the group") for node in sorted((A, B))
    )
    assert outcome.not_answering == ((C, "not in the directory at epoch 3"),)
    assert outcome.describe().startswith("QUORUM needs 2 of ")
    assert "none acknowledged; refused " in outcome.describe()


def test_the_outcome_is_told_against_the_group_at_the_view() -> None:
    """A plan made before a join started, re-checked at a view where the joining node is in
    the write group: it was never asked, and ALL needs it too."""
    growing = ring(TOKENS, Cluster({"ks": ReplicationParams.simple(3)}))
    before = growing.md
    made = Planner(growing.ids["A"], "dc1").plan(before, Consistency.ALL, "ks", TOKEN, write=True)
    x = growing.join("X", 160, (Step.START,))  # X is pending in (100, 160]'s write group
    joining = growing.md
    progress = Progress(view=joining)
    for node in made.group:
        progress.note_asked(node)
        progress.note_reply(node, reply(Outcome.OK))
    planner = Planner(growing.ids["A"], "dc1")
    assert x not in made.group and x in made.group_at(joining)
    needed = planner.needed(joining, made)
    outcome = progress.outcome(made, needed=needed, timeout_ms=2000, timed_out=False)
    assert outcome.required == len(made.group_at(joining)) == needed
    assert outcome.acknowledged == tuple(sorted(made.group))
    assert outcome.not_answering == ((x, f"not asked: not in the group at epoch {before.epoch}"),)
