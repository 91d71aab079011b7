"""Reconciler settings: every one a flag and an environment variable (``EPOCHAL_RECONCILER_*``),
checked when built."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from epochal.runtime.flags import SECURITY_FLAGS, check_numbers, parse_addresses, values_from
from epochal.runtime.flags import build_parser as build_flag_parser
from epochal.runtime.follower import FollowerSettings

ENV_PREFIX = "EPOCHAL_RECONCILER_"
MAX_LEASE_MS = 600_000  # the longest lease a replica takes a claim for
MAX_WINDOW_IDS = 1_000_000  # the largest window a replica reads


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcilerSettings:
    listen: str
    cms: tuple[str, ...]
    advertise: str = ""  # default: listen
    id: str = ""  # default: the one stored in --data-dir, else a new one
    data_dir: str = ""  # default var/reconciler-<listen port>
    interval_ms: int = 1_000
    advance_interval_ms: int = 5_000
    write_timeout_ms: int = 2_000
    slack_ms: int = 5_000
    lease_ms: int = 10_000
    lease_margin_ms: int = 2_000
    batch: int = 500
    window_ids: int = 5_000
    cohort_after_ms: int = 600_000
    rate: int = 20_000
    rpc_timeout_ms: int = 10_000
    state_timeout_ms: int = 0  # 0: half of --lease-margin-ms, at most --rpc-timeout-ms
    max_ranges: int = 0
    pull_interval_ms: int = 1_000
    pull_backoff_max_ms: int = 10_000
    metadata_snapshot_interval: int = 1_000
    metadata_log_retention: int = 10_000
    metrics_listen: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    insecure: bool = False
    health_listen: str = ""
    shutdown_grace_s: float = 5.0
    trace_dir: str = ""
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if not self.listen:
            raise ValueError("--listen (EPOCHAL_RECONCILER_LISTEN) is required: host:port")
        parse_addresses(self.listen, "--listen")
        if self.advertise and parse_addresses(self.advertise, "--advertise") != (self.advertise,):
            raise ValueError(f"--advertise is one host:port, got {self.advertise!r}")
        if not self.cms:
            raise ValueError(
                "--cms (EPOCHAL_RECONCILER_CMS) is required: host:port,... of CMS members"
            )
        if len(self.id) > 256:
            raise ValueError("--id is at most 256 characters")
        if self.state_timeout_ms < 0:
            raise ValueError(
                f"--state-timeout-ms must be >= 0 (0: half of --lease-margin-ms), "
                f"got {self.state_timeout_ms}"
            )
        check_numbers(self, zero_means_off=frozenset({"max_ranges", "state_timeout_ms"}))
        if self.lease_margin_ms >= self.lease_ms:
            raise ValueError("--lease-margin-ms must be below --lease-ms")
        # A round waits up to the state deadline on a replica that does not answer (SIGSTOP,
        # swap, a long pause) before it goes on with the others; its state calls renew the
        # lease. Within the margin, a round started while its lease allowed acting learns
        # whether it renewed before that lease could end at any replica; and after the wait the
        # renewed lease must leave time to act.
        state_ms = round(self.state_timeout_s * 1000)
        if state_ms < 1:
            raise ValueError(
                f"--lease-margin-ms ({self.lease_margin_ms}) leaves no time for the state calls "
                "(half of it, by default): raise it, or set --state-timeout-ms"
            )
        if state_ms >= self.lease_margin_ms:
            raise ValueError(
                f"--state-timeout-ms ({state_ms}) must be below --lease-margin-ms "
                f"({self.lease_margin_ms}): a round that waits its whole state deadline on a "
                "replica that does not answer must learn who took part before its lease can end"
            )
        if state_ms + self.lease_margin_ms >= self.lease_ms:
            raise ValueError(
                f"--state-timeout-ms ({state_ms}) plus --lease-margin-ms "
                f"({self.lease_margin_ms}) must be below --lease-ms ({self.lease_ms}): else a "
                "round that waited on a replica that does not answer has no lease left to act"
            )
        if self.window_ids > MAX_WINDOW_IDS:
            raise ValueError(
                f"--window-ids must be at most {MAX_WINDOW_IDS} (replicas read no more)"
            )
        if self.lease_ms > MAX_LEASE_MS:
            raise ValueError(f"--lease-ms must be at most {MAX_LEASE_MS} (replicas refuse more)")

    @property
    def state_timeout_s(self) -> float:
        """The deadline of the state calls (who takes part in a round; lease renewals)."""
        chosen = self.state_timeout_ms or min(self.lease_margin_ms // 2, self.rpc_timeout_ms)
        return chosen / 1000

    @property
    def address(self) -> str:
        """The address registered in the metadata log, where operators' tools reach this
        reconciler."""
        return self.advertise or self.listen

    @property
    def follower(self) -> FollowerSettings:
        return FollowerSettings(
            cms=self.cms,
            address=self.listen,
            pull_interval_ms=self.pull_interval_ms,
            pull_backoff_max_ms=self.pull_backoff_max_ms,
            metadata_snapshot_interval=self.metadata_snapshot_interval,
            metadata_log_retention=self.metadata_log_retention,
        )

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir or f"var/reconciler-{self.listen.rpartition(':')[2]}")

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.data_path / 'reconciler.db'}"


_FLAGS: dict[str, tuple[type, str]] = {
    "listen": (str, "host:port for health, reflection and the Reconciler status service"),
    "cms": (str, "CMS members to follow and commit lease grants to: host:port,..."),
    "advertise": (
        str,
        "host:port this reconciler registers in the metadata log, where operators' tools reach "
        "it (default: --listen; set it when --listen is a wildcard address)",
    ),
    "id": (str, "this reconciler's id in lease grants (default: stored, else generated)"),
    "data_dir": (str, "where its SQLite state lives (default var/reconciler-<port>)"),
    "interval_ms": (int, "a round of each range held (deliveries) at most this often"),
    "advance_interval_ms": (
        int,
        "a round also fences, collects and advances the low bound at most this often",
    ),
    "write_timeout_ms": (
        int,
        "the replicas' --write-timeout-ms: a write in flight may carry an id this old",
    ),
    "slack_ms": (
        int,
        "subtracted too from the reconciliation time: at least the replicas' --max-skew-ms",
    ),
    "lease_ms": (int, "how long a range's lease lasts at the replicas without a renewal"),
    "lease_margin_ms": (int, "stop acting this long before the lease would end"),
    "batch": (int, "most mutations per delivery call"),
    "window_ids": (
        int,
        "most ids a round compares per window, and a low bound collects per advance",
    ),
    "cohort_after_ms": (
        int,
        "once a replica has been unreachable this long, the others fold their reconciled ids "
        "into a cohort (the low bound waits for it)",
    ),
    "rate": (int, "most mutations delivered per second, over all ranges (back-off when full)"),
    "rpc_timeout_ms": (int, "deadline of each call to a replica but the state calls"),
    "state_timeout_ms": (
        int,
        "deadline of the state calls, which decide who takes part in a round and renew the "
        "lease; below --lease-margin-ms (0: half of it, at most --rpc-timeout-ms)",
    ),
    "max_ranges": (int, "most ranges held at once (0: a fair share of the known reconcilers)"),
    "pull_interval_ms": (int, "pull the metadata log from the CMS this often"),
    "pull_backoff_max_ms": (int, "longest wait between pulls while the CMS is unreachable"),
    "metadata_snapshot_interval": (int, "store the applied metadata every N epochs"),
    "metadata_log_retention": (int, "applied log entries kept"),
    "metrics_listen": (str, "host:port for the Prometheus endpoint (off when empty)"),
    **SECURITY_FLAGS,
    "shutdown_grace_s": (float, "seconds to finish a round and release leases on SIGTERM"),
    "trace_dir": (str, "write OTLP-JSON span files here (also EPOCHAL_TRACE_DIR)"),
    "log_level": (str, "DEBUG, INFO, WARNING or ERROR"),
}


def build_parser() -> argparse.ArgumentParser:
    return build_flag_parser(
        prog="epochal-reconciler",
        description="A reconciler: follows the metadata log and continuously reconciles the "
        "mutation logs of tracked keyspaces — delivers missing mutations, fences, advances low "
        "bounds, collects logs — sharing ranges with other reconcilers through leases.",
        env_prefix=ENV_PREFIX,
        table=_FLAGS,
        settings_class=ReconcilerSettings,
    )


def settings_from(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> ReconcilerSettings:
    environment = os.environ if env is None else env
    values = values_from(build_parser(), _FLAGS, ENV_PREFIX, argv, environment)
    cms = parse_addresses(str(values.pop("cms", "") or ""), "--cms")
    listen = str(values.pop("listen", "") or "")
    return ReconcilerSettings(listen=listen, cms=cms, **values)  # type: ignore[arg-type]
