"""The backend seam: what actually runs a request. Both lanes of a comparison share one.

A backend takes a wire request and returns the contract's output, timed. The in-process
backend runs the model object in this process (CPU or a CUDA device); the Triton backend
(:mod:`lanes.backends.triton.triton_backend`) sends the same request over HTTP. Numeric settings are applied
by the backend around every call, from the release configuration, and given back after it: a run never
inherits a flag by accident, and the process keeps its own (:meth:`InProcessBackend.numerics_applied` holds them
around a whole recording or run).

Optional: ``pipelined()``, a context giving ``submit(call) -> ticket`` whose calls are taken in submission
order while the caller prepares the next (:mod:`lanes.running.device_queue`; the in-process backend has it: one call
in flight for a model that stages or cannot be entered twice, two for one that can,
:mod:`lanes.running.calls_in_flight`).
A backend without it is run stage by stage through ``call_many``, as before.

A call's figures with two in flight are what one device gives it: its time runs from its start, or from the end
of the call that ended before it if that is later, to its end (the wait behind the call ahead is not counted,
so the calls' times add up to the device's busy time, as one at a time); its peak device memory is read since
the last moment no other call was in flight (an upper bound of its own: it may include the other call's).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.base.errors import BackendError, HarnessError, check_interrupted
from harness.data.geometry import Geometry, geometry_of
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from harness.data.response import check_response
from harness.host.concurrent_entry import DEFAULT_WAIT_S
from harness.numerics import LazyModule, in_force
from lanes.backends.backend_api import Call, CallResult
from lanes.models.model_api import Model, Stage, describe, staged_entry
from lanes.running.calls_in_flight import MAX_IN_FLIGHT, InFlight, decide, say
from lanes.running.device_queue import DeviceQueue
from lanes.running.staging import Staged, Stager

if TYPE_CHECKING:
    import torch

    from harness.host.numerics_scope import NumericsScope
else:  # imported on first use (a CUDA device): a model that is not a torch network never pays its start-up
    torch = LazyModule("torch")


@dataclass(frozen=True)
class _Ticket:
    """A call in the device queue: ``result()`` is its :class:`CallResult`, the answer checked here."""

    future: Future
    op: Op
    windows: int
    rows: int
    where: str
    geometry: Geometry

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> CallResult:
        outputs, wall, peak = self.future.result()
        return CallResult(
            check_response(self.op, self.windows, self.rows, outputs, self.geometry, self.where), wall, peak
        )


class InProcessBackend:
    """Runs the model in this process. ``device`` is where the model lives (cpu, cuda:N).

    ``calls_in_flight``: how many calls :meth:`pipelined` keeps in flight (1 or 2; None: decided once, before
    the first pipelined call, by :func:`lanes.running.calls_in_flight.decide`, its note given to ``note``);
    ``entry_wait_s``: how long that decision's check waits for a second call to come into the model."""

    name = "in-process"
    concurrency = 1  # requests the lanes hand over at once (call_many): one; pipelined() may keep two in flight

    def __init__(
        self,
        model: Model,
        numerics: NumericSettings,
        device: str = "cpu",
        calls_in_flight: int | None = None,
        note: Callable[[str], None] = say,
        entry_wait_s: float = DEFAULT_WAIT_S,
    ) -> None:
        self.model = model
        self.numerics = numerics
        self.device = device
        self.geometry = geometry_of(model)
        self.fingerprint = model.fingerprint
        self._cuda = device.startswith("cuda")
        # requests staged at submission and not yet run, by identity, in submission order (one request object
        # may be sent twice): only inside pipelined(), whose calls run in that order
        self._staged_calls: dict[int, deque[tuple[Staged, Callable[[], dict]]]] = {}
        if calls_in_flight is not None and calls_in_flight not in (1, MAX_IN_FLIGHT):
            raise ValueError(f"calls_in_flight: 1 or {MAX_IN_FLIGHT}, got {calls_in_flight}")
        self._in_flight = None if calls_in_flight is None else InFlight(calls_in_flight, "given")
        self._note, self._entry_wait_s = note, entry_wait_s
        self._overlap = _Overlap()
        self._two_streams = False  # CUDA, two calls in flight: each worker on a stream of its own

    @property
    def in_flight(self) -> InFlight:
        """How many calls :meth:`pipelined` keeps in flight, and how that was decided (decided once, here)."""
        if self._in_flight is None:
            # describe() is the model API's free-form mapping (a team's model may give no name)
            name = f"model {describe(self.model).get('name', '?')!r}"
            found = decide(self.model, self.geometry, self._probe_call, name, self._entry_wait_s, self._bind_thread)
            if found.note is not None:
                self._note(found.note)
            self._in_flight = found
        return self._in_flight

    def _probe_call(self, request: Mapping[str, np.ndarray]) -> dict[str, object]:
        """One synthetic block's OP 0 call, as the lanes make it; the request is not read here (the probe sees the
        model's own first read of it), and its windows are a block's."""
        where = "one synthetic block (may two calls be in flight at once?)"
        result = self.call(Op.SEGMENTATION, request, self.geometry.windows_per_block, 0, where)
        return {Op.SEGMENTATION.output_name: result.output}

    def _bind_thread(self) -> None:
        if self._cuda:
            torch.cuda.set_device(torch.device(self.device))  # the current device is per thread

    def numerics_applied(self) -> NumericsScope:
        """This backend's numeric settings in force for a ``with`` block, the process's own back after it: what
        a recording, a run or a nightly holds around its work
        (:func:`lanes.backends.backend_numerics.backend_numerics`),
        so the model's modules hooked between calls (module floors, localisation) run under them too."""
        return self.numerics.applied()

    @property
    def device_kind(self) -> str:
        if self._cuda:
            return torch.cuda.get_device_name(torch.device(self.device))
        return "cpu"

    def call(self, op: Op, request: Mapping[str, np.ndarray], windows: int, rows: int, where: str) -> CallResult:
        check_interrupted()
        outputs, wall, peak = self._execute(request, where)
        output = check_response(op, windows, rows, outputs, self.geometry, where)
        return CallResult(output, wall, peak)

    def _execute(self, request: Mapping[str, np.ndarray], where: str) -> tuple[dict, float, int | None]:
        """The device's part of a call: the model's outputs, its own seconds and peak device bytes.

        ``wall`` is the call alone, from the model's start to its end (CUDA synchronized on both
        sides), in whichever thread runs it: never the time a call waited in a queue. A request staged
        when it was submitted (:meth:`pipelined`) runs its staged compute here, in its turn."""
        queue = self._staged_calls.get(id(request))
        if not queue:
            return self._timed(lambda: self.model.infer(request), where)
        staged, compute = queue.popleft()
        if not queue:
            del self._staged_calls[id(request)]
        return self._timed(compute, where, staged)

    def _timed(
        self, run: Callable[[], dict], where: str, staged: Staged | None = None
    ) -> tuple[dict, float, int | None]:
        """``run`` timed. Staged (:mod:`lanes.running.staging`), the host's part of the call was done when it was
        submitted: ``wall`` is the wait for its inputs' copy, the compute and the answer's copy back, and
        CUDA is synchronized on this thread's stream only (the copy stream meanwhile carries the next
        requests' inputs); the peak leaves out the inputs already staged for the calls behind this one
        (those staged while it runs are counted: the peak is an upper bound of its own). The numeric settings
        are in force for the call alone (and for whatever holds :meth:`numerics_applied` around it)."""
        with self.numerics.applied():
            return self._timed_applied(run, where, staged)

    def _timed_applied(
        self, run: Callable[[], dict], where: str, staged: Staged | None = None
    ) -> tuple[dict, float, int | None]:
        behind = 0
        if self._cuda:
            self._synchronize(staged)
            behind = 0 if staged is None else staged.behind()
        reset = functools.partial(torch.cuda.reset_peak_memory_stats, self.device) if self._cuda else None
        start = self._overlap.enter(reset)
        try:
            try:
                outputs = run() if staged is None else staged.run(run)
            except HarnessError:
                raise
            except Exception as exc:  # a model may raise anything; name the request
                raise _model_raised(where, exc) from exc
            if self._cuda:
                self._synchronize(staged)
            peak = int(torch.cuda.max_memory_allocated(self.device)) - behind if self._cuda else None
        finally:
            wall = self._overlap.leave(start)
        return outputs, wall, peak

    def _synchronize(self, staged: Staged | None) -> None:
        if staged is None and not self._two_streams:
            torch.cuda.synchronize(self.device)
        else:  # this call's stream only: not the copy stream (the next requests' inputs), nor the other worker's
            torch.cuda.current_stream(torch.device(self.device)).synchronize()

    def call_many(self, calls: Sequence[Call]) -> list[CallResult]:
        """One after the other: one model in one process runs one request at a time."""
        return [self.call(*c) for c in calls]

    @contextmanager
    def pipelined(self) -> Iterator[Callable[[Call], _Ticket]]:
        """``submit(call) -> ticket``: the calls are taken in submission order by the device queue's workers
        (:class:`lanes.running.device_queue.DeviceQueue`) while the caller prepares the next: one worker (a model that
        stages, or one that cannot be entered twice: the calls run one at a time) or two (:attr:`in_flight`:
        a model's host part of one call beside the other's device part; on CUDA each worker on a stream of its
        own). A ticket's ``result()`` waits for its call and checks the answer in the caller's thread (host
        work kept off the device's path). Leaving the ``with`` drops what is queued and joins the workers."""

        stage = staged_entry(self.model)
        workers = 1 if stage is not None else self.in_flight.calls  # a staging model overlaps on its own
        self._two_streams = self._cuda and workers > 1

        def bind() -> None:
            if self._cuda and not getattr(local, "bound", False):
                self._bind_thread()
                if workers > 1:  # each worker issues its calls on a stream of its own (current streams are per thread)
                    torch.cuda.set_stream(torch.cuda.Stream(torch.device(self.device)))
                local.bound = True

        def execute(request: Mapping[str, np.ndarray], where: str) -> tuple[dict, float, int | None]:
            bind()
            return self._execute(request, where)

        local = threading.local()
        device_queue = DeviceQueue(f"device-queue {self.device}", workers, bind)
        stager = Stager(self.device) if stage is not None else None

        def submit(call: Call) -> _Ticket:
            op, request, windows, rows, where = call
            job: Callable[[], tuple[dict, float, int | None]]
            if stage is None or stager is None:
                job = functools.partial(execute, request, where)
            else:
                job = self._staged_job(stage, stager, request, where, bind)
            return _Ticket(device_queue.submit(job), op, windows, rows, where, self.geometry)

        try:
            yield submit
        finally:
            device_queue.close()
            self._staged_calls.clear()  # calls dropped by a failure or an interrupt
            self._two_streams = False

    def _staged_job(
        self, stage: Stage, stager: Stager, request: Mapping[str, np.ndarray], where: str, bind: Callable[[], None]
    ) -> Callable[[], tuple[dict, float, int | None]]:
        """Stage ``request`` now (the model's host part, in the submitting thread; on CUDA its inputs' copy
        issued, :mod:`lanes.running.staging`); the job runs the device's part. A failure while staging is raised
        by the job, in its turn: the calls before it run, and it is raised where its answer is taken."""
        try:
            with self.numerics.applied():  # the model's host part runs here: under the settings, as its compute
                staged, compute = stager.stage(lambda to_device: stage(request, to_device))
        except HarnessError as exc:
            failure: BaseException = exc
        except Exception as exc:  # a model may raise anything; name the request
            failure = _model_raised(where, exc)
            failure.__cause__ = exc
        else:
            self._staged_calls.setdefault(id(request), deque()).append((staged, compute))

            def job() -> tuple[dict, float, int | None]:
                bind()
                return self._execute(request, where)  # the staged compute, found by the request

            return job

        def fail() -> tuple[dict, float, int | None]:
            raise failure

        return fail

    def environment(self) -> dict:
        # read back in this thread what every call applies before it runs (_execute): torch's thread count is
        # OpenMP's, per thread, and the calls may have run in the device queue's worker while this thread last
        # applied another backend's settings (two backends in one process)
        in_flight = self.in_flight.calls  # decided before the settings are read back (its check calls the model)
        with self.numerics.applied():
            return {
                "backend": self.name,
                "device": self.device,
                "calls_in_flight": in_flight,
                "device_kind": self.device_kind,
                "model": describe(self.model),
                "numerics_requested": self.numerics.to_dict(),
                "numerics_in_force": in_force(self.device, self.model),
            }

    def close(self) -> None:
        pass


class _Overlap:
    """The calls inside the model now, as one device sees them (the module doc): each call's time from its start,
    or the previous end if later, to its end; torch's peak counter reset only when no other call is in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._last_end = float("-inf")

    def enter(self, reset_peak: Callable[[], None] | None) -> float:
        """A call starts: its start time (the peak counter reset first if it is the only call in flight)."""
        with self._lock:
            self._inside += 1
            if reset_peak is not None and self._inside == 1:
                reset_peak()
            return time.perf_counter()

    def leave(self, start: float) -> float:
        """A call ended (or raised): its seconds on the device (the module doc)."""
        with self._lock:
            self._inside -= 1
            end = time.perf_counter()
            wall = end - max(start, self._last_end)
            self._last_end = max(self._last_end, end)
            return max(wall, 0.0)


def _model_raised(where: str, exc: Exception) -> BackendError:
    """A model's own exception, named by the request it was answering (staged or not: one message)."""
    return BackendError(f"{where}: model raised {type(exc).__name__}: {exc}")
