"""``epochal-replica`` / ``python -m epochal.replica``: run one replica until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
import sys

from epochal.replica.server import ReplicaServer
from epochal.replica.settings import settings_from

SWITCH_INTERVAL_S = 0.0002


def main(argv: list[str] | None = None) -> int:
    try:
        settings = settings_from(argv)
    except ValueError as error:
        print(f"epochal-replica: {error}", file=sys.stderr)
        return 2
    # As in the CMS: gRPC's poller thread hands every message to the loop, and the default 5 ms
    # GIL switch interval would let each hand-off wait that long.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s replica[{settings.address}] %(name)s: %(message)s",
    )
    asyncio.run(ReplicaServer(settings).serve_until_signalled())
    return 0


if __name__ == "__main__":
    sys.exit(main())
