"""How a CMS member that fell behind catches up over FetchLog: a state transfer copies a peer's
snapshot and log tail and hands it to the core to install (as does a member that starts far
behind: ``learn_target_epoch``); the backfill then fills this
member's log below an installed snapshot, so that it can serve any suffix of the log. A joiner
registers as a candidate (``register_as_candidate``)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

import grpc

from epochal.cms.shell_support import EXIT_CANNOT_JOIN
from epochal.cms_client import CMSClient
from epochal.cmscore.replay import next_state
from epochal.cmscore.rows import EntryIdRow, LogEntryRow, SnapshotRow
from epochal.cmscore.state_machine import digest_of
from epochal.errors import EpochalError, Rejected
from epochal.runtime.service import fatal
from epochal.wire.multiplex import describe

if TYPE_CHECKING:
    from epochal.cms.member import CMSMemberLoop

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 30.0  # a page of a peer's log, when catching up or filling the log in
BACKFILL_RETRY_S = 1.0  # no peer could help: ask again after this long


async def copy_state(member: CMSMemberLoop, peer: str) -> None:
    """Copy ``peer``'s log (a snapshot and the tail when far behind) and install it; raises
    when the copy fails (the caller logs it; a later catch-up asks again)."""
    core = member.core
    since = core.epoch
    metadata = core.sm.metadata
    snapshot_row: SnapshotRow | None = None
    ids: list[tuple[str, int, int]] = core.sm.entry_ids()
    rows: list[LogEntryRow] = []
    while True:
        page = await member.peers.fetch_log(
            peer, since, include_entry_ids=True, timeout_s=FETCH_TIMEOUT_S
        )
        if page.snapshot is not None:
            metadata, snapshot_row = page.snapshot.metadata, page.snapshot.row
            ids = list(page.snapshot.entry_ids)
            rows = []
        for row in page.entries:
            metadata = next_state(metadata, row)  # raises: the transfer fails, logged
            rows.append(row)
            ids.append((row.entry_id, row.epoch, digest_of(row.transformation)))
        since = metadata.epoch
        if not page.has_more:
            applied_slot = page.applied_slot
            break
    if applied_slot <= core.sm.applied_slot:
        return
    log.info(
        "member %s installs state from %s: epoch %d, slot %d%s",
        member.member_id,
        peer,
        metadata.epoch,
        applied_slot,
        f" (snapshot at epoch {snapshot_row.epoch})" if snapshot_row else "",
    )
    # Switch the in-memory state, the core and storage in one loop step; what was applied
    # before goes to storage first, so the install comes after it.
    member._flush_applied()
    snapshot_epoch = snapshot_row.epoch if snapshot_row is not None else None
    if not core.install(metadata, applied_slot, ids, snapshot_epoch):
        return
    try:
        member.storage.install(
            snapshot=snapshot_row,
            entries=rows,
            entry_ids=[EntryIdRow(i, e, d) for i, e, d in core.sm.entry_ids()],
            applied_slot=applied_slot,
        )
    except Exception as error:
        fatal(f"installing the state copied from {peer} failed: {error!r}")
    core.node.durable(applied_slot)  # a synchronous write
    member.log.reset("member state replaced by a state transfer; resume")
    member._process()
    if snapshot_row is not None:
        member.log_complete = False
        member._spawn(member._backfill())


async def backfill(member: CMSMemberLoop) -> None:
    while not member._stopped:
        prefix = await member._read(member.storage.contiguous_prefix)
        if prefix >= member.core.log_whole_up_to():
            member.log_complete = True
            log.info("member %s holds the whole log up to epoch %d", member.member_id, prefix)
            return
        target = member.core.snapshot_epochs[-1]
        if not await _backfill_page(member, prefix, target):
            await asyncio.sleep(BACKFILL_RETRY_S)


async def _backfill_page(member: CMSMemberLoop, prefix: int, target: int) -> bool:
    for peer in member.peers.peers():
        try:
            page = await member.peers.fetch_log(
                peer, prefix, entries_only=True, timeout_s=FETCH_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            log.info("backfill from %s failed: %s", peer, error.code().name)
            continue
        rows = [row for row in page.entries if prefix < row.epoch <= target]
        if not rows or rows[0].epoch != prefix + 1:
            continue  # this peer lacks the entries too
        member.storage.insert_entries(rows)
        return True
    return False


async def learn_target_epoch(member: CMSMemberLoop) -> None:
    """Readiness: SERVING once caught up to the newest epoch a peer reported at start; a member
    more than a snapshot's worth behind copies a peer's state first."""
    peers = member.peers.peers()
    answers = await asyncio.gather(
        *(member.peers.epoch_of(peer, timeout_s=1.0) for peer in peers),
        return_exceptions=True,
    )
    epochs = []
    for peer, answer in zip(peers, answers, strict=True):
        if isinstance(answer, BaseException):
            log.info("could not ask %s for its epoch at start: %s", peer, describe(answer))
        else:
            epochs.append((answer, peer))
    far_behind_of = member.core.learned_target(epochs)
    member._perform()
    if far_behind_of is not None:
        member._transferring = True
        await member.state_transfer(far_behind_of)


async def register_as_candidate(member: CMSMemberLoop) -> None:
    """A joiner asks the running CMS (--members) to add it as a candidate, until it is."""
    backoff_s = 0.1
    while not member._stopped and (candidacy := member.core.candidacy()) is not None:
        transformation, entry_id = candidacy
        try:
            async with CMSClient(list(member.settings.members.values())) as client:
                committed = await client.commit(transformation, entry_id=entry_id)
            log.info(
                "member %s registered as a CMS candidate at epoch %d",
                member.member_id,
                committed.epoch,
            )
            return
        except Rejected as error:
            if error.rule == "cms_member_exists":
                return
            # A misconfiguration (an address another member has, too many members): a member
            # that can never join must not look healthy.
            log.critical(
                "member %s cannot join the CMS as a candidate: %s; exiting",
                member.member_id,
                error,
            )
            logging.shutdown()
            os._exit(EXIT_CANNOT_JOIN)
        except EpochalError as error:
            log.warning("member %s: registering as a candidate: %s", member.member_id, error)
        await asyncio.sleep(backoff_s)
        backoff_s = min(backoff_s * 2, 2.0)
