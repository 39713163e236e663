"""Worker threads whose end is waited for even through a second Ctrl-C.

A command's clean-up joins its worker threads (a Parquet writer, a reader ahead, the device queue)
before it closes or removes what they use. The command line raises a second SIGINT/SIGTERM where it
lands (:mod:`harness.cli`), and CPython 3.11's ``Thread.join``, interrupted so, marks the thread
stopped although it still runs (the clean-up of bpo-45274 releases the running thread's own state
lock): ``is_alive()`` is then False and every later ``join()`` returns at once. Measured in CI:
``corpus synth`` given a SIGTERM at each row group aborted its writer, whose join was interrupted by
the second signal, joined it again at once, and closed the Parquet file while the writer thread was
still writing into it: a segmentation fault.

Here a thread's end is an :class:`threading.Event` that the thread sets as its very last step, and
:func:`outlast` waits for it whatever interrupts the wait: an interruption is held until the thread
has ended, then raised (or, in a clean-up that must go on, dropped: the command line has recorded
the signal and still ends the command as interrupted). Whatever runs after a join therefore finds
its worker ended. The price: a clean-up waits for the item in hand (a row group, one network call,
bounded by the backend's timeout) even through a second Ctrl-C; SIGKILL remains the way out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, TypeVar

from harness.base.errors import clean_up

T = TypeVar("T")


def outlast(wait: Callable[[], object], hold: bool = False) -> None:
    """Call ``wait`` until it returns without being interrupted (a ``KeyboardInterrupt``, which the command
    line's :class:`~harness.base.errors.Interrupted` is); then raise the first interruption, or drop it
    (``hold``: a clean-up that must still remove what it started, the signal being recorded already)."""
    held: KeyboardInterrupt | None = None
    while True:
        try:
            wait()
        except KeyboardInterrupt as exc:
            held = held or exc
            continue
        break
    if held is not None and not hold:
        raise held


class Worker:
    """A daemon thread running ``target`` once; :meth:`join` returns only once ``target`` has returned."""

    def __init__(self, target: Callable[[], object], name: str) -> None:
        self.name = name
        self._ended = threading.Event()

        def run() -> None:
            try:
                target()
            finally:
                self._ended.set()

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """True until ``target`` has returned (never ``Thread.is_alive``, which an interrupted join falsifies)."""
        return not self._ended.is_set()

    def join(self, hold: bool = False) -> None:
        """Wait for the end of ``target``, through interruptions (see :func:`outlast`)."""
        outlast(self._ended.wait, hold)


def settle(futures: Iterable[Future[Any]], hold: bool = False) -> None:
    """Wait until every one of ``futures`` is done (their results and errors are left in them), through
    interruptions (see :func:`outlast`)."""
    pending = list(futures)
    outlast(lambda: wait_futures(pending), hold)


class SettlingPool(ThreadPoolExecutor):
    """A thread pool whose ``shutdown`` (the end of its ``with``) returns only once every task it was given
    has ended, through interruptions: ``ThreadPoolExecutor.shutdown`` joins its threads with
    ``Thread.join`` (see the module's doc). Tasks not yet started when the pool is left by an exception
    are cancelled."""

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "") -> None:
        super().__init__(max_workers, thread_name_prefix)
        self._given: list[Future[Any]] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future = super().submit(fn, *args, **kwargs)
        self._given = [f for f in self._given if not f.done()]  # bounded by what is in flight, not by the run
        self._given.append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with clean_up():
            super().shutdown(wait=False, cancel_futures=cancel_futures)
            if wait:
                settle(self._given)

    def __exit__(self, kind: object, exc: object, tb: object) -> bool | None:
        self.shutdown(wait=True, cancel_futures=exc is not None)
        return None
