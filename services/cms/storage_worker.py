"""The one thread that runs a member's storage calls, with acceptor writes first.

Two queues, one thread. Acceptor writes (``submit_vote``) sit on the commit path, so they run
before anything else waiting. Everything else (``submit``: lazy applied-state writes, state
transfer installs, reads) runs in submission order, so a read sees every write submitted before
it. Letting a vote overtake queued applied-state writes is safe: those only add log rows and
forget accepted slots that are already chosen and applied, which a vote never touches (the core
does not re-accept a slot it knows is chosen).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class StorageWorker:
    def __init__(self, name: str) -> None:
        self._votes: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._ordered: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit_vote(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._put(self._votes, function, args)

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._put(self._ordered, function, args)

    def _put(
        self, queue: deque, function: Callable[..., Any], args: tuple[Any, ...]
    ) -> Future[Any]:  # type: ignore[type-arg]
        future: Future[Any] = Future()
        with self._wake:
            if self._closing:
                raise RuntimeError("storage worker is shut down")
            queue.append((future, function, args))
            self._wake.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._wake:
                while not (self._votes or self._ordered or self._closing):
                    self._wake.wait()
                if self._votes:
                    job = self._votes.popleft()
                elif self._ordered:
                    job = self._ordered.popleft()
                else:
                    return  # closing and drained
            future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as error:
                future.set_exception(error)

    def shutdown(self) -> None:
        """Run what is queued, then stop the thread."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
