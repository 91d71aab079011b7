"""``epochal-cms`` / ``python -m epochal.cms``: run one CMS member until SIGTERM or Ctrl-C."""

from __future__ import annotations

import sys

from epochal.cms.server import CMSServer
from epochal.cms.settings import settings_from
from epochal.runtime.service import run


def main(argv: list[str] | None = None) -> int:
    return run(
        argv,
        prog="epochal-cms",
        settings_from=settings_from,
        make_server=CMSServer,
        label=lambda settings: f"cms[{settings.member_id}]",
    )


if __name__ == "__main__":
    sys.exit(main())
