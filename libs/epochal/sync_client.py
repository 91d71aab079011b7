"""``epochal.Client``: the SDK for threads — the asyncio client's methods, arguments, results and
errors, called without ``await``.

    from epochal import Client

    with Client(["127.0.0.1:9001"]) as client:
        client.write("shop", "carts", {"user": "ann", "item": "tea", "qty": 2})
        rows = client.read("shop", "carts", {"user": "ann"}).rows

Theory of operation
-------------------
A ``Client`` owns one background thread running one event loop, and one ``AsyncClient`` on that
loop; each method is the ``AsyncClient`` method of the same name (``_blocking``), submitted to
the loop (``asyncio.run_coroutine_threadsafe``) while the calling thread waits for its result.
Nothing else is shared and nothing is locked around a call, so any number of threads call at
once: their requests are multiplexed on the client's streams like the tasks of an asyncio
program, and one call waiting on a stopped replica holds up no other. A thread interrupted
while it waits (KeyboardInterrupt) cancels its call.

Fork safety: a process forked from one where the client was created has a copy of the client
but not its thread, and gRPC cannot be used in such a child at all (gRPC's asyncio stack has no
fork support: a new channel in the child hangs or crashes it). So a client refuses to work in a
forked child: its first call there raises ``InvalidRequest`` (rule ``forked``) saying to create
the client after the fork — gunicorn: in the worker (``post_fork``, or no ``--preload``);
multiprocessing: the ``spawn`` start method; Spark: inside the task. The parent's client goes
on as before (``forked``, ``epochal.client``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from epochal.client import AsyncClient, forked
from epochal.errors import InvalidRequest
from epochal.policies import RetryPolicy
from epochal.profiles import ExecutionProfile, Profiles
from epochal.tcm import ClusterMetadata, Table
from epochal.tcm.consistency import Consistency
from epochal.telemetry.context import attached
from epochal.wire.tls import TlsFiles

__all__ = ["Client"]


def _closed(during_the_call: bool = False) -> InvalidRequest:
    if during_the_call:
        return InvalidRequest("the client was closed during the call", rule="closed")
    return InvalidRequest("this client is closed", rule="closed")


P = ParamSpec("P")
R = TypeVar("R")


class _LoopThread:
    """One event loop on a daemon thread (daemon: a client nobody closed does not keep the
    interpreter from exiting)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._submitting = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name=f"epochal-client-{os.getpid()}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, work: Coroutine[Any, Any, R]) -> R:
        if threading.current_thread() is self._thread:
            work.close()
            raise RuntimeError(
                "an epochal.Client method was called from its own event loop (a callback of "
                "the client?): use epochal.AsyncClient in asyncio code"
            )
        if trace.get_current_span().get_span_context().is_valid:
            work = _within(otel_context.get_current(), work)  # the call's span: a child
        with self._submitting:
            if self._stopping:
                work.close()
                raise _closed()
            future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise _closed(during_the_call=True) from None
        except BaseException:
            future.cancel()  # interrupted (or failed): nothing is left running for it
            raise

    def stop(self) -> None:
        """Cancel what still runs (its callers are told the client closed during the call),
        then end the thread."""
        with self._submitting:
            self._stopping = True
        asyncio.run_coroutine_threadsafe(self._cancel_all(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()

    async def _cancel_all(self) -> None:
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _within(parent: otel_context.Context, work: Coroutine[Any, Any, R]) -> R:
    """``work`` in the calling thread's trace context (the loop's thread has its own)."""
    with attached(parent):
        return await work


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Client, P], R]:
    """The ``AsyncClient`` coroutine method ``method`` as a blocking method of ``Client`` (its
    name, signature and docstring too)."""

    def blocking(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        client, runner = self._current()
        return runner.run(method(client, *args, **kwargs))

    functools.update_wrapper(blocking, method)
    return blocking


class Client:
    """A client of one cluster, for any number of threads; the arguments are
    ``AsyncClient``'s."""

    def __init__(
        self,
        seeds: Sequence[str],
        *,
        consistency: Consistency | str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        retry_policy: RetryPolicy | None = None,
        local_dc: str | None = None,
        profiles: Mapping[str, ExecutionProfile] | None = None,
        tls: TlsFiles | None = None,
        insecure: bool = False,
    ) -> None:
        options = {
            "tls": tls,
            "insecure": insecure,
            "consistency": consistency,
            "timeout_s": timeout_s,
            "retries": retries,
            "retry_policy": retry_policy,
            "local_dc": local_dc,
            "profiles": profiles,
        }
        self._arguments: tuple[Sequence[str], dict[str, Any]] = (seeds, options)
        self._pid = os.getpid()
        self._closed = False
        self._runner = _LoopThread()
        self._client = self._make()

    def _make(self) -> AsyncClient:
        seeds, options = self._arguments

        async def make() -> AsyncClient:
            return AsyncClient(seeds, **options)

        try:
            return self._runner.run(make())
        except BaseException:
            self._runner.stop()
            raise

    def _current(self) -> tuple[AsyncClient, _LoopThread]:
        if os.getpid() != self._pid:
            raise forked(self._pid)
        if self._closed:
            raise _closed()
        return self._client, self._runner

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Client:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> Client:
        """As ``AsyncClient.connect``."""
        client, runner = self._current()
        runner.run(client.connect())
        return self

    def close(self) -> None:
        """Close the connections and stop the client's thread (again: nothing)."""
        if self._closed:
            return
        self._closed = True
        if os.getpid() == self._pid:
            try:
                self._runner.run(self._client.close())
            finally:
                self._runner.stop()  # calls still running end with "closed during the call"

    # ------------------------------------------------------------------ the API

    @property
    def seeds(self) -> list[str]:
        return self._current()[0].seeds

    @property
    def metadata(self) -> ClusterMetadata:
        return self._current()[0].metadata

    @property
    def epoch(self) -> int:
        return self._current()[0].epoch

    @property
    def seen_epoch(self) -> int:
        return self._current()[0].seen_epoch

    @property
    def consistency(self) -> Consistency:
        return self._current()[0].consistency

    def table(self, keyspace: str, table: str) -> Table:
        return self._current()[0].table(keyspace, table)

    def suspected(self) -> list[str]:
        return self._current()[0].suspected()

    @property
    def profiles(self) -> Profiles:
        return self._current()[0].profiles

    @property
    def session_hlc(self) -> int:
        return self._current()[0].session_hlc

    def endpoints(
        self, keyspace: str, table: str, partition_key: Mapping[str, Any], *, write: bool = False
    ) -> list[str]:
        return self._current()[0].endpoints(keyspace, table, partition_key, write=write)

    refresh = _blocking(AsyncClient.refresh)
    commit = _blocking(AsyncClient.commit)
    create_keyspace = _blocking(AsyncClient.create_keyspace)
    create_table = _blocking(AsyncClient.create_table)
    add_columns = _blocking(AsyncClient.add_columns)
    drop_table = _blocking(AsyncClient.drop_table)
    drop_keyspace = _blocking(AsyncClient.drop_keyspace)
    write = _blocking(AsyncClient.write)
    write_rows = _blocking(AsyncClient.write_rows)
    delete = _blocking(AsyncClient.delete)
    read = _blocking(AsyncClient.read)
