"""Running a service process: settings from flags and environment, logging, the GIL switch
interval, and a server that runs until SIGTERM or Ctrl-C, then stops gracefully."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

log = logging.getLogger(__name__)

# gRPC's poller thread hands every incoming message to the event loop; with the default 5 ms
# GIL switch interval each hand-off can wait that long, which would dominate request latency.
SWITCH_INTERVAL_S = 0.0002
EXIT_STORAGE_FAILED = 75  # EX_TEMPFAIL: a restart recovers from what is on disk


def fatal(message: str) -> None:
    """Storage refused a write: what this process would acknowledge next could not be trusted to
    be durable, so it exits at once (no cleanup that could write more) and a restart recovers
    from what is on disk."""
    log.critical("%s; exiting so that a restart recovers from what is on disk", message)
    logging.shutdown()
    os._exit(EXIT_STORAGE_FAILED)


class Server(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve_until_signalled(server: Server, name: str) -> None:
    await server.start()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    log.info("%s shutting down", name)
    await server.stop()


def run(
    argv: Sequence[str] | None,
    *,
    prog: str,
    settings_from: Callable[[Sequence[str] | None], Any],
    make_server: Callable[[Any], Server],
    label: Callable[[Any], str],
) -> int:
    """Parse the settings (exit status 2 with the reason when they are wrong), set up logging
    as ``label(settings)``, and serve until signalled."""
    try:
        settings = settings_from(argv)
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    name = label(settings)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s {name} %(name)s: %(message)s",
    )
    asyncio.run(serve_until_signalled(make_server(settings), name))
    return 0
