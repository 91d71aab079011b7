"""The CMS: ``cms describe`` (members, roles, leader, epoch, snapshots, each member's applied
epoch, as the members themselves say), ``cms reconfigure`` (``epochal.cli.reconfigure``) and
``cms snapshot``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import click

from epochal.cli import reconfigure
from epochal.cli.connect import Cluster
from epochal.cli.failures import Unreachable
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit, table
from epochal.cli.runner import failure_of, opened, run
from epochal.cms_client import CMSClient, CMSView
from epochal.errors import EpochalError
from epochal.tcm import CMSRole, TriggerSnapshot


@click.group()
@global_options
def cms() -> None:
    """The CMS: its members, their reconfiguration, snapshots."""


def cms_client(cluster: Cluster, options: Options) -> CMSClient:
    voters = [m.address for m in cluster.metadata.cms_members if m.role is CMSRole.VOTER]
    others = [a for a in cluster.cms_addresses() if a not in voters]
    return CMSClient(
        voters + others,
        attempt_timeout_s=min(options.timeout_s, 5.0),
        total_timeout_s=options.timeout_s,
    )


# ---------------------------------------------------------------------- cms describe


@cms.command("describe")
@global_options
def cms_describe() -> int:
    """Members, roles, leader, epoch, snapshots, and each member's applied epoch."""
    return run(_cms_describe)


async def _cms_describe(options: Options) -> int:
    async with opened(options) as cluster:
        data = await cms_state(cluster)
    emit(options.output, data, lambda: cms_tables(data))
    return 0


async def cms_state(cluster: Cluster) -> dict[str, Any]:
    """The CMS as its members report it (a member that does not answer is unreachable)."""
    members = cluster.metadata.cms_members
    answers = await asyncio.gather(
        *(cluster.cms_describe(m.address) for m in members), return_exceptions=True
    )
    views_of: dict[str, CMSView] = {}
    for member, answer in zip(members, answers, strict=True):
        if isinstance(answer, CMSView):
            views_of[member.member_id] = answer
        elif not isinstance(answer, Exception):
            raise answer  # type: ignore[misc]
    if not views_of:
        raise Unreachable(
            f"no CMS member answered ({', '.join(m.address for m in members) or 'none known'})"
        )
    newest = max(views_of.values(), key=lambda v: v.epoch)
    # A leader that does not answer is not shown as one (the others' view of it is stale).
    leader = newest.leader_id if newest.leader_id in views_of else ""
    # The roles as the newest member says (the metadata read at the start may be older).
    roles = {m.member_id: m.role.value for m in members}
    if newest.epoch > cluster.metadata.epoch:
        roles.update({m.member_id: m.role for m in newest.members})
    joining = [m for m, role in roles.items() if role == CMSRole.JOINING.value]
    return {
        "epoch": max(cluster.metadata.epoch, newest.epoch),
        "leader": leader or None,
        "voters": sorted(m for m, role in roles.items() if role == CMSRole.VOTER.value),
        "reconfiguration": {"joining": joining[0]} if joining else None,
        "snapshots": list(newest.snapshot_epochs),
        "members": [
            {
                "id": m.member_id,
                "address": m.address,
                "role": roles[m.member_id],
                "leader": m.member_id == leader,
                "reachable": m.member_id in views_of,
                "epoch": views_of[m.member_id].epoch if m.member_id in views_of else None,
                "applied_slot": (
                    views_of[m.member_id].applied_slot if m.member_id in views_of else None
                ),
                "ready": views_of[m.member_id].ready if m.member_id in views_of else None,
                "log_complete": (
                    views_of[m.member_id].log_complete if m.member_id in views_of else None
                ),
            }
            for m in members
        ],
    }


def cms_tables(data: dict[str, Any]) -> list[Any]:
    reconfiguring = data["reconfiguration"]
    return [
        f"Epoch: {data['epoch']}   Leader: {data['leader'] or 'none known'}   "
        f"Voters: {len(data['voters'])}   Snapshots at: "
        f"{', '.join(map(str, data['snapshots'])) or 'none'}"
        + (f"   Reconfiguring: adding {reconfiguring['joining']}" if reconfiguring else ""),
        table(
            ["ID", "ADDRESS", "ROLE", "LEADER", "> EPOCH", "> SLOT", "READY", "LOG"],
            [
                [
                    m["id"],
                    m["address"],
                    m["role"],
                    "*" if m["leader"] else "",
                    m["epoch"] if m["reachable"] else "unreachable",
                    m["applied_slot"],
                    _yes(m["ready"]),
                    "complete" if m["log_complete"] else "filling" if m["reachable"] else "",
                ]
                for m in data["members"]
            ],
        ),
    ]


def _yes(value: bool | None) -> str:
    return "" if value is None else "yes" if value else "no"


# ---------------------------------------------------------------------- cms reconfigure


@cms.command("reconfigure")
@click.argument("voters", type=click.IntRange(min=1), required=False)
@click.option("--status", "show_status", is_flag=True, help="show a reconfiguration in progress")
@click.option("--resume", is_flag=True, help="finish an interrupted reconfiguration")
@click.option("--cancel", is_flag=True, help="undo an interrupted reconfiguration")
@global_options
def cms_reconfigure(voters: int | None, show_status: bool, resume: bool, cancel: bool) -> int:
    """Bring the CMS to VOTERS voters, one member at a time, through the log."""
    chosen = [
        flag
        for flag, on in (("--status", show_status), ("--resume", resume), ("--cancel", cancel))
        if on
    ]
    if len(chosen) > 1 or (chosen and voters is not None):
        raise click.UsageError(f"give VOTERS or one of --status/--resume/--cancel, not {chosen}")
    if not chosen and voters is None:
        raise click.UsageError("give VOTERS (how many voters) or --status/--resume/--cancel")
    action = chosen[0] if chosen else ""
    return run(lambda options: _reconfigure(options, voters, action))


async def _reconfigure(options: Options, voters: int | None, action: str) -> int:
    async with opened(options) as cluster:
        if action == "--status":
            data = await cms_state(cluster)
            emit(options.output, data, lambda: cms_tables(data))
            return 0
        async with cms_client(cluster, options) as client:
            try:
                if action:
                    await reconfigure.resume_or_cancel(client, cancel=action == "--cancel")
                else:
                    assert voters is not None  # the command line asks one or the other
                    await reconfigure.reach(cluster, client, voters)
            except EpochalError as error:
                raise failure_of(error, "cms reconfigure") from None
        data = await cms_state(cluster)
    emit(options.output, data, lambda: cms_tables(data))
    return 0


# ---------------------------------------------------------------------- cms snapshot


@cms.command("snapshot")
@global_options
def cms_snapshot() -> int:
    """Take a snapshot of the metadata now (a TriggerSnapshot through the log)."""
    return run(_cms_snapshot)


async def _cms_snapshot(options: Options) -> int:
    async with opened(options) as cluster, cms_client(cluster, options) as client:
        try:
            committed = await client.commit(TriggerSnapshot(), f"cli-snapshot-{uuid.uuid4().hex}")
        except EpochalError as error:
            raise failure_of(error, "cms snapshot") from None
    data = {"epoch": committed.epoch}
    emit(options.output, data, lambda: [f"snapshot of the metadata at epoch {committed.epoch}"])
    return 0
