"""Keeping a device busy: workers take the calls in submission order while the host prepares the next.

A device call returns to the host only when the device is done (the in-process backend synchronizes
CUDA; a simulated device sleeps with the GIL released). Run serially, every byte of host work
around a call (packing the next request, validating, unpacking, collecting, writing, hashing) is
time the device waits. Here the calls go to :class:`DeviceQueue`, worker threads that take them
strictly first in, first out; the host meanwhile prepares the next requests and takes the answers of
the previous ones behind it. With one worker (a model that stages, or one that cannot be entered twice)
the device sees exactly the serial order of calls. With two (a model without ``stage`` that two threads
may enter at once: :mod:`lanes.running.calls_in_flight`) the model's own host part of call n+1 (checking the
request, cutting windows, allocating, on a GPU the launches) runs while call n computes: call n+1 is
taken only after call n, but the two may be inside the model together.

:class:`Ordered` is the host side: calls are pushed in device order, each with what to do with its
answer (``take``: log the call, unpack, collect), and the answers are taken in the same order, so
the call log and every output are what the serial path makes (tests/test_pipelined_lanes.py).
How far ahead the host runs is bounded (``max_calls``, ``max_bytes`` of requests not yet taken, and
the runner's groups), so memory stays a few requests, never the corpus. A backend without
``pipelined()`` (a test double, or one whose ``call_many`` keeps its own requests in flight) is
run as before: each stage's calls through ``call_many``, answers taken at once.

Errors: the first call that raises stops the queue: no call taken after it runs (with two workers the
one call already in flight beside it ends, and its answer is dropped), and the exception is raised in
the main thread when that call's answer is taken (the backend's one-line error, naming the request).
An interrupt (Ctrl-C: :func:`check_interrupted`) is seen by the main thread before every push and
take, and by the workers before every call. Leaving the ``with`` drops the queued calls and joins the
workers: no thread outlives a run, failed or not.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from harness.base.errors import HarnessError, check_interrupted, clean_up, interrupt_requested
from harness.base.workers import Worker
from lanes.backends.backend_api import Backend, Call, CallResult

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
    """``workers`` threads running submitted jobs in submission order (FIFO): job i starts only once every job
    before i - workers + 1 has ended, so with one worker each job runs after the previous one has ended, and
    with two at most two consecutive jobs are in flight (job i beside job i - 1, never beside i - 2).

    After a job raises, the jobs after it are not run: their futures fail with :class:`QueueStopped` (with two
    workers the job already in flight beside it ends, and one submitted before it still runs: its answer is
    taken first). Once an interrupt is requested, or the queue is closed, no job starts. :meth:`close` drops
    what is queued and joins the workers. ``setup`` runs first in each worker thread (a CUDA device bound, a
    stream of the worker's own); if it raises, the first job that worker takes fails with its error."""

    def __init__(self, name: str = "device-queue", workers: int = 1, setup: Callable[[], object] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"a device queue needs at least one worker, got {workers}")
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any], int] | None] = queue.SimpleQueue()
        self._closed = False
        self._failed_at: int | None = None  # the first (lowest numbered) job that raised
        self._setup = setup
        self.workers = workers
        self._submitted = 0
        self._turn = threading.Condition()
        self._ended_below = 0  # every job numbered below this has ended (run, failed or dropped)
        self._ended: set[int] = set()  # jobs at or above it that have ended
        self._workers = [Worker(self._work, name if workers == 1 else f"{name} #{i + 1}") for i in range(workers)]

    def submit(self, job: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        if self._closed or self._failed_at is not None:
            future.set_exception(QueueStopped("the device queue is stopped"))
        else:
            self._jobs.put((future, job, self._submitted))
            self._submitted += 1
        return future

    def _dropped(self, number: int) -> bool:
        """Job ``number`` is not to run: the queue is closed, a run is interrupted, or a job before it failed."""
        failed = self._failed_at
        return self._closed or (failed is not None and number > failed) or interrupt_requested() is not None

    def _failed(self, number: int) -> None:
        with self._turn:
            self._failed_at = number if self._failed_at is None else min(self._failed_at, number)
            self._turn.notify_all()

    def _work(self) -> None:
        set_up: BaseException | None = None
        if self._setup is not None:
            try:
                self._setup()
            except BaseException as exc:  # given to the first job this worker takes, raised in the main thread
                set_up = exc
        while True:
            item = self._jobs.get()
            if item is None:
                return
            future, job, number = item
            try:
                self._wait_turn(number)
                if self._dropped(number):
                    future.set_exception(QueueStopped("dropped: an earlier call failed or the run was interrupted"))
                    continue
                if set_up is not None:
                    self._failed(number)
                    future.set_exception(set_up)
                    set_up = None
                    continue
                future.set_running_or_notify_cancel()
                try:
                    future.set_result(job())
                except BaseException as exc:  # given to the main thread, which raises it
                    self._failed(number)
                    future.set_exception(exc)
            finally:
                self._end(number)

    def _wait_turn(self, number: int) -> None:
        """Until every job before ``number - workers + 1`` has ended (at once with one worker: jobs come in order
        and a worker holds one at a time), or the job is dropped. Each wait is one job in flight's end."""
        with self._turn:
            while self._ended_below < number - self.workers + 1 and not self._dropped(number):
                self._turn.wait(timeout=0.1)  # an interrupt is seen within 0.1 s

    def _end(self, number: int) -> None:
        with self._turn:
            self._ended.add(number)
            while self._ended_below in self._ended:
                self._ended.remove(self._ended_below)
                self._ended_below += 1
            self._turn.notify_all()

    def close(self) -> None:
        """Drop the queued jobs (their futures fail) and join the workers, each ending its current job first."""
        with clean_up():  # through a second Ctrl-C (harness.base.workers): no call outlives the run
            with self._turn:
                self._closed = True
                self._turn.notify_all()
            for _ in self._workers:
                self._jobs.put(None)
            for worker in self._workers:
                worker.join()

    @property
    def alive(self) -> bool:
        return any(worker.alive for worker in self._workers)


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
