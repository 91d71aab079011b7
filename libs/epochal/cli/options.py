"""The command line's global options and where their values come from.

Every global option (``--cluster``, ``--output``, ``--timeout-s``, ``--quiet``, ``--config``, and
the connection's security: ``--tls-ca``, ``--tls-cert``, ``--tls-key`` or ``--insecure``) is
accepted before the command and after it (``epochal --output json status`` and ``epochal status
--output json`` are the same): ``global_options`` puts the same options on the top group and on
every command, and each records what was given in the context's ``meta`` (shared by every
context of one invocation) — the value given last wins.

A value comes from, in order: the command line, the environment (``EPOCHAL_CLUSTER``,
``EPOCHAL_OUTPUT``, ``EPOCHAL_TIMEOUT_S``, ``EPOCHAL_CONFIG``, ``EPOCHAL_TLS_CA``,
``EPOCHAL_TLS_CERT``, ``EPOCHAL_TLS_KEY``, ``EPOCHAL_INSECURE``: the services' names), the config
file, the default. The command line connects with mutual TLS (an ``operator`` certificate runs
every command; a ``client`` one reads, writes and runs DDL) or, only when asked, in plain text.
The config file is TOML, ``~/.config/epochal/config.toml`` (``$XDG_CONFIG_HOME`` when set) or
the one ``--config`` names, as etcdctl and kubectl keep theirs::

    cluster = "10.0.0.1:7001,10.0.0.2:9001"   # or a list of "host:port"
    output = "table"                           # table | json | yaml
    timeout_s = 30
    tls_ca = "certs/ca.pem"                    # relative to the config file's folder
    tls_cert = "certs/operator.pem"
    tls_key = "certs/operator-key.pem"
    # insecure = true                          # plain text, for a cluster run --insecure

A config file that does not parse, or names a key it does not know, is a usage error; the default
file may be missing, one named by ``--config`` may not.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from epochal.runtime.flags import parse_addresses, parse_bool
from epochal.wire import channels
from epochal.wire.tls import Security, security_from

OUTPUTS = ("table", "json", "yaml")
DEFAULT_TIMEOUT_S = 30.0
_META = "epochal.options"
TLS_KEYS = ("tls_ca", "tls_cert", "tls_key")
CONFIG_KEYS = frozenset({"cluster", "output", "timeout_s", *TLS_KEYS, "insecure"})

F = TypeVar("F", bound=Callable[..., Any])


class UsageProblem(click.UsageError):
    """A usage error found after parsing (a config file, a missing --cluster): exit 2."""


@dataclass(frozen=True, slots=True)
class Options:
    cluster: tuple[str, ...]  # any replicas or CMS members, host:port
    output: str  # one of OUTPUTS
    timeout_s: float  # for one call; an operation waits for as long as it runs
    quiet: bool  # no progress on stderr
    config: str  # the config file read ("" none)
    security: Security | None = None  # None: none given (a command that connects refuses)

    def require_cluster(self) -> tuple[str, ...]:
        if not self.cluster:
            raise UsageProblem(
                "name the cluster: --cluster host:port[,host:port...] (any replica or CMS "
                "member), EPOCHAL_CLUSTER, or cluster = ... in the config file"
            )
        if self.security is None:
            raise UsageProblem(
                "no TLS files to connect with: --tls-ca, --tls-cert and --tls-key (an operator "
                "certificate; EPOCHAL_TLS_CA, EPOCHAL_TLS_CERT, EPOCHAL_TLS_KEY, or tls_ca, "
                "tls_cert, tls_key in the config file; `epochal certs` makes them), or "
                "--insecure for a cluster that runs in plain text"
            )
        return self.cluster


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _: click.Parameter, value: Any) -> Any:
        if value is not None and value is not False:
            ctx.meta.setdefault(_META, {})[name] = value
        return value

    return callback


def global_options(command: F) -> F:
    """Put the global options on ``command`` (the top group and every command)."""
    decorators = [
        click.option(
            "--cluster",
            "-c",
            metavar="HOST:PORT,...",
            expose_value=False,
            callback=_remember("cluster"),
            help="any replicas or CMS members of the cluster [EPOCHAL_CLUSTER]",
        ),
        click.option(
            "--output",
            "-o",
            type=click.Choice(OUTPUTS),
            expose_value=False,
            callback=_remember("output"),
            help="table (default), or json / yaml for scripts [EPOCHAL_OUTPUT]",
        ),
        click.option(
            "--timeout-s",
            type=click.FloatRange(min=0.1),
            expose_value=False,
            callback=_remember("timeout_s"),
            help=f"how long one call may take (default {DEFAULT_TIMEOUT_S:.0f}) "
            "[EPOCHAL_TIMEOUT_S]",
        ),
        click.option(
            "--quiet",
            "-q",
            is_flag=True,
            default=False,
            expose_value=False,
            callback=_remember("quiet"),
            help="no progress on stderr",
        ),
        click.option(
            "--config",
            metavar="FILE",
            expose_value=False,
            callback=_remember("config"),
            help="the config file (default ~/.config/epochal/config.toml) [EPOCHAL_CONFIG]",
        ),
        click.option(
            "--tls-ca",
            metavar="FILE",
            expose_value=False,
            callback=_remember("tls_ca"),
            help="the cluster's CA certificate (PEM) [EPOCHAL_TLS_CA]",
        ),
        click.option(
            "--tls-cert",
            metavar="FILE",
            expose_value=False,
            callback=_remember("tls_cert"),
            help="your certificate (PEM; the operator role runs every command) [EPOCHAL_TLS_CERT]",
        ),
        click.option(
            "--tls-key",
            metavar="FILE",
            expose_value=False,
            callback=_remember("tls_key"),
            help="your private key (PEM) [EPOCHAL_TLS_KEY]",
        ),
        click.option(
            "--insecure",
            is_flag=True,
            default=False,
            expose_value=False,
            callback=_remember("insecure"),
            help="plain text, for a cluster started with --insecure [EPOCHAL_INSECURE]",
        ),
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return command


def default_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "epochal" / "config.toml"


def read_config(path: Path, *, required: bool) -> dict[str, Any]:
    """The config file's settings ({} when the default one is missing)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        if required:
            raise UsageProblem(f"config file {path} does not exist") from None
        return {}
    except OSError as error:
        raise UsageProblem(f"cannot read config file {path}: {error.strerror}") from None
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageProblem(f"config file {path} is not TOML: {error}") from None
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise UsageProblem(
            f"config file {path}: unknown key {unknown[0]!r} (known: "
            f"{', '.join(sorted(CONFIG_KEYS))})"
        )
    return config


def resolve(ctx: click.Context, env: Mapping[str, str] | None = None) -> Options:
    """The options of this invocation: flag, else environment, else config file, else default."""
    env = os.environ if env is None else env
    given: dict[str, Any] = ctx.meta.get(_META, {})
    named = given.get("config") or env.get("EPOCHAL_CONFIG", "")
    path = Path(named).expanduser() if named else default_config_path(env)
    config = read_config(path, required=bool(named))
    where = f"config file {path}"

    def pick(name: str, env_name: str) -> tuple[Any, str]:
        if name in given:
            return given[name], f"--{name.replace('_', '-')}"
        if env.get(env_name):
            return env[env_name], env_name
        if name in config:
            return config[name], f"{where}: {name}"
        return None, ""

    cluster_value, cluster_from = pick("cluster", "EPOCHAL_CLUSTER")
    output_value, output_from = pick("output", "EPOCHAL_OUTPUT")
    timeout_value, timeout_from = pick("timeout_s", "EPOCHAL_TIMEOUT_S")
    files, files_from = [], []
    for key in TLS_KEYS:
        value, source = pick(key, key.upper().replace("TLS_", "EPOCHAL_TLS_"))
        if value is not None and not isinstance(value, str):
            raise UsageProblem(f"{source}: expected a file name, not {value!r}")
        if value and source.startswith(where):  # relative to the config file, as kubectl's
            value = str(path.parent / Path(value).expanduser())
        files.append(str(Path(value).expanduser()) if value else "")
        if value:
            files_from.append(source)
    insecure_value, insecure_from = pick("insecure", "EPOCHAL_INSECURE")
    insecure_value = _flag(insecure_value, insecure_from)
    # TLS files and --insecure from different places: the nearer one wins (flag, environment,
    # config file), as every other option; from the same place, the command line says which
    if insecure_value and files_from:
        nearest = min(_rank(s, where) for s in files_from)
        if _rank(insecure_from, where) < nearest:
            files = ["", "", ""]
        elif nearest < _rank(insecure_from, where):
            insecure_value = False
    options = Options(
        cluster=_cluster(cluster_value, cluster_from),
        output=_output(output_value, output_from),
        timeout_s=_timeout(timeout_value, timeout_from),
        quiet=bool(given.get("quiet")),
        config=str(path) if config else "",
        security=_security(files, insecure_value, insecure_from),
    )
    if options.security is not None:
        channels.use(options.security)  # every channel this command opens
    return options


def _rank(source: str, config_file: str) -> int:
    """Where a value came from: 0 a flag, 1 the environment, 2 the config file."""
    return 2 if source.startswith(config_file) else 0 if source.startswith("--") else 1


def _flag(value: Any, source: str) -> bool:
    if isinstance(value, str):
        try:
            return parse_bool(value)
        except ValueError as error:
            raise UsageProblem(f"{source}: {error}") from None
    if value is not None and not isinstance(value, bool):
        raise UsageProblem(f"{source}: expected true or false, not {value!r}")
    return bool(value)


def _security(files: list[str], insecure: bool, source: str) -> Security | None:
    if not any(files) and not insecure:
        return None
    try:
        ca, cert, key = files
        return security_from(ca, cert, key, bool(insecure))
    except ValueError as error:
        raise UsageProblem(str(error)) from None


def _cluster(value: Any, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if not isinstance(value, str):
        raise UsageProblem(f"{source}: expected host:port,... or a list of them")
    try:
        return parse_addresses(value, source)
    except ValueError as error:
        raise UsageProblem(str(error)) from None


def _output(value: Any, source: str) -> str:
    if value is None:
        return "table"
    if value not in OUTPUTS:
        raise UsageProblem(f"{source}: output is one of {', '.join(OUTPUTS)}, not {value!r}")
    return str(value)


def _timeout(value: Any, source: str) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise UsageProblem(f"{source}: a timeout is seconds, not {value!r}") from None
    if not seconds > 0:
        raise UsageProblem(f"{source}: a timeout is more than 0 seconds, not {value!r}")
    return seconds
