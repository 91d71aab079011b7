"""``epochal``: the operator's command line — the cluster at a glance, the CMS and its log,
topology operations, reconcilers, and a local dev cluster (``epochal dev``).

Point it at any replica or CMS member (``--cluster`` / ``EPOCHAL_CLUSTER`` / the config file,
``epochal.cli.options``); it finds the rest in the metadata. Every command that prints data
takes ``--output table|json|yaml``. Errors are one line on stderr, no traceback
(``EPOCHAL_DEBUG=1`` shows it); the exit code is 0 on success, 1 when the cluster refused or an
operation failed (``health``: when a process does not serve), 2 for a usage error or when
nothing answered, 130 when interrupted.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

import click

from epochal.cli import (
    certs_commands,
    cluster_commands,
    cms_commands,
    log_commands,
    reconcile,
    topology_commands,
)
from epochal.cli.failures import USAGE_EXIT, Failure
from epochal.cli.options import global_options
from epochal.errors import EpochalError
from epochal.wire import channels

INTERRUPTED_EXIT = 130


def _version() -> str:
    try:
        return version("epochal")
    except PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(_version(), "--version", "-V", prog_name="epochal")
@global_options
def cli() -> None:
    """Operate an Epochal cluster: point it at any replica or CMS member with --cluster (or
    EPOCHAL_CLUSTER); it finds the rest."""


@cli.command(
    "dev",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def dev(arguments: Sequence[str]) -> int:
    """A local cluster: up, status, add-replica, add-cms, down (epochal dev --help)."""
    from epochal.devcluster.commands import main as dev_main

    return dev_main(list(arguments))


for command in (
    cluster_commands.status,
    cluster_commands.ring,
    cluster_commands.describe,
    cluster_commands.placements,
    cluster_commands.endpoints,
    cluster_commands.health,
    cms_commands.cms,
    log_commands.log,
    log_commands.metadata,
    *topology_commands.COMMANDS,
    reconcile.reconcile,
    certs_commands.certs,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    before = channels.chosen_security()  # a command chooses its own; called in-process, undone
    try:
        return _main(arguments)
    finally:
        channels.use(before)


def _main(arguments: list[str]) -> int:
    try:
        result = cli.main(args=arguments, prog_name="epochal", standalone_mode=False)
    except click.exceptions.Exit as done:  # --help, --version
        return done.exit_code
    except click.UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else "epochal"
        _error(f"{where}: {error.format_message()} (see {where} --help)")
        return USAGE_EXIT
    except click.ClickException as error:
        _error(f"epochal: {error.format_message()}")
        return error.exit_code
    except Failure as failure:
        _error(f"epochal: {failure.message}")
        return failure.exit_code
    except channels.NoSecurity as error:
        _error(f"epochal: {error}")
        return USAGE_EXIT
    except EpochalError as error:  # an SDK error no command turned into a failure
        _error(f"epochal: {error.message}")
        return 1
    except (KeyboardInterrupt, click.Abort):
        ran = next((a for a in arguments if not a.startswith("-")), "")
        if ran in {c.name for c in topology_commands.COMMANDS} - {"operations"}:
            _error("interrupted: the operation goes on (epochal operations shows it)")
        else:
            _error("interrupted")
        return INTERRUPTED_EXIT
    except Exception as error:
        if os.environ.get("EPOCHAL_DEBUG"):
            traceback.print_exc()
        _error(f"epochal: unexpected {type(error).__name__}: {error} (EPOCHAL_DEBUG=1 shows where)")
        return 1
    return result if isinstance(result, int) else 0


def _error(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
