"""The command line's failure paths that need no cluster, against stand-ins: a node named by an
address another kind of process holds, or one several nodes held; an operation whose driver
stops answering; a followed CMS member that falls silent; a log whose entries skip epochs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from epochal.admin import OperationStatus
from epochal.cli import log_commands
from epochal.cli.connect import Cluster
from epochal.cli.failures import Refused, Unreachable, WrongKind
from epochal.cli.operations import _watch
from epochal.errors import TimedOut
from epochal.tcm import ClusterMetadata, CMSMember, NodeInfo, NodeState, TriggerSnapshot
from epochal.tcm.schema import frozen_map
from epochal.wire.log import LogPage, LogRecord


def node(node_id: str, address: str, state: NodeState = NodeState.JOINED) -> NodeInfo:
    return NodeInfo(
        node_id=node_id,
        address=address,
        datacenter="dc1",
        rack="r1",
        state=state,
        version="1.0.0",
        registered_epoch=1,
    )


def cluster_of(*nodes: NodeInfo) -> Cluster:
    metadata = ClusterMetadata(
        epoch=9,
        nodes=frozen_map({n.node_id: n for n in nodes}),
        cms_members=(CMSMember("cms1", "127.0.0.1:7001"),),
        reconcilers=frozen_map({"rec1": "127.0.0.1:9101"}),
    )
    return Cluster(metadata=metadata)


def test_a_node_is_named_by_id_or_address_and_another_kind_of_process_is_refused() -> None:
    cluster = cluster_of(
        node("node-1", "127.0.0.1:9001"),
        node("node-2", "127.0.0.1:9002", NodeState.LEFT),
        node("node-3", "127.0.0.1:9002"),  # took node-2's address after it left
    )
    assert cluster.node("node-1").node_id == "node-1"
    assert cluster.node("127.0.0.1:9002").node_id == "node-3"  # the one that has not left
    assert cluster.node("node-2").node_id == "node-2"
    with pytest.raises(WrongKind, match=r"127.0.0.1:7001 is a CMS member \(cms1\), not a replica"):
        cluster.node("127.0.0.1:7001")
    with pytest.raises(WrongKind, match=r"rec1 is a reconciler \(rec1\), not a replica"):
        cluster.node("rec1")
    with pytest.raises(Refused, match="no replica 'node-9' in the metadata at epoch 9"):
        cluster.node("node-9")
    twice = cluster_of(node("node-1", "127.0.0.1:9001"), node("node-4", "127.0.0.1:9001"))
    with pytest.raises(Refused, match="names node-1, node-4: name one by id"):
        twice.node("127.0.0.1:9001")


class SilentDriver:
    """A replica whose Status never answers (stopped mid-operation)."""

    address = "127.0.0.1:9004"

    async def status(self, *, timeout_s: float) -> OperationStatus:
        raise TimedOut("deadline exceeded", status="DEADLINE_EXCEEDED")


def test_an_operation_whose_driver_stops_answering_ends_as_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("epochal.cli.operations.PROGRESS_INTERVAL_S", 0.01)

    async def scenario() -> None:
        never = asyncio.get_running_loop().create_future()
        with pytest.raises(Unreachable, match=r"127\.0\.0\.1:9004 has not answered for 0 s"):
            await _watch(SilentDriver(), never, lambda _: None, 0.05)  # type: ignore[arg-type]

    asyncio.run(scenario())


class Members:
    """A CMS client stand-in: Describe answers ``newest``; FetchLog answers ``pages`` in turn."""

    def __init__(self, newest: int = 0, pages: list[LogPage] | None = None) -> None:
        self.newest = newest
        self.pages = pages or []
        self.addresses = ["127.0.0.1:7001", "127.0.0.1:7002"]
        self.rotated = 0

    async def describe(self) -> Any:
        return type("View", (), {"epoch": self.newest})()

    async def fetch_log(self, since: int, **_: Any) -> LogPage:
        return self.pages.pop(0)

    def rotate(self) -> None:
        self.rotated += 1


def test_a_followed_member_that_falls_silent_is_left_once_the_others_are_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_commands, "FOLLOW_CHECK_S", 0.01)

    async def scenario() -> bool:
        silent = asyncio.get_running_loop().create_future()  # a stream that brings nothing
        members = Members(newest=12)
        return await log_commands._until_stalled(members, silent, [10])  # type: ignore[arg-type]

    assert asyncio.run(scenario()) is True


def record(epoch: int) -> LogRecord:
    return LogRecord(epoch, f"e{epoch}", b"", TriggerSnapshot())


def page(*epochs: int, latest: int) -> LogPage:
    return LogPage(None, b"", [record(e) for e in epochs], latest, has_more=False)


def test_a_log_that_skips_epochs_is_read_from_the_next_member_or_refused() -> None:
    members = Members(pages=[page(5, 6, latest=6), page(3, 4, 5, 6, latest=6)])
    records = asyncio.run(log_commands.read_log(members, 3, None))  # type: ignore[arg-type]
    assert [r.epoch for r in records] == [3, 4, 5, 6] and members.rotated == 1
    skipping = Members(pages=[page(5, latest=5)] * 3)
    with pytest.raises(Refused, match="no CMS member gave the log from epoch 3"):
        asyncio.run(log_commands.read_log(skipping, 3, None))  # type: ignore[arg-type]
