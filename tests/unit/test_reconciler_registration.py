"""The reconciler's registration (epochal.reconciler.registration) against a CMS stand-in that
applies commits to the metadata the follower stand-in holds: a start registers once and a
restart that finds itself registered commits nothing; a CMS that fails is retried with backoff
under one entry id, each failure logged once; a clean stop deregisters only its own entry."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from epochal.cms_client import Committed
from epochal.errors import InvalidRequest, Unavailable
from epochal.reconciler import registration
from epochal.reconciler.metrics import ReconcilerMetrics
from epochal.reconciler.registration import Registration
from epochal.tcm import (
    ClusterMetadata,
    CMSMember,
    InitializeCMS,
    RegisterReconciler,
    Transformation,
    apply_transformation,
)

ADDRESS = "10.0.0.1:9101"


class Follower:
    def __init__(self, metadata: ClusterMetadata) -> None:
        self.metadata = metadata

    async def catch_up(self, epoch: int, timeout_s: float) -> bool:
        return self.metadata.epoch >= epoch


class CMS:
    """Applies each commit to the follower's metadata, after ``failures`` failed attempts."""

    def __init__(self, follower: Follower, failures: int = 0) -> None:
        self.follower = follower
        self.failures = failures
        self.commits: list[tuple[Transformation, str]] = []

    async def commit(self, transformation: Transformation, entry_id: str) -> Committed:
        self.commits.append((transformation, entry_id))
        if self.failures:
            self.failures -= 1
            raise Unavailable("no CMS member answered")
        self.follower.metadata = apply_transformation(self.follower.metadata, transformation)
        return Committed(self.follower.metadata.epoch, duplicate=False, attempts=1)


def setup(*registered: tuple[str, str], failures: int = 0) -> tuple[Registration, CMS]:
    metadata = apply_transformation(
        ClusterMetadata.empty(), InitializeCMS(members=(CMSMember("cms-1", "127.0.0.1:1"),))
    )
    for reconciler_id, address in registered:
        metadata = apply_transformation(
            metadata, RegisterReconciler(reconciler_id=reconciler_id, address=address)
        )
    follower = Follower(metadata)
    cms = CMS(follower, failures)
    made = Registration("r1", ADDRESS, follower, cms, ReconcilerMetrics())  # type: ignore[arg-type]
    return made, cms


def sent(cms: CMS) -> list[str]:
    return [t.address for t, _ in cms.commits]  # type: ignore[attr-defined]


def test_a_start_registers_and_a_restart_that_finds_itself_commits_nothing() -> None:
    made, cms = setup(("r2", "10.0.0.2:9101"))
    asyncio.run(made.register())
    assert sent(cms) == [ADDRESS]
    assert made.registered
    assert dict(made.follower.metadata.reconcilers) == {"r1": ADDRESS, "r2": "10.0.0.2:9101"}

    restarted, cms = setup(("r1", ADDRESS))
    asyncio.run(restarted.register())
    assert cms.commits == []
    assert restarted.registered


def test_a_restart_at_a_new_address_moves_the_entry() -> None:
    made, cms = setup(("r1", "10.0.0.9:9101"))
    asyncio.run(made.register())
    assert sent(cms) == [ADDRESS]
    assert dict(made.follower.metadata.reconcilers) == {"r1": ADDRESS}


def test_a_failing_cms_is_retried_with_backoff_under_one_entry_id(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(registration.asyncio, "sleep", no_wait)
    monkeypatch.setattr(registration, "MAX_BACKOFF_S", 1.5)
    made, cms = setup(failures=3)
    with caplog.at_level(logging.WARNING, logger=registration.__name__):
        asyncio.run(made.register())
    assert made.registered
    assert len(cms.commits) == 4
    assert len({entry_id for _, entry_id in cms.commits}) == 1
    assert waits == [registration.FIRST_BACKOFF_S, 1.0, 1.5]
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 3
    assert "trying again in 0.5 s" in failures[0]


def test_a_clean_stop_deregisters_its_own_entry_only() -> None:
    made, cms = setup(("r2", "10.0.0.2:9101"))
    asyncio.run(made.register())
    asyncio.run(made.deregister())
    assert sent(cms) == [ADDRESS, ""]
    assert dict(made.follower.metadata.reconcilers) == {"r2": "10.0.0.2:9101"}

    never, cms = setup()
    asyncio.run(never.deregister())  # never registered: nothing to commit
    assert cms.commits == []

    taken, cms = setup(("r1", "10.0.0.7:9101"))  # another process under this id registered since
    asyncio.run(taken.deregister())
    assert cms.commits == []


def test_a_deregistration_that_fails_or_finds_nothing_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=registration.__name__)
    made, cms = setup(("r1", ADDRESS), failures=1)
    asyncio.run(made.deregister())
    assert "it stays registered" in caplog.text
    assert made.registered

    sent_only, cms = setup()
    sent_only.sent = True  # a registration was sent, and may not be committed
    asyncio.run(sent_only.deregister())
    assert sent(cms) == [""]  # refused: not registered
    assert "r1 was not registered: nothing to deregister" in caplog.text


def test_only_expected_errors_are_retried() -> None:
    made, cms = setup()

    async def broken(transformation: Any, entry_id: str) -> Committed:
        raise RuntimeError("a bug")

    cms.commit = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        asyncio.run(made.register())


def test_an_address_the_cms_refuses_as_malformed_is_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made, cms = setup()

    async def refused(transformation: Any, entry_id: str) -> Committed:
        cms.commits.append((transformation, entry_id))
        raise InvalidRequest("bad reconciler address: expected one host:port")

    cms.commit = refused  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger=registration.__name__):
        asyncio.run(made.register())
    assert len(cms.commits) == 1 and not made.registered
    assert any("set --advertise" in r.getMessage() for r in caplog.records)
