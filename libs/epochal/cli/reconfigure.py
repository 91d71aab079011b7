"""``epochal cms reconfigure``: bring the CMS to N voters, one member at a time, through the log.

Theory of operation
-------------------
Each step is one change of the voter set (``epochal.cms_admin``: a voter is added in two steps,
START then FINISH once it holds the log; one is removed in one), and each is chosen afresh from
what the members say now (``next_change``, pure):

* *Growing*: the first candidate (a learner) that answers, in id order.
* *Shrinking*: voters that do not answer first, then those that do, highest id first, the leader
  last — so a dead voter leaves before a live one and the leader keeps its place while it can.
* *Never below a live majority*: a step whose voter set would not have a majority of members
  that answer is refused, with the count. Shrinking 5 voters with 2 of them down to 3 removes
  the 2 dead ones; removing a live one instead would leave 2 live of 4 — no quorum.

A reconfiguration interrupted between START and FINISH is metadata (the member stays JOINING):
``--status`` shows it, ``--resume`` finishes it and ``--cancel`` undoes it, as nodetool's do; a
new ``reconfigure N`` is refused until then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

from epochal import cms_admin
from epochal.cli.connect import Cluster
from epochal.cli.failures import Failure, Refused
from epochal.cli.output import stderr_console
from epochal.cms_client import CMSClient, CMSView
from epochal.tcm import CMSRole
from epochal.views import sorted_ids

CATCH_UP_TIMEOUT_S = 120.0  # a new voter copies the log before its FINISH
ADD, REMOVE = "add", "remove"


def say(line: str) -> None:
    stderr_console().print(line, markup=False, highlight=False)


def next_change(
    voters: Sequence[str],
    learners: Sequence[str],
    live: Collection[str],
    leader: str,
    target: int,
) -> tuple[str, str] | None:
    """The next step towards ``target`` voters — (ADD or REMOVE, member id) — or None when
    there; Refused when no step keeps a live majority of the voters or no candidate answers."""
    if len(voters) == target:
        return None
    if len(voters) < target:
        answering = [m for m in sorted_ids(learners) if m in live]
        if not answering:
            raise Refused(
                "no CMS candidate answers: start one (it registers as a learner; `epochal dev "
                "add-cms` in a dev cluster) and retry"
            )
        change = (ADD, answering[0])
        after = [*voters, answering[0]]
    else:
        dead = [v for v in voters if v not in live]
        alive = [v for v in voters if v in live and v != leader]
        order = [*reversed(sorted_ids(dead)), *reversed(sorted_ids(alive))]
        order += [leader] if leader in voters else []
        change = (REMOVE, order[0])
        after = [v for v in voters if v != order[0]]
    alive_after = sum(1 for v in after if v in live)
    if alive_after <= len(after) // 2:
        verb = "adding" if change[0] == ADD else "removing"
        raise Refused(
            f"{verb} {change[1]} would leave {alive_after} of {len(after)} voters answering, "
            f"no majority (answering: {', '.join(sorted_ids(live)) or 'none'}); bring the "
            "members that do not answer back first"
        )
    return change


async def reach(cluster: Cluster, client: CMSClient, target: int) -> None:
    """Change one member at a time until ``target`` members vote."""
    since = 0
    while True:
        described = await cms_admin.described_since(client, since)
        views = await _views(cluster, described)
        # The most advanced view: a member that was stopped while the voters changed answers
        # with the voters it knew then, until it catches up.
        described = max([described, *views.values()], key=lambda view: view.epoch)
        if any(m.role == CMSRole.JOINING.value for m in described.members):
            raise Refused(
                "a CMS reconfiguration is in progress: finish it with `epochal cms reconfigure "
                "--resume` or undo it with `epochal cms reconfigure --cancel`"
            )
        if target > len(described.members):
            raise Refused(
                f"the CMS has {len(described.members)} members, so it cannot have {target} "
                "voters: start more CMS members first (they register as candidates; "
                "`epochal dev add-cms` in a dev cluster)"
            )
        change = next_change(
            [m.member_id for m in described.members if m.role == CMSRole.VOTER.value],
            [m.member_id for m in described.members if m.role == CMSRole.LEARNER.value],
            set(views),
            described.leader_id,
            target,
        )
        if change is None:
            return
        since = await _apply(client, described, change, since)


async def _views(cluster: Cluster, described: CMSView) -> dict[str, CMSView]:
    """What each member that answers a Describe now says, by member id."""
    answers = await asyncio.gather(
        *(cluster.cms_describe(m.address) for m in described.members), return_exceptions=True
    )
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, Failure):
            raise answer
    return {
        m.member_id: answer
        for m, answer in zip(described.members, answers, strict=True)
        if not isinstance(answer, BaseException)
    }


async def _apply(client: CMSClient, described: CMSView, change: tuple[str, str], since: int) -> int:
    action, member_id = change
    if action == REMOVE:
        say(f"removing {member_id} from the voters ...")
        epoch = await cms_admin.remove_voter(client, member_id, since_epoch=since)
        say(f"{member_id} is a learner (epoch {epoch})")
        return epoch
    address = next(m.address for m in described.members if m.member_id == member_id)
    say(f"adding {member_id} ({address}) as a voter ...")
    epoch = await cms_admin.add_voter(
        client, member_id, address, since_epoch=since, catch_up_timeout_s=CATCH_UP_TIMEOUT_S
    )
    say(f"{member_id} votes (epoch {epoch})")
    return epoch


async def resume_or_cancel(client: CMSClient, *, cancel: bool) -> int:
    """Finish (or undo) the addition interrupted between its two steps; its epoch."""
    described = await client.describe()
    joining = [m for m in described.members if m.role == CMSRole.JOINING.value]
    if not joining:
        raise Refused("no CMS reconfiguration is in progress: nothing to resume or cancel")
    member = joining[0]
    if cancel:
        epoch = await cms_admin.remove_voter(client, member.member_id)
        say(f"cancelled the addition of {member.member_id} (epoch {epoch})")
        return epoch
    say(f"resuming the addition of {member.member_id} ({member.address}) ...")
    epoch = await cms_admin.add_voter(
        client, member.member_id, member.address, catch_up_timeout_s=CATCH_UP_TIMEOUT_S
    )
    say(f"{member.member_id} votes (epoch {epoch})")
    return epoch
