"""Small pieces of the CMS member's asyncio shell: how a broken invariant ends the process, and
a commit's timeout."""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import Iterator
from typing import Any

from epochal.errors import CommitTimeout
from epochal.runtime.service import EXIT_INVARIANT_BROKEN, fatal

EXIT_CANNOT_JOIN = 78  # EX_CONFIG: the running CMS refused this member as a candidate


@contextlib.contextmanager
def crash_on_broken_invariant() -> Iterator[None]:
    """A broken invariant of the core (an assertion, or the shell breaking the Ready protocol)
    ends the process, as a failed storage write does: going on could acknowledge what is not
    so, and a restart recovers from what is on disk."""
    try:
        yield
    except AssertionError as error:
        fatal(
            f"the Paxos core's invariant broke: {error!r}\n{traceback.format_exc()}",
            EXIT_INVARIANT_BROKEN,
        )
    except (MemoryError, RecursionError) as error:
        # The process's, not the input's: applying on regardless could leave this member's
        # state apart from the others'. A restart applies the same slots again.
        fatal(f"out of memory or stack: {error!r}\n{traceback.format_exc()}")


def time_out(future: asyncio.Future[Any], timeout_s: float) -> None:
    if not future.done():
        message = f"no outcome within {timeout_s:.1f} s; retry with the same entry_id"
        future.set_exception(CommitTimeout(message))
