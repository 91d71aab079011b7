"""Service settings as command-line flags and environment variables, one mechanism for all.

Each service declares its settings as a frozen dataclass and a table ``name -> (type, help)``;
``build_parser`` turns the table into flags (``--snake-case``) whose help names the
environment variable (``<PREFIX><NAME>``), and ``values_from`` reads them: a flag wins over its
environment variable, which wins over the dataclass default. A boolean flag takes an optional
value (``--x``, ``--x false``); one that is on by default also has ``--no-x``.
``check_numbers`` is the bound check every settings class runs when built.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

FlagTable = Mapping[str, tuple[type, str]]

# Settings every service also reads from a shared variable when its own is not set.
SHARED_ENV = {
    "trace_dir": "EPOCHAL_TRACE_DIR",
    # transport security (epochal.runtime.security): the same files for every service
    "tls_ca": "EPOCHAL_TLS_CA",
    "tls_cert": "EPOCHAL_TLS_CERT",
    "tls_key": "EPOCHAL_TLS_KEY",
    "insecure": "EPOCHAL_INSECURE",
}

# transport security, the same in every service (epochal.runtime.security)
SECURITY_FLAGS: FlagTable = {
    "tls_ca": (str, "the CA certificate (PEM) the cluster's certificates are signed by"),
    "tls_cert": (str, "this process's certificate (PEM), its role in a urn:epochal:role: SAN"),
    "tls_key": (str, "this process's private key (PEM)"),
    "insecure": (
        bool,
        "plain text: no TLS and no role checks (only for a cluster run so on every side)",
    ),
    "health_listen": (
        str,
        "host:port of a plaintext port that serves gRPC health only, for probes without a "
        "certificate (off when empty)",
    ),
}


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def parse_addresses(text: str, what: str) -> tuple[str, ...]:
    """``host:port,...`` as a tuple (ValueError naming ``what`` for one that is not)."""
    addresses = tuple(a.strip() for a in text.split(",") if a.strip())
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bad {what} address {address!r}: expected host:port")
    return addresses


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def build_parser(
    *, prog: str, description: str, env_prefix: str, table: FlagTable, settings_class: type
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"{description} Every flag can also be set as {env_prefix}<FLAG>.",
    )
    defaults = {f.name: f.default for f in fields(settings_class)}
    for name, (kind, help_text) in table.items():
        default = defaults.get(name)
        shown = (
            "" if default in (None, "") or not isinstance(default, str | int | float) else default
        )
        extra: dict[str, Any] = {}
        if kind is bool:
            extra = {"nargs": "?", "const": True, "type": parse_bool}
            shown = "true" if default is True else ""
        else:
            extra = {"type": kind}
        parser.add_argument(
            flag_name(name),
            default=None,
            help=f"{help_text} [{env_prefix}{name.upper()}]"
            + (f" (default {shown})" if shown else ""),
            **extra,
        )
        if kind is bool and default is True:
            # A setting on by default is turned off by --no-<flag> (or <flag> false).
            parser.add_argument(
                "--no-" + flag_name(name)[2:],
                dest=name,
                action="store_const",
                const=False,
                help=f"turn {flag_name(name)} off",
            )
    return parser


def values_from(
    parser: argparse.ArgumentParser,
    table: FlagTable,
    env_prefix: str,
    argv: Sequence[str] | None,
    env: Mapping[str, str],
) -> dict[str, object]:
    """The settings given by flags or environment variables (the rest keep their defaults)."""
    args = vars(parser.parse_args(argv))
    values: dict[str, object] = {}
    for name, (kind, _) in table.items():
        raw = args.get(name)
        if raw is None:
            env_value = env.get(env_prefix + name.upper())
            if env_value is None and name in SHARED_ENV:
                env_value = env.get(SHARED_ENV[name])
            if env_value is None:
                continue
            try:
                raw = parse_bool(env_value) if kind is bool else kind(env_value)
            except ValueError as error:
                raise ValueError(f"{env_prefix}{name.upper()}: {error}") from None
        values[name] = raw
    return values


def check_numbers(settings: object, zero_means_off: frozenset[str] = frozenset()) -> None:
    """Every numeric setting must be > 0, or >= 0 where 0 turns the feature off."""
    for f in fields(settings):  # type: ignore[arg-type]
        value = getattr(settings, f.name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if f.name in zero_means_off:
            if value < 0:
                raise ValueError(f"{flag_name(f.name)} must be >= 0 (0 turns it off), got {value}")
        elif value <= 0:
            raise ValueError(f"{flag_name(f.name)} must be > 0, got {value}")
