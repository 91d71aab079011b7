"""CMS member settings: every one a flag and an environment variable, checked when built."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from epochal.cmscore import MemberConfig
from epochal.runtime.flags import SECURITY_FLAGS, check_numbers, values_from
from epochal.runtime.flags import build_parser as build_flag_parser

ENV_PREFIX = "EPOCHAL_CMS_"


def parse_members(text: str) -> dict[str, str]:
    """``m1=127.0.0.1:7001,m2=127.0.0.1:7002`` -> {member id: address}."""
    members: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        member_id, sep, address = part.partition("=")
        if not sep or not member_id or ":" not in address:
            raise ValueError(f"bad member {part!r}: expected id=host:port, e.g. m1=127.0.0.1:7001")
        if member_id in members:
            raise ValueError(f"member {member_id!r} listed twice")
        members[member_id] = address
    return members


# The member core's defaults (epochal.cmscore.MemberConfig): one place for them, so that the
# simulator runs a core configured as the server's.
_CORE = MemberConfig(member_id="", members={}, listen_address="")


@dataclass(frozen=True, slots=True, kw_only=True)
class CMSSettings:
    member_id: str
    # The initial voters: id -> host:port (InitializeCMS names them). A member not among them
    # joins a running CMS: it registers as a candidate through them and follows the log as a
    # learner until it is added (epochal.tcm.cms); it needs --listen.
    members: Mapping[str, str]
    listen: str = ""  # default: this member's address in `members`
    db: str = ""  # SQLAlchemy URL; default SQLite in data_dir
    db_schema: str = ""  # PostgreSQL schema; default cms_<member_id>
    data_dir: str = "var"
    snapshot_frequency: int = _CORE.snapshot_frequency
    heartbeat_interval_ms: int = _CORE.heartbeat_interval_ms
    election_timeout_ms: int = _CORE.election_timeout_ms
    retransmit_interval_ms: int = _CORE.retransmit_interval_ms
    # The leader lets the followers choose a slot and casts its own vote (an fsync) only for a
    # slot still not chosen after this long, then at once until they answer again (0: always).
    leader_vote_delay_ms: int = _CORE.leader_vote_delay_ms
    # ... except for a slot of at most this many transformations (a quiet log): the leader
    # votes at once and sends it to just enough followers for a quorum (epochal.paxos).
    leader_votes_small_slots_up_to: int = _CORE.leader_votes_small_slots_up_to
    max_batch_values: int = _CORE.max_batch_values
    max_batch_bytes: int = _CORE.max_batch_bytes
    # Group commit: while the log is busy (the last slot carried at least batch_linger_commits
    # commits), the leader waits up to batch_linger_ms for more before proposing the next slot.
    batch_linger_ms: float = _CORE.batch_linger_ms
    batch_linger_commits: int = _CORE.batch_linger_commits
    max_pending_commits: int = _CORE.max_pending_commits
    max_transformation_bytes: int = 1 << 20
    commit_timeout_ms: int = 10_000
    entry_id_retention_epochs: int = _CORE.entry_id_retention_epochs
    retain_slots: int = _CORE.retain_slots
    applied_flush_interval_ms: int = 20
    fetch_page_entries: int = 1_000
    watch_queue_events: int = 1_000
    shutdown_grace_s: float = 5.0
    # Tests only: the server answers (UNAVAILABLE, "starting") this long before the member
    # loads its state, so that the starting window can be observed.
    test_hold_start_ms: int = 0
    metrics_listen: str = ""  # host:port of the Prometheus endpoint (off when empty)
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    insecure: bool = False
    health_listen: str = ""
    trace_dir: str = ""
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if not self.member_id:
            raise ValueError("--member-id (EPOCHAL_CMS_MEMBER_ID) is required")
        if not self.members:
            raise ValueError("--members (EPOCHAL_CMS_MEMBERS) is required: id=host:port,...")
        if self.member_id not in self.members and not self.listen:
            raise ValueError(
                f"member {self.member_id!r} is not in --members {sorted(self.members)}: to join "
                "a running CMS it needs --listen host:port (its own address)"
            )
        check_numbers(self, _ZERO_MEANS_OFF)
        if self.heartbeat_interval_ms * 2 > self.election_timeout_ms:
            raise ValueError("--election-timeout-ms must be at least twice --heartbeat-interval-ms")

    @property
    def listen_address(self) -> str:
        return self.listen or self.members[self.member_id]

    @property
    def db_url(self) -> str:
        if self.db:
            return self.db
        path = Path(self.data_dir) / self.member_id / "cms.db"
        return f"sqlite:///{path}"

    @property
    def schema(self) -> str | None:
        if not self.db_url.startswith("postgresql"):
            return None
        return self.db_schema or f"cms_{self.member_id}".replace("-", "_")

    @property
    def joining(self) -> bool:
        """Not an initial voter: registers as a candidate through ``members``."""
        return self.member_id not in self.members

    @property
    def peers(self) -> dict[str, str]:
        return {m: a for m, a in self.members.items() if m != self.member_id}


_ZERO_MEANS_OFF = frozenset(
    {
        "batch_linger_ms",
        "leader_vote_delay_ms",
        "leader_votes_small_slots_up_to",
        "test_hold_start_ms",
    }
)

_FLAGS: dict[str, tuple[type, str]] = {
    "member_id": (str, "this member's id (not in --members: join a running CMS as a candidate)"),
    "members": (
        str,
        "initial voters: id=host:port,... (the same list on every initial member; a joining "
        "member lists members of the running CMS)",
    ),
    "listen": (
        str,
        "host:port to listen on and advertise (default: this member's address in --members)",
    ),
    "db": (str, "SQLAlchemy URL: sqlite:///path or postgresql+psycopg://user@host/db"),
    "db_schema": (str, "PostgreSQL schema for this member (default cms_<member-id>)"),
    "data_dir": (str, "where the default SQLite database lives"),
    "snapshot_frequency": (int, "commit a TriggerSnapshot every N epochs"),
    "heartbeat_interval_ms": (int, "leader heartbeat interval"),
    "election_timeout_ms": (int, "silence before a member runs for leader (plus jitter)"),
    "retransmit_interval_ms": (int, "resend unanswered Paxos messages after this long"),
    "leader_vote_delay_ms": (
        int,
        "the leader votes for its own slot (an fsync) only if the followers have not chosen it "
        "after this long, then at once until they answer again (0: always votes)",
    ),
    "leader_votes_small_slots_up_to": (
        int,
        "a slot of at most this many transformations (a quiet log): the leader votes at once "
        "and sends it to just enough followers for a quorum, the rest once chosen (0: off)",
    ),
    "max_batch_values": (int, "most transformations in one Paxos slot"),
    "max_batch_bytes": (int, "most bytes in one Paxos slot"),
    "batch_linger_ms": (
        float,
        "group commit: while the log is busy, wait up to this long for more commits before "
        "proposing the next slot (0: off)",
    ),
    "batch_linger_commits": (
        int,
        "the log counts as busy when the last slot carried at least this many commits",
    ),
    "max_pending_commits": (int, "commits queued at the leader before RESOURCE_EXHAUSTED"),
    "max_transformation_bytes": (int, "largest encoded transformation accepted"),
    "commit_timeout_ms": (int, "longest a commit waits inside the CMS"),
    "entry_id_retention_epochs": (int, "how many epochs an entry id is remembered"),
    "retain_slots": (int, "applied Paxos slots kept in memory for peers' catch-up"),
    "applied_flush_interval_ms": (int, "write the applied log to storage this often (lazily)"),
    "fetch_page_entries": (int, "log entries per FetchLog page"),
    "watch_queue_events": (int, "events buffered per Watch subscriber before it is dropped"),
    "shutdown_grace_s": (
        float,
        "on SIGTERM or Ctrl-C: seconds to settle commits, finish in-flight RPCs and exit",
    ),
    "test_hold_start_ms": (
        int,
        "tests only: answer UNAVAILABLE (starting) this long before loading the state",
    ),
    "metrics_listen": (str, "host:port for the Prometheus endpoint (off when empty)"),
    **SECURITY_FLAGS,
    "trace_dir": (str, "write OTLP-JSON span files here (also EPOCHAL_TRACE_DIR)"),
    "log_level": (str, "DEBUG, INFO, WARNING or ERROR"),
}


def build_parser() -> argparse.ArgumentParser:
    return build_flag_parser(
        prog="epochal-cms",
        description="A CMS member: multi-Paxos over gRPC keeping the cluster metadata log.",
        env_prefix=ENV_PREFIX,
        table=_FLAGS,
        settings_class=CMSSettings,
    )


def settings_from(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> CMSSettings:
    """Flags win over environment variables, which win over defaults."""
    environment = os.environ if env is None else env
    values = values_from(build_parser(), _FLAGS, ENV_PREFIX, argv, environment)
    members_text = values.pop("members", "")
    member_id = str(values.pop("member_id", ""))
    return CMSSettings(
        member_id=member_id,
        members=parse_members(str(members_text or "")),
        **values,  # type: ignore[arg-type]
    )
