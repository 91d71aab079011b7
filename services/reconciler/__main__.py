"""``epochal-reconciler`` / ``python -m epochal.reconciler``: run one reconciler until SIGTERM or
Ctrl-C."""

from __future__ import annotations

import sys

from epochal.reconciler.server import ReconcilerServer
from epochal.reconciler.settings import settings_from
from epochal.runtime.service import run


def main(argv: list[str] | None = None) -> int:
    return run(
        argv,
        prog="epochal-reconciler",
        settings_from=settings_from,
        make_server=ReconcilerServer,
        label=lambda settings: f"reconciler[{settings.listen}]",
    )


if __name__ == "__main__":
    sys.exit(main())
