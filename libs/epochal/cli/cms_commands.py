"""The CMS and its log: ``cms describe``, ``cms reconfigure``, ``cms snapshot``, ``log`` and
``metadata dump``.

``cms reconfigure N`` brings the voters to N one member at a time, through the log
(``epochal.cms_admin``: a voter is added in two steps, START then FINISH once it holds the log;
one is removed in one). It promotes candidates (learners that answer) in id order and removes
voters other than the leader, highest id first, so the leader keeps its place while it can. A
reconfiguration interrupted between START and FINISH is metadata: ``--status`` shows it,
``--resume`` finishes it and ``--cancel`` undoes it, as nodetool's do.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import click
from google.protobuf.json_format import MessageToDict

from epochal import cms_admin, views
from epochal.cli.connect import Cluster
from epochal.cli.failures import Refused
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit, stderr_console, table
from epochal.cli.runner import failure_of, opened, run
from epochal.cms_client import CMSClient, CMSView
from epochal.errors import EpochalError
from epochal.metadata_view import apply_page
from epochal.tcm import ClusterMetadata, CMSRole, TriggerSnapshot
from epochal.wire.log import LogRecord
from epochal.wire.metadata import metadata_to_proto

LOG_PAGE = 500
FOLLOW_RETRY_S = 0.5  # before following from the next member
CATCH_UP_TIMEOUT_S = 120.0  # a new voter copies the log before its FINISH


@click.group()
def cms() -> None:
    """The CMS: its members, their reconfiguration, snapshots."""


def _cms_client(cluster: Cluster, options: Options) -> CMSClient:
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
    newest = max(views_of.values(), key=lambda v: v.epoch, default=None)
    leader = newest.leader_id if newest is not None else ""
    # The roles as the newest member says (the metadata read at the start may be older).
    roles = {m.member_id: m.role.value for m in members}
    if newest is not None and newest.epoch > cluster.metadata.epoch:
        roles.update({m.member_id: m.role for m in newest.members})
    joining = [m for m, role in roles.items() if role == CMSRole.JOINING.value]
    return {
        "epoch": max(cluster.metadata.epoch, newest.epoch if newest else 0),
        "leader": leader or None,
        "voters": sorted(m for m, role in roles.items() if role == CMSRole.VOTER.value),
        "reconfiguration": {"joining": joining[0]} if joining else None,
        "snapshots": list(newest.snapshot_epochs) if newest is not None else [],
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
        async with _cms_client(cluster, options) as client:
            try:
                if action:
                    await _resume_or_cancel(cluster, client, cancel=action == "--cancel")
                else:
                    assert voters is not None
                    await _reach(cluster, client, voters, options)
            except EpochalError as error:
                raise failure_of(error, "cms reconfigure") from None
        data = await cms_state(cluster)
    emit(options.output, data, lambda: cms_tables(data))
    return 0


def _say(line: str) -> None:
    stderr_console().print(line)


async def _resume_or_cancel(cluster: Cluster, client: CMSClient, *, cancel: bool) -> None:
    described = await client.describe()
    joining = [m for m in described.members if m.role == CMSRole.JOINING.value]
    if not joining:
        raise Refused("no CMS reconfiguration is in progress: nothing to resume or cancel")
    member = joining[0]
    if cancel:
        epoch = await cms_admin.remove_voter(client, member.member_id)
        _say(f"cancelled the addition of {member.member_id} (epoch {epoch})")
    else:
        epoch = await cms_admin.add_voter(
            client, member.member_id, member.address, catch_up_timeout_s=CATCH_UP_TIMEOUT_S
        )
        _say(f"{member.member_id} votes (epoch {epoch})")
    await _refresh(cluster, client, epoch)


async def _reach(cluster: Cluster, client: CMSClient, target: int, options: Options) -> None:
    """Promote or demote one member at a time until ``target`` members vote."""
    since = 0
    while True:
        described = await _described_since(client, since)
        if any(m.role == CMSRole.JOINING.value for m in described.members):
            raise Refused(
                "a CMS reconfiguration is in progress: finish it with `epochal cms reconfigure "
                "--resume` or undo it with --cancel"
            )
        voters = sorted(m.member_id for m in described.members if m.role == "voter")
        if len(voters) == target:
            return
        if target > len(described.members):
            raise Refused(
                f"the CMS has {len(described.members)} members, so it cannot have {target} "
                "voters: start more CMS members first (they register as candidates; "
                "`epochal dev add-cms` in a dev cluster)"
            )
        if len(voters) < target:
            since = await _promote(cluster, client, described, since)
        else:
            since = await _demote(client, described, voters, since)


async def _promote(cluster: Cluster, client: CMSClient, described: CMSView, since: int) -> int:
    learners = sorted(
        (m for m in described.members if m.role == CMSRole.LEARNER.value),
        key=lambda m: m.member_id,
    )
    for member in learners:
        try:
            await cluster.cms_describe(member.address)
        except Exception:
            _say(f"candidate {member.member_id} at {member.address} does not answer; skipped")
            continue
        _say(f"adding {member.member_id} ({member.address}) as a voter ...")
        epoch = await cms_admin.add_voter(
            client,
            member.member_id,
            member.address,
            since_epoch=since,
            catch_up_timeout_s=CATCH_UP_TIMEOUT_S,
        )
        _say(f"{member.member_id} votes (epoch {epoch})")
        return epoch
    raise Refused("no CMS candidate answers: start one (it registers as a learner) and retry")


async def _demote(client: CMSClient, described: CMSView, voters: list[str], since: int) -> int:
    others = [v for v in voters if v != described.leader_id] or voters
    member_id = max(others)
    _say(f"removing {member_id} from the voters ...")
    epoch = await cms_admin.remove_voter(client, member_id, since_epoch=since)
    _say(f"{member_id} is a learner (epoch {epoch})")
    return epoch


async def _described_since(client: CMSClient, epoch: int) -> CMSView:
    for _ in range(200):
        described = await client.describe()
        if described.epoch >= epoch:
            return described
        await asyncio.sleep(0.05)
    raise Refused(f"no CMS member answered with epoch {epoch} applied within 10 s")


async def _refresh(cluster: Cluster, client: CMSClient, epoch: int) -> None:
    """Bring the cluster's metadata to ``epoch`` (the members' roles shown after a change)."""
    metadata = cluster.metadata
    while metadata.epoch < epoch:
        page = await client.fetch_log(metadata.epoch)
        moved = apply_page(metadata, page)
        if moved.epoch == metadata.epoch:
            break
        metadata = moved
    cluster.metadata = metadata


# ---------------------------------------------------------------------- cms snapshot


@cms.command("snapshot")
@global_options
def cms_snapshot() -> int:
    """Take a snapshot of the metadata now (a TriggerSnapshot through the log)."""
    return run(_cms_snapshot)


async def _cms_snapshot(options: Options) -> int:
    async with opened(options) as cluster, _cms_client(cluster, options) as client:
        try:
            committed = await client.commit(TriggerSnapshot(), f"cli-snapshot-{uuid.uuid4().hex}")
        except EpochalError as error:
            raise failure_of(error, "cms snapshot") from None
    data = {"epoch": committed.epoch}
    emit(options.output, data, lambda: [f"snapshot of the metadata at epoch {committed.epoch}"])
    return 0


# ---------------------------------------------------------------------- log


@click.command()
@click.option("--from", "first", type=click.IntRange(min=1), default=1, help="first epoch")
@click.option("--to", "last", type=click.IntRange(min=1), default=None, help="last epoch")
@click.option("--follow", "-f", is_flag=True, help="then every new epoch, until Ctrl-C")
@global_options
def log(first: int, last: int | None, follow: bool) -> int:
    """The metadata log, one line per epoch."""
    if last is not None and last < first:
        raise click.UsageError(f"--to {last} is before --from {first}")
    if follow and last is not None:
        raise click.UsageError("--follow goes on past any --to: give one or the other")
    return run(lambda options: _log(options, first, last, follow))


async def _log(options: Options, first: int, last: int | None, follow: bool) -> int:
    async with opened(options) as cluster, _cms_client(cluster, options) as client:
        try:
            records = await read_log(client, first, last)
        except EpochalError as error:
            raise failure_of(error, "log") from None
        data = [views.log_line(r) for r in records]
        if not follow:
            emit(
                options.output,
                data,
                lambda: [
                    table(["> EPOCH", "TRANSFORMATION"], [[d["epoch"], d["text"]] for d in data])
                ],
            )
            return 0
        for line in data:
            _print_entry(options, line)
        await follow_log(client, records[-1].epoch if records else first - 1, options)
    return 0


async def follow_log(client: CMSClient, since: int, options: Options) -> None:
    """Print each entry after ``since`` as the CMS commits it, until interrupted. A member whose
    stream ends or fails is left for the next one, from the last epoch printed; when no member
    has streamed for ``options.timeout_s``, the CMS is unreachable."""
    quiet_since = time.monotonic()
    while True:
        try:
            async for page in client.watch(since):
                quiet_since = time.monotonic()
                fresh = [r for r in page.records if r.epoch > since]
                if fresh and fresh[0].epoch > since + 1:  # a snapshot stood for the gap
                    fresh = await read_log(client, since + 1, fresh[0].epoch - 1) + fresh
                for record in fresh:
                    _print_entry(options, views.log_line(record))
                    since = record.epoch
        except EpochalError as error:
            if time.monotonic() - quiet_since > options.timeout_s:
                raise failure_of(
                    error, f"log --follow (no CMS member streamed for {options.timeout_s:.0f} s)"
                ) from None
        client.rotate()
        await asyncio.sleep(FOLLOW_RETRY_S)


def _print_entry(options: Options, line: dict[str, Any]) -> None:
    """One entry as it comes: a JSON object per line, or the epoch and the transformation."""
    if options.output == "table":
        print(f"{line['epoch']:>6}  {line['text']}", flush=True)
    else:
        print(json.dumps(line), flush=True)


async def read_log(client: CMSClient, first: int, last: int | None) -> list[LogRecord]:
    """The entries from ``first`` to ``last`` (None: the newest), page by page."""
    records: list[LogRecord] = []
    since = first - 1
    while True:
        page = await client.fetch_log(since, max_entries=LOG_PAGE, entries_only=True)
        fresh = [r for r in page.records if r.epoch > since and (last is None or r.epoch <= last)]
        records.extend(fresh)
        if fresh:
            since = fresh[-1].epoch
        reached = last if last is not None else page.latest_epoch
        if not fresh or since >= reached or not page.has_more:
            return records


# ---------------------------------------------------------------------- metadata dump


@click.group()
def metadata() -> None:
    """The cluster metadata itself."""


@metadata.command("dump")
@click.option("--epoch", type=click.IntRange(min=0), default=None, help="default: the newest")
@global_options
def metadata_dump(epoch: int | None) -> int:
    """The metadata at an epoch, as JSON (epochal.v1.ClusterMetadata's JSON form)."""
    return run(lambda options: _dump(options, epoch))


async def _dump(options: Options, epoch: int | None) -> int:
    async with opened(options) as cluster:
        chosen = cluster.metadata
        if epoch is not None and epoch != chosen.epoch:
            if epoch > chosen.epoch:
                raise Refused(f"epoch {epoch} is not in the log yet (it ends at {chosen.epoch})")
            async with _cms_client(cluster, options) as client:
                try:
                    chosen = replay(await read_log(client, 1, epoch)) if epoch else chosen
                except EpochalError as error:
                    raise failure_of(error, "metadata dump") from None
            if epoch == 0:
                chosen = ClusterMetadata.empty()
            elif chosen.epoch != epoch:
                raise Refused(f"the CMS did not give the log up to epoch {epoch}")
    data = MessageToDict(metadata_to_proto(chosen), preserving_proto_field_name=True)
    data["epoch"] = chosen.epoch  # an int, where the proto's JSON form writes 64 bits as text
    if options.output == "yaml":
        emit("yaml", data, lambda: [])
    else:
        emit("json", data, lambda: [])
    return 0


def replay(records: list[LogRecord]) -> ClusterMetadata:
    """The metadata after ``records``, applied from epoch 0 in order."""
    metadata = ClusterMetadata.empty()
    for record in records:
        if record.epoch != metadata.epoch + 1:
            raise Refused(
                f"the log the CMS gave skips from epoch {metadata.epoch} to {record.epoch} (a "
                "member still filling in its log below a snapshot); try again"
            )
        if record.transformation is None:
            raise Refused(
                f"epoch {record.epoch} of the log cannot be applied by this CLI "
                f"({record.problem}): upgrade it"
            )
        metadata = record.transformation.execute(metadata)
    return metadata
