"""The metadata a client follows (epochal.metadata_view): pages of the log apply strictly in
epoch order, a newer snapshot replaces the view, an entry the SDK cannot decode stops it; seeds
are asked in turn, and an answer with a newer epoch brings the view forward from its node."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from epochal.errors import EpochalError, Rejected, Unavailable
from epochal.metadata_view import MetadataView, apply_page
from epochal.status import error_for
from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    CreateKeyspace,
    InitializeCMS,
    ReplicationParams,
    Transformation,
    apply_transformation,
)
from epochal.wire.log import LogPage, LogRecord

LOG: list[Transformation] = [
    InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),)),
    *(CreateKeyspace(name=f"ks{i}", replication=ReplicationParams.simple(1)) for i in range(5)),
]


def at(epoch: int) -> ClusterMetadata:
    metadata = ClusterMetadata.empty()
    for transformation in LOG[:epoch]:
        metadata = apply_transformation(metadata, transformation)
    return metadata


def record(epoch: int) -> LogRecord:
    return LogRecord(epoch, f"entry-{epoch}", b"", LOG[epoch - 1])


def page(
    *epochs: int, snapshot: int | None = None, latest: int = len(LOG), more: bool = False
) -> LogPage:
    return LogPage(
        at(snapshot) if snapshot is not None else None,
        b"",
        [record(e) for e in epochs],
        latest,
        more,
    )


def test_entries_apply_in_epoch_order_skipping_what_is_applied_or_past_a_gap() -> None:
    assert apply_page(at(2), page(1, 2, 3, 4)) == at(4)
    assert apply_page(at(2), page(4, 5)) == at(2)  # 3 is missing: nothing after it applies
    assert apply_page(at(2), page(3, 5)) == at(3)


def test_a_newer_snapshot_replaces_the_view_and_an_older_one_is_ignored() -> None:
    assert apply_page(at(1), page(4, 5, snapshot=3)) == at(5)
    assert apply_page(at(4), page(5, snapshot=2)) == at(5)


def test_an_entry_this_sdk_cannot_decode_stops_the_view() -> None:
    unknown = LogPage(None, b"", [LogRecord(1, "e", b"?", None, "unknown kind 99")], 1, False)
    with pytest.raises(EpochalError, match=r"epoch 1: unknown kind 99.*upgrade the SDK"):
        apply_page(at(0), unknown)


class Replicas:
    """A fetch over pretend replicas: each answers the log after an epoch, a page of at most
    two entries at a time, or fails with a status."""

    def __init__(self, latest: int, failing: dict[str, grpc.StatusCode] | None = None) -> None:
        self.latest = latest
        self.failing = failing or {}
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, address: str, since: int) -> LogPage:
        self.asked.append((address, since))
        if address in self.failing:
            raise error_for(self.failing[address], f"{address} says no")
        epochs = range(since + 1, min(since + 2, self.latest) + 1)
        return page(*epochs, latest=self.latest, more=since + 2 < self.latest)


def test_connect_asks_the_seeds_in_turn_and_follows_the_pages() -> None:
    replicas = Replicas(5, {"a": grpc.StatusCode.UNAVAILABLE})
    view = MetadataView(["a", "b"], replicas)
    asyncio.run(view.connect())
    assert view.metadata == at(5) and view.seen_epoch == 5
    assert replicas.asked == [("a", 0), ("b", 0), ("b", 2), ("b", 4)]


def test_the_only_seeds_refusal_is_raised_as_it_is() -> None:
    view = MetadataView(["a"], Replicas(5, {"a": grpc.StatusCode.FAILED_PRECONDITION}))
    with pytest.raises(Rejected, match="a says no"):
        asyncio.run(view.connect())


def test_when_no_seed_answers_the_error_names_each() -> None:
    failing = {"a": grpc.StatusCode.UNAVAILABLE, "b": grpc.StatusCode.FAILED_PRECONDITION}
    view = MetadataView(["a", "b"], Replicas(5, failing))
    with pytest.raises(Unavailable, match="no seed answered: a: UNAVAILABLE a says no; b: "):
        asyncio.run(view.connect())


def test_an_answer_with_a_newer_epoch_brings_the_view_forward_from_its_node() -> None:
    async def scenario() -> tuple[ClusterMetadata, list[tuple[str, int]]]:
        replicas = Replicas(2)
        view = MetadataView(["a"], replicas)
        await view.connect()
        replicas.latest = 5
        view.observe(5, "b")
        assert view.seen_epoch == 5  # carried by the next requests at once
        while view.metadata.epoch < 5:
            await asyncio.sleep(0)
        view.observe(5, "c")  # not newer than the view now: nothing to fetch
        await asyncio.sleep(0)
        return view.metadata, replicas.asked

    metadata, asked = asyncio.run(scenario())
    assert metadata == at(5)
    assert asked == [("a", 0), ("b", 2), ("b", 4)]


def test_refresh_waits_for_the_epoch_and_gives_up_naming_it() -> None:
    async def scenario() -> None:
        replicas = Replicas(3)
        view = MetadataView(["a"], replicas)
        await view.refresh(3)
        assert view.metadata == at(3)
        replicas.failing["a"] = grpc.StatusCode.UNAVAILABLE  # worth asking again, in vain
        with pytest.raises(Unavailable, match=r"no replica reached epoch 4 \(client at 3\)"):
            await view.refresh(4)
        replicas.failing["a"] = grpc.StatusCode.PERMISSION_DENIED  # not worth asking again
        asked = len(replicas.asked)
        with pytest.raises(EpochalError, match="a says no"):
            await view.refresh(4)
        assert len(replicas.asked) == asked + 1

    asyncio.run(scenario())


def test_a_table_missing_from_the_view_is_looked_for_again_before_it_is_refused() -> None:
    """The replica the view came from may not have applied a new DDL yet: the lookup fetches
    from the replicas once more, then refuses naming the epoch it reached."""

    async def scenario() -> tuple[str, list[tuple[str, int]], int]:
        replicas = Replicas(2)
        view = MetadataView(["a"], replicas)
        await view.connect()
        replicas.latest = 5  # the CMS moved on (ks1..ks4 created)
        with pytest.raises(EpochalError) as refused:
            await view.table_or_refresh("ks3", "events")
        return str(refused.value), replicas.asked, view.metadata.epoch

    message, asked, epoch = asyncio.run(scenario())
    assert epoch == 5 and asked[1:] == [("a", 2), ("a", 4)]  # looked again, to the newest
    assert "table ks3.events is not in the client's metadata (epoch 5)" in message
