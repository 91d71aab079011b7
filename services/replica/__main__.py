"""``epochal-replica`` / ``python -m epochal.replica``: run one replica until SIGTERM or Ctrl-C."""

from __future__ import annotations

import sys

from epochal.replica.server import ReplicaServer
from epochal.replica.settings import settings_from
from epochal.runtime.service import run


def main(argv: list[str] | None = None) -> int:
    return run(
        argv,
        prog="epochal-replica",
        settings_from=settings_from,
        make_server=ReplicaServer,
        label=lambda settings: f"replica[{settings.address}]",
    )


if __name__ == "__main__":
    sys.exit(main())
