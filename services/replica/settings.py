"""Replica settings: every one a flag and an environment variable, checked when built."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from epochal.runtime.flags import SECURITY_FLAGS, check_numbers, parse_addresses, values_from
from epochal.runtime.flags import build_parser as build_flag_parser
from epochal.runtime.follower import FollowerSettings
from epochal.tcm import Rejected
from epochal.tcm.allocation import DEFAULT_NUM_TOKENS, MAX_NUM_TOKENS
from epochal.tcm.barrier import DEFAULT_MINIMUM, FALLBACK_CHAIN, BarrierLevel
from epochal.tcm.registration import check_version
from epochal.tcm.tokens import check_token

ENV_PREFIX = "EPOCHAL_REPLICA_"
SOFTWARE_VERSION = "1.0.0"
SYNC_MODES = ("full", "normal")
STREAM_SOURCES = ("strict", "nearest")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSettings:
    listen: str
    cms: tuple[str, ...]
    advertise: str = ""  # default: listen
    datacenter: str = "dc1"
    rack: str = "r1"
    data_dir: str = ""  # default var/replica-<listen port>
    sync: str = "full"
    write_timeout_ms: int = 2_000
    read_timeout_ms: int = 2_000
    catch_up_timeout_ms: int = 2_000
    pull_interval_ms: int = 1_000
    pull_backoff_max_ms: int = 10_000
    max_skew_ms: int = 5_000
    hlc_reserve_ms: int = 1_000
    sequence_block: int = 1_024
    max_in_flight_requests: int = 1_024
    max_pending_applies: int = 4_096
    max_value_bytes: int = 1 << 20
    max_mutation_bytes: int = 16 << 20
    max_rows_per_read: int = 10_000
    metadata_snapshot_interval: int = 1_000
    metadata_log_retention: int = 10_000
    fetch_page_entries: int = 1_000
    barrier_timeout_ms: int = 30_000
    barrier_backoff_ms: int = 1_000
    barrier_min_level: str = DEFAULT_MINIMUM.value
    stream_message_bytes: int = 64 << 10
    stream_timeout_s: float = 3_600.0
    stream_sources: str = "strict"
    purge_interval_ms: int = 60_000
    auto_join: bool = True
    num_tokens: int = DEFAULT_NUM_TOKENS
    initial_tokens: str = ""
    metrics_listen: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    insecure: bool = False
    health_listen: str = ""
    enable_test_hooks: bool = False
    shutdown_grace_s: float = 5.0
    trace_dir: str = ""
    log_level: str = "INFO"
    software_version: str = SOFTWARE_VERSION

    def __post_init__(self) -> None:
        if not self.listen:
            raise ValueError("--listen (EPOCHAL_REPLICA_LISTEN) is required: host:port")
        parse_addresses(self.listen, "--listen")
        if not self.cms:
            raise ValueError(
                "--cms (EPOCHAL_REPLICA_CMS) is required: host:port,... of CMS members"
            )
        if self.sync not in SYNC_MODES:
            raise ValueError(f"--sync must be one of {', '.join(SYNC_MODES)}, got {self.sync!r}")
        check_numbers(self, zero_means_off=frozenset({"purge_interval_ms"}))
        levels = [level.value for level in FALLBACK_CHAIN]
        if self.barrier_min_level not in levels:
            raise ValueError(
                f"--barrier-min-level must be one of {', '.join(levels)}, got "
                f"{self.barrier_min_level!r}"
            )
        if self.stream_sources not in STREAM_SOURCES:
            raise ValueError(
                f"--stream-sources must be one of {', '.join(STREAM_SOURCES)}, got "
                f"{self.stream_sources!r}"
            )
        try:
            check_version(self.software_version)
        except Rejected as rejection:
            raise ValueError(f"--software-version: {rejection.message}") from None
        if not 1 <= self.num_tokens <= MAX_NUM_TOKENS:
            raise ValueError(f"--num-tokens must be 1..{MAX_NUM_TOKENS}, got {self.num_tokens}")
        tokens = self.join_tokens  # raises ValueError naming the flag for a bad list
        if tokens and len(set(tokens)) != len(tokens):
            raise ValueError(f"--initial-tokens must be distinct: {self.initial_tokens}")
        if self.hlc_reserve_ms >= self.max_skew_ms:
            raise ValueError(
                "--hlc-reserve-ms must be below --max-skew-ms: after a restart the clock starts at "
                "the reserved ceiling, and peers refuse a clock further ahead than the skew"
            )

    @property
    def address(self) -> str:
        """The address registered in the directory, where other nodes and clients reach us."""
        return self.advertise or self.listen

    @property
    def join_tokens(self) -> tuple[int, ...]:
        """``--initial-tokens`` as integers (empty: ``--num-tokens`` are allocated)."""
        tokens = []
        for text in self.initial_tokens.split(","):
            if not text.strip():
                continue
            try:
                token = int(text)
                check_token(token)
            except ValueError as error:
                raise ValueError(f"--initial-tokens: {text.strip()!r}: {error}") from None
            tokens.append(token)
        if len(tokens) > MAX_NUM_TOKENS:
            raise ValueError(f"--initial-tokens: at most {MAX_NUM_TOKENS}, got {len(tokens)}")
        return tuple(tokens)

    @property
    def follower(self) -> FollowerSettings:
        return FollowerSettings(
            cms=self.cms,
            address=self.address,
            pull_interval_ms=self.pull_interval_ms,
            pull_backoff_max_ms=self.pull_backoff_max_ms,
            metadata_snapshot_interval=self.metadata_snapshot_interval,
            metadata_log_retention=self.metadata_log_retention,
        )

    @property
    def barrier_level_minimum(self) -> BarrierLevel:
        return BarrierLevel(self.barrier_min_level)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir or f"var/replica-{self.listen.rpartition(':')[2]}")

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.data_path / 'replica.db'}"


_FLAGS: dict[str, tuple[type, str]] = {
    "listen": (str, "host:port to listen on"),
    "cms": (str, "CMS members to register with and follow: host:port,..."),
    "advertise": (str, "address other nodes and clients use (default: --listen)"),
    "datacenter": (str, "this node's datacenter"),
    "rack": (str, "this node's rack"),
    "data_dir": (str, "where the replica's SQLite database lives (default var/replica-<port>)"),
    "sync": (
        str,
        "full: every write transaction is fsynced before it is acknowledged; normal: SQLite "
        "WAL synchronous=NORMAL (a power loss may lose acknowledged writes)",
    ),
    "write_timeout_ms": (int, "longest a coordinator waits for a write's acknowledgements"),
    "read_timeout_ms": (int, "longest a coordinator waits for a read's replies and repairs"),
    "catch_up_timeout_ms": (int, "longest a request waits for this node to catch up on epochs"),
    "pull_interval_ms": (int, "pull the metadata log from the CMS this often"),
    "pull_backoff_max_ms": (int, "longest wait between pulls while the CMS is unreachable"),
    "max_skew_ms": (int, "refuse a peer or client clock further ahead than this"),
    "purge_interval_ms": (
        int,
        "purge tombstones past their table's gc_grace_seconds this often (tracked keyspaces: "
        "only below the low bound of a full reconciliation); 0: never",
    ),
    "hlc_reserve_ms": (int, "HLC values are reserved on disk in blocks of this many ms"),
    "sequence_block": (int, "mutation sequence numbers reserved on disk at a time, per log"),
    "max_in_flight_requests": (
        int,
        "client requests coordinated at once (then RESOURCE_EXHAUSTED)",
    ),
    "max_pending_applies": (int, "mutations queued for storage (then the replica refuses)"),
    "max_value_bytes": (int, "largest encoded cell value accepted"),
    "max_mutation_bytes": (int, "largest write accepted"),
    "max_rows_per_read": (int, "most rows one read returns (no paging: a larger read fails)"),
    "metadata_snapshot_interval": (int, "store the applied metadata every N epochs"),
    "metadata_log_retention": (int, "applied log entries kept for peers' catch-up"),
    "fetch_page_entries": (int, "log entries per FetchLog page served to peers"),
    "barrier_timeout_ms": (
        int,
        "a progress barrier waits this long at a level before falling back to the next",
    ),
    "barrier_backoff_ms": (int, "a barrier asks a node that has not acknowledged again this often"),
    "barrier_min_level": (
        str,
        "the weakest level a progress barrier falls back to: EACH_QUORUM (default), QUORUM (safe "
        "for QUORUM clients), or LOCAL_QUORUM, ONE, NODE_LOCAL (waived: quorums of adjacent "
        "epochs may not intersect)",
    ),
    "stream_message_bytes": (int, "about this many bytes of rows per streamed message"),
    "stream_timeout_s": (float, "longest one range stream may take before it is retried"),
    "stream_sources": (
        str,
        "strict: stream a range only from the node giving it up (replace and remove: the "
        "nearest live replica); nearest: fall back to the nearest other replica when it is down",
    ),
    "auto_join": (
        bool,
        "join the ring by itself once registered when this node owns no tokens (and resume an "
        "interrupted join); off (--no-auto-join) for a node to replace another, or to join by "
        "`epochal bootstrap`",
    ),
    "num_tokens": (int, "tokens the join allocates for balance, unless --initial-tokens"),
    "initial_tokens": (str, "explicit tokens for the join: t1,t2,... (signed 64-bit)"),
    "metrics_listen": (str, "host:port for the Prometheus endpoint (off when empty)"),
    **SECURITY_FLAGS,
    "enable_test_hooks": (bool, "serve epochal.v1.ReplicaTesting (tests only)"),
    "shutdown_grace_s": (float, "seconds to finish in-flight RPCs on SIGTERM"),
    "trace_dir": (str, "write OTLP-JSON span files here (also EPOCHAL_TRACE_DIR)"),
    "log_level": (str, "DEBUG, INFO, WARNING or ERROR"),
    "software_version": (str, "software version registered in the directory"),
}


def build_parser() -> argparse.ArgumentParser:
    return build_flag_parser(
        prog="epochal-replica",
        description="A replica: follows the metadata log, stores and serves data, coordinates "
        "reads and writes at consistency levels, tracks mutations.",
        env_prefix=ENV_PREFIX,
        table=_FLAGS,
        settings_class=ReplicaSettings,
    )


def settings_from(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> ReplicaSettings:
    environment = os.environ if env is None else env
    values = values_from(build_parser(), _FLAGS, ENV_PREFIX, argv, environment)
    cms = parse_addresses(str(values.pop("cms", "") or ""), "--cms")
    listen = str(values.pop("listen", "") or "")
    return ReplicaSettings(listen=listen, cms=cms, **values)  # type: ignore[arg-type]
