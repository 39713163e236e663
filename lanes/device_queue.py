"""Keeping a device busy: one worker runs the calls in submission order while the host prepares the next.

A device call returns to the host only when the device is done (the in-process backend synchronizes
CUDA; a simulated device sleeps with the GIL released). Run serially, every byte of host work
around a call (packing the next request, validating, unpacking, collecting, writing, hashing) is
time the device waits. Here the calls go to :class:`DeviceQueue`, one worker thread that executes
them strictly first in, first out, so the device sees exactly the serial order of calls; the host
meanwhile prepares the next requests and takes the answers of the previous ones behind it.

:class:`Ordered` is the host side: calls are pushed in device order, each with what to do with its
answer (``take``: log the call, unpack, collect), and the answers are taken in the same order, so
the call log and every output are what the serial path makes (tests/test_pipelined_lanes.py).
How far ahead the host runs is bounded (``max_calls``, ``max_bytes`` of requests not yet taken, and
the runner's groups), so memory stays a few requests, never the corpus. A backend without
``pipelined()`` (a test double, or one whose ``call_many`` keeps its own requests in flight) is
run as before: each stage's calls through ``call_many``, answers taken at once.

Errors: the first call that raises stops the worker's queue: nothing after it runs on the device,
and the exception is raised in the main thread when that call's answer is taken (the backend's
one-line error, naming the request). An interrupt (Ctrl-C: :func:`check_interrupted`) is seen by
the main thread before every push and take, and by the worker before every call. Leaving the
``with`` drops the queued calls and joins the worker: no thread outlives a run, failed or not.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from harness.data.errors import HarnessError, check_interrupted, clean_up, interrupt_requested
from harness.data.workers import Worker
from lanes.backend_api import Backend, Call, CallResult

T = TypeVar("T")
Take = Callable[[CallResult], None]

MAX_AHEAD_CALLS = 64  # calls submitted and not yet taken, at most
MAX_AHEAD_BYTES = 256 * 2**20  # of their requests (a full-geometry block is up to ~5 MiB of audio): at least 2


class Ticket(Protocol):
    """A submitted call: ``result()`` waits for it (and checks the answer in the caller's thread)."""

    def done(self) -> bool: ...

    def result(self) -> CallResult: ...


Submit = Callable[[Call], Ticket]


class QueueStopped(HarnessError):
    """A call dropped because an earlier call failed or the run was interrupted (never reported: the
    earlier error is)."""


class DeviceQueue:
    """One worker thread running submitted jobs strictly in submission order (FIFO).

    After a job raises, or once an interrupt is requested, the jobs still queued are not run: their
    futures fail with :class:`QueueStopped`. :meth:`close` drops what is queued and joins the worker."""

    def __init__(self, name: str = "device-queue") -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._stopped = False
        self._worker = Worker(self._work, name)

    def submit(self, job: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        if self._stopped:
            future.set_exception(QueueStopped("the device queue is stopped"))
        else:
            self._jobs.put((future, job))
        return future

    def _work(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            future, job = item
            if self._stopped or interrupt_requested():
                self._stopped = True
                future.set_exception(QueueStopped("dropped: an earlier call failed or the run was interrupted"))
                continue
            future.set_running_or_notify_cancel()
            try:
                future.set_result(job())
            except BaseException as exc:  # given to the main thread, which raises it
                self._stopped = True
                future.set_exception(exc)

    def close(self) -> None:
        """Drop the queued jobs (their futures fail) and join the worker, which ends its current job first."""
        with clean_up():  # through a second Ctrl-C (harness.data.workers): no call outlives the run
            self._stopped = True
            self._jobs.put(None)
            self._worker.join()

    @property
    def alive(self) -> bool:
        return self._worker.alive


@dataclass
class _Entry:
    ticket: Ticket | None  # None: a host action (``take`` gets no result) run in its turn
    take: Callable[[Any], None]
    nbytes: int


class Ordered:
    """Calls pushed in device order; their answers taken in that order (see the module doc)."""

    def __init__(
        self,
        backend: Backend,
        submit: Submit | None,
        max_calls: int = MAX_AHEAD_CALLS,
        max_bytes: int = MAX_AHEAD_BYTES,
    ) -> None:
        self.backend, self._submit = backend, submit
        self.max_calls, self.max_bytes = max(1, max_calls), max_bytes
        self._entries: deque[_Entry] = deque()
        self._calls = self._bytes = 0
        self.pushed = 0  # entries pushed so far: a mark for :meth:`wait`
        self._taken = 0

    @property
    def pipelined(self) -> bool:
        return self._submit is not None

    def stage(self, items: Iterable[tuple[Call, Take]]) -> int:
        """Send one lane's calls of a stage (made as they are asked for: packing the next overlaps the
        device); each answer goes to its ``take``, in order. Returns a mark for :meth:`wait`."""
        if self._submit is None:  # as before pipelining: the stage through call_many, answers taken at once
            items = list(items)
            if not items:
                return self.pushed
            check_interrupted()
            results = self.backend.call_many([call for call, _ in items])
            for (_, take), result in zip(items, results, strict=True):
                take(result)
            self.pushed += len(items)
            self._taken = self.pushed
            return self.pushed
        for call, take in items:
            check_interrupted()
            nbytes = _nbytes(call)
            self._entries.append(_Entry(self._submit(call), take, nbytes))
            self.pushed += 1
            self._calls += 1
            self._bytes += nbytes
            while self._calls > 1 and (self._calls > self.max_calls or self._bytes > self.max_bytes):
                self._take_one()
            self._take_ready()
        return self.pushed

    def then(self, action: Callable[[], None]) -> int:
        """Run ``action`` (host work: a group's outputs to their sinks, a progress tick) once every call
        pushed before it has been taken."""
        if self._submit is None or not self._entries:
            action()
            self.pushed += 1
            self._taken = self.pushed
            return self.pushed
        self._entries.append(_Entry(None, lambda _: action(), 0))
        self.pushed += 1
        return self.pushed

    def wait(self, mark: int) -> None:
        """Take every answer up to ``mark`` (what a later stage's requests are made from)."""
        while self._taken < mark:
            self._take_one()

    def drain(self) -> None:
        self.wait(self.pushed)

    def _take_ready(self) -> None:
        while self._entries and (self._entries[0].ticket is None or self._entries[0].ticket.done()):
            self._take_one()

    def _take_one(self) -> None:
        check_interrupted()
        entry = self._entries[0]
        result = entry.ticket.result() if entry.ticket is not None else None
        self._entries.popleft()
        self._taken += 1
        if entry.ticket is not None:
            self._calls -= 1
            self._bytes -= entry.nbytes
        entry.take(result)


@contextmanager
def ordered(backend: Backend, pipeline: bool = True, **bounds: int) -> Iterator[Ordered]:
    """An :class:`Ordered` over ``backend``: pipelined when the backend offers ``pipelined()`` (and
    ``pipeline``), serial otherwise. On exit (normal or not) the device queue is closed and joined."""
    opener = getattr(type(backend), "pipelined", None)  # on the class: a wrapper's __getattr__ is not one
    with ExitStack() as stack:
        submit = None
        if pipeline and callable(opener):
            context: AbstractContextManager[Submit] = opener(backend)
            submit = stack.enter_context(context)
        yield Ordered(backend, submit, **bounds)


def _nbytes(call: Call) -> int:
    return sum(int(getattr(t, "nbytes", 0)) for t in call[1].values() if t is not None)
