"""The metadata log: ``log`` (one line per epoch; ``--follow``: each new epoch as it is
committed) and ``metadata dump`` (the metadata at an epoch, as JSON).

Both read the CMS's own log, entries only (``FetchLog`` with ``entries_only``), page by page, and
check that the epochs follow one another: a member still filling in its log below a snapshot it
installed may lack entries, and the next member is asked instead. ``--follow`` watches one member
(``Watch``) and checks every few seconds that it is not behind the others: a member that stopped
(its stream silent, not closed) or closed its stream is left for the next, from the last epoch
printed; the follow gives up only when no member has answered for ``--timeout-s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import click
import yaml

from epochal import views
from epochal.cli.cms_commands import cms_client
from epochal.cli.failures import Refused
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit, table
from epochal.cli.runner import failure_of, opened, run
from epochal.cms_client import CMSClient
from epochal.errors import EpochalError
from epochal.tcm import ClusterMetadata
from epochal.wire.log import LogRecord
from epochal.wire.metadata import metadata_to_json

LOG_PAGE = 500
FOLLOW_CHECK_S = 2.0  # how often a follow compares its member with the others
FOLLOW_RETRY_S = 0.5  # before following from the next member


# ---------------------------------------------------------------------- log


@click.command()
@click.option("--from", "first", type=click.IntRange(min=1), default=None,
              help="first epoch (default: 1; with --follow, the next one)")  # fmt: skip
@click.option("--to", "last", type=click.IntRange(min=1), default=None, help="last epoch")
@click.option("--follow", "-f", is_flag=True, help="then every new epoch, until Ctrl-C")
@global_options
def log(first: int | None, last: int | None, follow: bool) -> int:
    """The metadata log, one line per epoch."""
    if last is not None and first is not None and last < first:
        raise click.UsageError(f"--to {last} is before --from {first}")
    if follow and last is not None:
        raise click.UsageError("--follow goes on past any --to: give one or the other")
    return run(lambda options: _log(options, first, last, follow))


async def _log(options: Options, first: int | None, last: int | None, follow: bool) -> int:
    async with opened(options) as cluster, cms_client(cluster, options) as client:
        if follow and first is None:  # as tail -f: from now on
            await follow_log(client, cluster.metadata.epoch, options)
            return 0
        try:
            records = await read_log(client, first or 1, last)
        except EpochalError as error:
            raise failure_of(error, "log") from None
        data = [views.log_line(r) for r in records]
        if not follow:
            rows = [[d["epoch"], d["text"]] for d in data]
            emit(options.output, data, lambda: [table(["> EPOCH", "TRANSFORMATION"], rows)])
            return 0
        for line in data:
            _print_entry(options, line)
        await follow_log(client, records[-1].epoch if records else (first or 1) - 1, options)
    return 0


async def follow_log(client: CMSClient, since: int, options: Options) -> None:
    """Print each entry after ``since`` as the CMS commits it, until interrupted (module
    docstring: a silent or closed member is left for the next one)."""
    printed = [since]
    failing_since: float | None = None  # the first of the failures in a row
    while True:
        stream = asyncio.ensure_future(_print_stream(client, printed, options))
        try:
            if await _until_stalled(client, stream, printed):
                failing_since = None  # the member was answering: it fell behind, or ended
        except EpochalError as error:
            now = time.monotonic()
            failing_since = failing_since or now
            if now - failing_since > options.timeout_s:
                raise failure_of(
                    error, f"log --follow: no CMS member answered for {options.timeout_s:.0f} s"
                ) from None
        finally:
            stream.cancel()
            with contextlib.suppress(asyncio.CancelledError, EpochalError):
                await stream
        client.rotate()
        await asyncio.sleep(FOLLOW_RETRY_S)


async def _print_stream(client: CMSClient, printed: list[int], options: Options) -> None:
    """Print what one member's Watch brings after ``printed[0]``, in epoch order."""
    async for page in client.watch(printed[0]):
        fresh = [r for r in page.records if r.epoch > printed[0]]
        if fresh and fresh[0].epoch > printed[0] + 1:  # a snapshot stood for the gap
            fresh = await read_log(client, printed[0] + 1, fresh[0].epoch - 1) + fresh
        for record in fresh:
            _print_entry(options, views.log_line(record))
            printed[0] = record.epoch


async def _until_stalled(
    client: CMSClient, stream: asyncio.Future[None], printed: list[int]
) -> bool:
    """Until ``stream`` ends (True; its failure raised) or stalls — the members are two checks
    ahead of what it printed (True); a Describe nobody answers raises."""
    behind = 0
    while True:
        done, _ = await asyncio.wait({stream}, timeout=FOLLOW_CHECK_S)
        if done:
            stream.result()
            return True
        newest = (await client.describe()).epoch
        behind = behind + 1 if newest > printed[0] else 0
        if behind >= 2:
            return True


def _print_entry(options: Options, line: dict[str, Any]) -> None:
    """One entry as it comes: the epoch and the transformation, a JSON object per line, or a
    YAML document."""
    if options.output == "table":
        print(f"{line['epoch']:>6}  {line['text']}", flush=True)
    elif options.output == "yaml":
        print("---\n" + yaml.safe_dump(line, sort_keys=False).rstrip("\n"), flush=True)
    else:
        print(json.dumps(line), flush=True)


async def read_log(client: CMSClient, first: int, last: int | None) -> list[LogRecord]:
    """The entries from ``first`` to ``last`` (None: the newest), page by page, each epoch the
    one after the last: a member whose entries skip some (still filling in below a snapshot) is
    left for the next; Refused when every member skips."""
    records: list[LogRecord] = []
    since = first - 1
    gaps = 0
    while True:
        page = await client.fetch_log(since, max_entries=LOG_PAGE, entries_only=True)
        fresh = [r for r in page.records if r.epoch > since and (last is None or r.epoch <= last)]
        if fresh and fresh[0].epoch != since + 1:
            gaps += 1
            if gaps > len(client.addresses):
                raise Refused(
                    f"no CMS member gave the log from epoch {since + 1} (they skip to "
                    f"{fresh[0].epoch}: still filling in below a snapshot); try again"
                )
            client.rotate()
            continue
        contiguous = [r for i, r in enumerate(fresh) if r.epoch == since + 1 + i]
        records.extend(contiguous)
        if contiguous:
            since = contiguous[-1].epoch
        reached = last if last is not None else page.latest_epoch
        if (
            not contiguous
            or since >= reached
            or (not page.has_more and len(contiguous) == len(fresh))
        ):
            return records


# ---------------------------------------------------------------------- metadata dump


@click.group()
@global_options
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
        if epoch == 0:
            chosen = ClusterMetadata.empty()
        elif epoch is not None and epoch != chosen.epoch:
            if epoch > chosen.epoch:
                raise Refused(f"epoch {epoch} is not in the log yet (it ends at {chosen.epoch})")
            async with cms_client(cluster, options) as client:
                try:
                    chosen = replay(await read_log(client, 1, epoch))
                except EpochalError as error:
                    raise failure_of(error, "metadata dump") from None
            if chosen.epoch != epoch:
                raise Refused(f"the CMS did not give the log up to epoch {epoch}")
    emit("yaml" if options.output == "yaml" else "json", metadata_to_json(chosen), lambda: [])
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
