"""The operator's command line, ``epochal`` (``epochal.cli.app``); see README.md, "The epochal
command line". ``epochal dev ...`` is a command line of its own (``epochal.devcluster``), started
without loading the others."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's own log lines (a failed TLS handshake, at INFO) are not for an operator's terminal:
    # the command's one-line error says what failed
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["dev"]:
        from epochal.devcluster.commands import main as dev_main

        return dev_main(arguments[1:])
    from epochal.cli.app import main as app_main

    return app_main(arguments)


__all__ = ["main"]
