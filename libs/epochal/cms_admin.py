"""CMS reconfiguration for operators: add a voter (two steps, the log first), remove a voter.

``add_voter`` commits StartAddToCMS, waits until the new member has applied the log up to that
epoch (a new voter has the log before it votes), then commits FinishAddToCMS. A reconfiguration
interrupted between the two is metadata (the member stays JOINING): calling ``add_voter`` again
resumes it, and ``remove_voter`` cancels it. Entry ids are derived from the member and the step,
and the epoch the call started from, so a step retried inside one call commits at most once.

Both decide from a member's view, and a member can acknowledge a commit before it has applied it
(a follower answers a forwarded commit with the leader's answer). So each call takes
``since_epoch``, the epoch the caller's previous change returned, and waits for a view that has
applied it: otherwise a member removed a moment ago can still look like a voter, and an entry id
can repeat an earlier call's.
"""

from __future__ import annotations

import asyncio
import time

from epochal.cms_client import CMSClient, CMSView
from epochal.errors import EpochalError, Rejected, Unavailable
from epochal.tcm import FinishAddToCMS, RemoveFromCMS, StartAddToCMS


async def add_voter(
    client: CMSClient,
    member_id: str,
    member_address: str,
    *,
    since_epoch: int = 0,
    catch_up_timeout_s: float = 60.0,
) -> int:
    """Make ``member_id`` (a registered candidate) a voter; returns the epoch of the FINISH
    (or of a view at ``since_epoch`` or later that shows it already votes)."""
    described = await described_since(client, since_epoch)
    role = described.role_of(member_id)
    if role == "voter":
        return described.epoch
    if role == "joining":  # interrupted after its START, which this view has applied: resume
        start_epoch = described.epoch
    else:
        started = await client.commit(
            StartAddToCMS(member_id), entry_id=_entry(member_id, "start", described.epoch)
        )
        start_epoch = started.epoch
    await _wait_for_log(member_id, member_address, start_epoch, catch_up_timeout_s)
    finished = await client.commit(
        FinishAddToCMS(member_id), entry_id=_entry(member_id, "finish", start_epoch)
    )
    role = (await described_since(client, finished.epoch)).role_of(member_id)
    if role != "voter":  # never expected: say so rather than report a success
        raise Rejected(
            "cms_wrong_role", f"{member_id} is a {role or 'stranger'} after FinishAddToCMS"
        )
    return finished.epoch


async def _wait_for_log(member_id: str, address: str, epoch: int, timeout_s: float) -> None:
    """Until the member at ``address`` has applied the log up to ``epoch`` (one channel)."""
    deadline = time.monotonic() + timeout_s
    async with CMSClient([address], attempt_timeout_s=2.0) as member:
        while True:
            try:
                if (await member.describe()).epoch >= epoch:
                    return
            except EpochalError:
                pass  # not answering yet: keep waiting until the deadline
            if time.monotonic() > deadline:
                raise Unavailable(
                    f"{member_id} did not apply the log up to epoch {epoch} within "
                    f"{timeout_s} s; it stays JOINING: resume the addition (add_voter again; "
                    "`epochal cms reconfigure --resume`) or undo it (remove_voter; --cancel)"
                )
            await asyncio.sleep(0.05)


async def remove_voter(client: CMSClient, member_id: str, *, since_epoch: int = 0) -> int:
    """Take ``member_id`` out of the voters (or cancel its add); it stays a learner. Returns the
    epoch of the removal."""
    epoch = (await described_since(client, since_epoch)).epoch
    removed = await client.commit(
        RemoveFromCMS(member_id), entry_id=_entry(member_id, "remove", epoch)
    )
    return removed.epoch


async def described_since(client: CMSClient, epoch: int, timeout_s: float = 10.0) -> CMSView:
    """The view of a member that has applied ``epoch`` (members apply it within moments)."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = await client.describe()
        if described.epoch >= epoch:
            return described
        if time.monotonic() > deadline:
            raise Unavailable(
                f"no CMS member answered with epoch {epoch} applied within {timeout_s:.0f} s "
                f"(the newest said {described.epoch})"
            )
        await asyncio.sleep(0.05)


def _entry(member_id: str, step: str, epoch: int) -> str:
    return f"cms-reconfigure:{member_id}:{step}:{epoch}"
