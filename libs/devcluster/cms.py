"""A CMS of real member processes on 127.0.0.1, for ``make run``, tests and benchmarks.

Each member is ``python -m epochal.cms``, an ``epochal.runtime.processes.LocalProcess``: its own
session and log file, gone when the program that started it dies; ``stop`` sends SIGTERM
(graceful) to the members at once and SIGKILL to any still running after the timeout, ``kill``
SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from epochal.cms_client import CMSClient, CMSView
from epochal.devcluster.pki import TLS_DIR, TLS_ENV, DevPki, process_pki, security_flags
from epochal.errors import EpochalError
from epochal.runtime.processes import (
    STOP_TIMEOUT_S,
    LocalProcess,
    free_address,
    free_ports,
    stop_all,
)
from epochal.wire.roles import CMS
from epochal.wire.tls import INSECURE, Security


@dataclass
class LocalMember(LocalProcess):
    @property
    def member_id(self) -> str:
        return self.name


@dataclass
class LocalCMS:
    data_dir: Path
    size: int = 3
    db_urls: Mapping[str, str] = field(default_factory=dict)  # member id -> URL (default SQLite)
    db_schemas: Mapping[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # How many of the members are initial voters (named by --members); the others join the
    # running CMS as candidates. 0: all of them.
    initial: int = 0
    # Each member serves Prometheus metrics (--metrics-listen) on a port of its own.
    metrics: bool = False
    members: dict[str, LocalMember] = field(default_factory=dict)
    # Mutual TLS with certificates of this PKI (default: the process's, epochal.devcluster.pki),
    # or plain text when ``insecure``.
    pki: DevPki | None = None
    insecure: bool = False

    def __post_init__(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.pki is None and not self.insecure:
            self.pki = process_pki(self.data_dir / TLS_DIR)
        if self.insecure:
            # not the TLS files this process's environment may name: plain text, as asked
            self.env = {**dict.fromkeys(TLS_ENV, ""), **self.env}
        ports = free_ports(self.size * (2 if self.metrics else 1))
        for index, port in enumerate(ports[: self.size], start=1):
            member_id = f"cms{index}"
            self.members[member_id] = LocalMember(
                member_id, f"127.0.0.1:{port}", self.data_dir / f"{member_id}.log"
            )
            if self.metrics:
                metrics_port = ports[self.size + index - 1]
                self.members[member_id].metrics_address = f"127.0.0.1:{metrics_port}"

    @property
    def client_security(self) -> Security:
        """How this process calls the members: the admin certificate, or plain text."""
        return self.pki.admin() if self.pki is not None else INSECURE

    def add_member(self, taken: Collection[str] = ()) -> LocalMember:
        """A member (not started) that is not an initial voter: it joins the running CMS as a
        candidate. ``taken``: addresses other processes hold."""
        if not self.initial:
            self.initial = len(self.members)  # the members so far stay the initial voters
        held = {*taken, *self.addresses, *self.metrics_addresses}
        address = free_address(held)
        member_id = f"cms{len(self.members) + 1}"
        member = LocalMember(member_id, address, self.data_dir / f"{member_id}.log")
        if self.metrics:
            member.metrics_address = free_address({*held, address})
        self.members[member_id] = member
        return member

    def candidates(self) -> list[str]:
        """The members that are not initial voters."""
        return list(self.members)[self.initial :] if self.initial else []

    @property
    def addresses(self) -> list[str]:
        return [m.address for m in self.members.values()]

    @property
    def metrics_addresses(self) -> list[str]:
        return [m.metrics_address for m in self.members.values() if m.metrics_address]

    @property
    def members_flag(self) -> str:
        voters = list(self.members.values())[: self.initial or None]
        return ",".join(f"{m.member_id}={m.address}" for m in voters)

    def command(self, member_id: str) -> list[str]:
        args = [
            sys.executable,
            "-m",
            "epochal.cms",
            "--member-id",
            member_id,
            "--members",
            self.members_flag,
            "--listen",
            self.members[member_id].address,
            "--data-dir",
            str(self.data_dir),
            *security_flags(self.pki, member_id, CMS),
            *self.extra_args,
        ]
        if self.members[member_id].metrics_address:
            args += ["--metrics-listen", self.members[member_id].metrics_address]
        if member_id in self.db_urls:
            args += ["--db", self.db_urls[member_id]]
        if member_id in self.db_schemas:
            args += ["--db-schema", self.db_schemas[member_id]]
        return args

    def start(self, member_id: str | None = None) -> None:
        for member in self._select(member_id):
            member.start(self.command(member.member_id), self.env)

    def stop(self, member_id: str | None = None, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to each selected member at once, then SIGKILL to those that did not exit
        in time."""
        stop_all(self._select(member_id), timeout_s)

    def kill(self, member_id: str) -> None:
        self.members[member_id].kill()

    def close(self) -> None:
        for member in self.members.values():
            member.kill()

    def _select(self, member_id: str | None) -> list[LocalMember]:
        return list(self.members.values()) if member_id is None else [self.members[member_id]]

    async def wait_serving(self, member_id: str | None = None, timeout_s: float = 60.0) -> None:
        """Until each selected member's health check answers SERVING."""
        deadline = time.monotonic() + timeout_s
        for member in self._select(member_id):
            await member.wait_serving(deadline, self.client_security)

    async def describe(self, member_id: str, timeout_s: float = 2.0) -> CMSView:
        """What the member says of the CMS (raises ``EpochalError`` when it does not answer)."""
        address = self.members[member_id].address
        security = self.client_security
        async with CMSClient([address], attempt_timeout_s=timeout_s, security=security) as member:
            return await member.describe()

    async def leader(self, timeout_s: float = 30.0) -> str:
        """The member every running member agrees leads."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leaders = set()
            for member in self.members.values():
                if member.running:
                    with contextlib.suppress(EpochalError):
                        leaders.add((await self.describe(member.member_id)).leader_id)
            if len(leaders) == 1 and "" not in leaders:
                return leaders.pop()
            await asyncio.sleep(0.1)
        raise TimeoutError(f"no agreed leader after {timeout_s} s")
