"""Pages of the metadata log (FetchLog answers, Watch events) <-> domain values, for nodes that
follow the log and serve it to their peers, and ``LogClient``: the follower's way to fetch and
watch the log of a CMS member or a replica, with failures as ``LogSourceFailed``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass

import grpc

from epochal.tcm import ClusterMetadata, Transformation
from epochal.wire.channels import Channels
from epochal.wire.fields import MalformedInput
from epochal.wire.metadata import metadata_from_proto, transformation_from_proto
from epochal.wire.v1 import cms_pb2, metadata_pb2


@dataclass(frozen=True, slots=True)
class LogRecord:
    epoch: int
    entry_id: str
    encoded: bytes  # the Transformation message, as stored and served again
    # None when this software cannot decode it (a kind it does not know): ``problem`` says why.
    transformation: Transformation | None
    problem: str = ""
    slot: int = 0  # the Paxos slot a CMS member chose it in (a replica's copy does not say)


@dataclass(frozen=True, slots=True)
class LogPage:
    snapshot: ClusterMetadata | None
    snapshot_encoded: bytes
    records: list[LogRecord]
    latest_epoch: int
    has_more: bool


def page_from_proto(
    snapshot: cms_pb2.Snapshot | None,
    entries: Iterable[cms_pb2.LogEntry],
    latest_epoch: int,
    has_more: bool,
) -> LogPage:
    """Decode a page; a snapshot that does not decode raises ``MalformedInput``, an entry that
    does not decode becomes a record with a ``problem`` (the follower stops there)."""
    metadata = None
    encoded = b""
    if snapshot is not None:
        metadata = metadata_from_proto(snapshot.metadata)
        encoded = snapshot.metadata.SerializeToString(deterministic=True)
    records = []
    for entry in entries:
        raw = entry.transformation.SerializeToString(deterministic=True)
        try:
            records.append(
                LogRecord(
                    entry.epoch,
                    entry.entry_id,
                    raw,
                    transformation_from_proto(entry.transformation),
                    slot=entry.slot,
                )
            )
        except MalformedInput as error:
            records.append(
                LogRecord(entry.epoch, entry.entry_id, raw, None, str(error), slot=entry.slot)
            )
    return LogPage(metadata, encoded, records, latest_epoch, has_more)


def fetch_response(message: cms_pb2.FetchLogResponse) -> LogPage:
    snapshot = message.snapshot if message.HasField("snapshot") else None
    return page_from_proto(snapshot, message.entries, message.latest_epoch, message.has_more)


def watch_event(message: cms_pb2.WatchEvent) -> LogPage:
    snapshot = message.snapshot if message.HasField("snapshot") else None
    return page_from_proto(snapshot, message.entries, message.latest_epoch, False)


def fetch_request(since_epoch: int, max_entries: int = 0) -> cms_pb2.FetchLogRequest:
    return cms_pb2.FetchLogRequest(since_epoch=since_epoch, max_entries=max_entries)


def watch_request(since_epoch: int) -> cms_pb2.WatchRequest:
    return cms_pb2.WatchRequest(since_epoch=since_epoch)


def fetch_response_to_proto(
    *,
    snapshot_encoded: bytes | None,
    entries: Sequence[tuple[int, str, bytes]],
    latest_epoch: int,
    has_more: bool,
) -> cms_pb2.FetchLogResponse:
    """A FetchLog answer from stored (epoch, entry id, encoded transformation) rows."""
    response = cms_pb2.FetchLogResponse(latest_epoch=latest_epoch, has_more=has_more)
    if snapshot_encoded is not None:
        response.snapshot.metadata.CopyFrom(
            metadata_pb2.ClusterMetadata.FromString(snapshot_encoded)
        )
    add = response.entries.add
    for epoch, entry_id, encoded in entries:
        add(
            epoch=epoch,
            entry_id=entry_id,
            transformation=metadata_pb2.Transformation.FromString(encoded),
        )
    return response


class LogSourceFailed(Exception):
    """A fetch or watch of the log failed: ``code`` is the gRPC status name, or ``MALFORMED``
    when the answer did not decode."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class LogClient:
    """Fetches and watches the metadata log over the channels a node keeps: a CMS member's
    (``CMS``), or a peer replica's copy (``Replica.FetchLog``; the log is immutable, so any copy
    of a prefix is the same prefix)."""

    def __init__(self, channels: Channels) -> None:
        self._channels = channels

    async def fetch(
        self, address: str, *, from_cms: bool, since_epoch: int, timeout_s: float
    ) -> LogPage:
        stub = self._channels.cms(address) if from_cms else self._channels.replica(address)
        try:
            response = await stub.FetchLog(fetch_request(since_epoch), timeout=timeout_s)
            return fetch_response(response)
        except grpc.aio.AioRpcError as error:
            raise LogSourceFailed(error.code().name, error.details() or "") from None
        except MalformedInput as error:
            raise LogSourceFailed("MALFORMED", str(error)) from None

    async def watch(self, address: str, since_epoch: int) -> AsyncIterator[LogPage]:
        """The pages a CMS member pushes, from ``since_epoch`` on, until the stream ends (by
        ``LogSourceFailed``); closing the iterator cancels the call."""
        call = self._channels.cms(address).Watch(watch_request(since_epoch))
        try:
            async for event in call:
                yield watch_event(event)
        except grpc.aio.AioRpcError as error:
            raise LogSourceFailed(error.code().name, error.details() or "") from None
        except MalformedInput as error:
            raise LogSourceFailed("MALFORMED", str(error)) from None
        finally:
            call.cancel()
