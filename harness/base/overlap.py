"""Overlapping I/O with work: reading ahead (:func:`prefetch`), writing behind (:class:`WriteBehind`) and
importing what a command's end needs while its lanes run (:func:`import_meanwhile`).

Reading or writing a row group (Parquet decoding and encoding, compression, checksums) releases the
GIL, and so does most of the numpy work around it; scoring or running the lanes on another group
does too. These helpers run the I/O in a thread, bounded: at most ``depth`` items wait, so memory
stays a few groups whatever the corpus size. Items arrive in order; a failure is raised to the
caller in order (reading: in place of the item that failed; writing: at the next call).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Iterator
from queue import Empty, Full, Queue
from typing import Generic, TypeVar

from harness.base.errors import clean_up
from harness.base.workers import Worker

T = TypeVar("T")


class _End:
    """The sentinel type: a producer's "no more items" (a class, so the queue's items can be typed)."""


_END = _End()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def prefetch(items: Iterable[T], depth: int = 1, name: str = "prefetch") -> Iterator[T]:
    """``items``, produced one ahead (``depth`` ahead) in a background thread.

    The iterable is consumed only by that thread. Closing the returned iterator early (a ``break``,
    an exception in the caller) stops the thread after the item it is producing."""
    queue: Queue[T | _Failure | _End] = Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: T | _Failure | _End) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    source = iter(items)

    def work() -> None:
        try:
            for item in source:
                if not put(item):
                    break
            else:
                put(_END)
        except BaseException as exc:  # handed to the consumer, in order
            put(_Failure(exc))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # a generator's own clean-up runs here, in its thread

    worker = Worker(work, name)
    try:
        while True:
            item = queue.get()
            if isinstance(item, _End):
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        with clean_up():  # to the end, through a second Ctrl-C: what the caller closes next, no thread reads
            stop.set()
            while True:  # unblock a producer waiting on a full queue
                try:
                    queue.get_nowait()
                except Empty:
                    break
            worker.join()


class WriteBehind(Generic[T]):
    """Calls ``write(item)`` for every submitted item, in order, in a thread (at most ``depth``
    waiting). A failure is raised by the next :meth:`submit` or by :meth:`close`; after one, the
    remaining items are dropped (the caller aborts what it was writing)."""

    def __init__(self, write: Callable[[T], None], depth: int = 1, name: str = "write-behind") -> None:
        self._write = write
        self._queue: Queue[T | _End] = Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._worker = Worker(self._work, name)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, _End):
                return
            if self._error is None:
                try:
                    self._write(item)
                except BaseException as exc:  # handed to the caller's thread
                    self._error = exc

    def submit(self, item: T) -> None:
        self._raise()
        self._queue.put(item)

    def close(self) -> None:
        """Wait until everything submitted is written; raise a failure."""
        if self._worker.alive:
            self._queue.put(_END)
            self._worker.join()
        self._raise()

    def abort(self) -> None:
        """Stop after the item being written; drop the rest; raise nothing. Returns only once the thread has
        ended, even through a second Ctrl-C (:mod:`harness.base.workers`): the caller then removes the file
        the thread was writing."""
        with clean_up():
            self._error = self._error or RuntimeError("aborted")
            while True:  # the caller is the only producer: once emptied, the queue has room for the end
                try:
                    self._queue.get_nowait()
                except Empty:
                    break
            self._queue.put_nowait(_END)
            self._worker.join(hold=True)

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, RuntimeError("already failed")
            raise error


def meanwhile(work: Callable[[], object], name: str) -> threading.Thread:
    """``work`` in a daemon thread, started now, its failure dropped: work done ahead of its use (numba's
    kernels, an import), whose use does it again if it failed here and raises then, in its own thread."""

    def run() -> None:
        try:
            work()
        except Exception:  # noqa: BLE001 - the use does the work again and raises where it is used
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def import_meanwhile(*modules: str) -> threading.Thread:
    """Import ``modules`` (in order, stopping at the first that fails) while the caller goes on: what a command
    needs only after its lanes (the nightly's report) is imported while the device has work, not after its
    last call (``reports``: 0.07 s). A failed import leaves no module: the real one imports again."""

    def run() -> None:
        for module in modules:
            importlib.import_module(module)

    return meanwhile(run, "import-meanwhile")
