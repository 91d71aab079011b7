"""Running a service process: settings from flags and environment, logging, the GIL switch
interval, and a server that runs until SIGTERM or Ctrl-C (SIGINT), then stops gracefully within
its grace period (``--shutdown-grace-s``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from epochal.runtime.processes import die_with_parent
from epochal.runtime.security import security_of
from epochal.telemetry import check_environment as check_tracing_environment
from epochal.wire import channels

log = logging.getLogger(__name__)

# gRPC's poller thread hands every incoming message to the event loop; with the default 5 ms
# GIL switch interval each hand-off can wait that long, which would dominate request latency.
SWITCH_INTERVAL_S = 0.0002
EXIT_STORAGE_FAILED = 75  # EX_TEMPFAIL: a restart recovers from what is on disk
EXIT_STOP_OVERRUN = 70  # EX_SOFTWARE: a graceful stop outlived its grace period
EXIT_INVARIANT_BROKEN = 70  # EX_SOFTWARE: a bug; an assertion of a core failed
# How a server spends its grace period when it stops: work in flight may drain for the first
# share of it, gRPC's own stop (which cancels whatever is left) ends by the second, and the
# rest is for closing storage and the interpreter's exit.
DRAIN_SHARE = 0.4
RPC_SHARE = 0.7
EXIT_RESERVE_S = 0.5  # of the grace period, for the interpreter's exit
TASKS_FINISH_MAX_S = 1.0  # how long the tasks left after a stop may take to finish


def fatal(message: str, exit_code: int = EXIT_STORAGE_FAILED) -> None:
    """Storage refused a write, or an invariant broke: what this process would acknowledge next
    could not be trusted, so it exits at once (no cleanup that could write more) and a restart
    recovers from what is on disk."""
    log.critical("%s; exiting so that a restart recovers from what is on disk", message)
    logging.shutdown()
    os._exit(exit_code)


class Server(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Graceful, and finished within the grace period given to ``serve_until_signalled``."""


async def serve_until_signalled(server: Server, name: str, grace_s: float) -> None:
    """Start the server and serve until SIGTERM or SIGINT (Ctrl-C: the same), then stop it,
    logging one line. A signal while starting stops the start. Whatever happens, the process
    is gone ``grace_s`` after the signal: a stop that overruns it is cut short by ``os._exit``."""
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[str] = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _note_signal, signalled, sig.name)
    starting = loop.create_task(server.start())
    await asyncio.wait((starting, signalled), return_when=asyncio.FIRST_COMPLETED)
    if not signalled.done():
        starting.result()  # a start that failed raises here
        await signalled
    deadline = loop.time() + grace_s
    _exit_after(grace_s, name)
    log.info("%s shutting down on %s (grace %.1f s)", name, signalled.result(), grace_s)
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
    await server.stop()
    await _others_finish(min(deadline - loop.time() - EXIT_RESERVE_S, TASKS_FINISH_MAX_S))


async def _others_finish(timeout_s: float) -> None:
    """Let the tasks still running finish before ``asyncio.run`` cancels them: gRPC's own, which
    see the last calls closed a moment after the server has stopped. (Cancelled, gRPC would log
    each one as "Exception not handled by _handle_exceptions ... CancelledError".)"""
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    if others and timeout_s > 0:
        _, running = await asyncio.wait(others, timeout=timeout_s)
        if running:
            log.debug("still running after the stop: %s", [t.get_coro() for t in running])


def _note_signal(signalled: asyncio.Future[str], name: str) -> None:
    if not signalled.done():
        signalled.set_result(name)  # a second signal changes nothing: the stop is bounded


def _exit_after(grace_s: float, name: str) -> None:
    """A watchdog thread: if the process is still here ``grace_s`` from now, end it."""

    def overrun() -> None:
        log.error("%s did not stop within %.1f s; exiting now", name, grace_s)
        logging.shutdown()
        os._exit(EXIT_STOP_OVERRUN)

    timer = threading.Timer(grace_s, overrun)
    timer.daemon = True
    timer.start()


def run(
    argv: Sequence[str] | None,
    *,
    prog: str,
    settings_from: Callable[[Sequence[str] | None], Any],
    make_server: Callable[[Any], Server],
    label: Callable[[Any], str],
) -> int:
    """Parse the settings and check the tracing variables (exit status 2 with the reason when
    one is wrong), set up logging as ``label(settings)``, and serve until signalled
    (``settings.shutdown_grace_s`` bounds the stop)."""
    die_with_parent()  # started by a local harness: never outlive it
    try:
        settings = settings_from(argv)
        # TLS files or --insecure, checked before anything starts: the process's channels'
        channels.use(security_of(settings))
        check_tracing_environment()  # OTEL_* variables as wrong as a flag would be
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    name = label(settings)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s {name} %(name)s: %(message)s",
    )
    asyncio.run(serve_until_signalled(make_server(settings), name, settings.shutdown_grace_s))
    return 0
