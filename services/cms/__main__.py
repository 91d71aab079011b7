"""``epochal-cms`` / ``python -m epochal.cms``: run one CMS member until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
import sys

from epochal.cms.server import CMSServer
from epochal.cms.settings import settings_from

SWITCH_INTERVAL_S = 0.0002


def main(argv: list[str] | None = None) -> int:
    try:
        settings = settings_from(argv)
    except ValueError as error:
        print(f"epochal-cms: {error}", file=sys.stderr)
        return 2
    # gRPC's poller thread hands every incoming message to the loop; with the default 5 ms GIL
    # switch interval each hand-off can wait that long, which would dominate commit latency.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s cms[{settings.member_id}] %(name)s: %(message)s",
    )
    asyncio.run(CMSServer(settings).serve_until_signalled())
    return 0


if __name__ == "__main__":
    sys.exit(main())
