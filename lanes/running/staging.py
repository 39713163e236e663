"""Staging a request on the device while the previous one computes.

A model that stages (``stage(request, to_device) -> compute``, :func:`lanes.models.model_api.staged_entry`)
does its host work (checking the request, cutting windows) when the call is submitted, in the caller's
thread, and hands each input array to ``to_device``; the returned ``compute`` is the device's part,
run later by the device queue's worker. What ``to_device`` does is the backend's, made here:

- on the CPU: ``torch.from_numpy`` (the arrays are the tensors; nothing is copied): the host work of
  call n+1 then runs while call n computes in the worker;
- on CUDA: the array is copied into a pinned (page-locked) host buffer from a small ring, and from
  there to the device with ``non_blocking=True`` on a copy stream of its own; an event recorded on
  that stream after the request's last input is what the compute stream waits for
  (:meth:`Staged.run`), so the copy of request n+1 overlaps the compute of request n. A pinned buffer
  is reused only once its copy has completed (its event), and the ring holds at most
  :data:`PINNED_BUFFERS` buffers, so pinned memory stays a few requests; the device tensors are
  marked used by the compute stream (``record_stream``), so the caching allocator does not hand
  their memory to another tensor before the compute that reads them has run.

The numbers are the same bitwise as ``infer``'s (the model's ``infer`` is ``stage`` with a plain
``to_device``): the same arrays reach the same network; only when and on which stream they are copied
differs. ``resident_bytes`` counts the device bytes staged and not yet run, so a call's peak memory
can be given without the inputs staged for the calls behind it (:mod:`lanes.running.memory` measures peaks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.data.geometry import geometry_of
from harness.numerics import LazyModule

if TYPE_CHECKING:
    import torch
else:
    torch = LazyModule("torch")

ToDevice = Callable[[np.ndarray], "torch.Tensor"]
PINNED_BUFFERS = 8  # pinned host buffers at most: requests whose copies are issued and not yet complete
_ALLOCATOR_ROUNDING = 512  # bytes: torch's caching allocator rounds every block up to a multiple of this


def host_tensors(device: Any) -> ToDevice:
    """The plain ``to_device`` (``infer``'s): ``torch.from_numpy``, then ``.to(device)``, synchronous."""

    def to_device(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.require(array, requirements="W")).to(device)

    return to_device


class InferOnly:
    """A model behind its ``infer`` alone (no ``stage``: called whole, in the device queue, one call at a time):
    the unstaged twin a staged run is compared with (tests/test_staging.py, benchmarks/gpu_copy_overlap.py)."""

    concurrent_calls = False  # lanes.running.calls_in_flight: the serial path, as before staging

    def __init__(self, inner: Any) -> None:
        self.inner, self.geometry, self.fingerprint = inner, geometry_of(inner), inner.fingerprint

    def infer(self, request: Any) -> dict[str, np.ndarray]:
        return dict(self.inner.infer(request))


@dataclass
class Staged:
    """One request's inputs on the device (or on their way there) and what its compute must wait for."""

    nbytes: int = 0
    tensors: list[Any] = field(default_factory=list)
    ready: Any = None  # a torch.cuda.Event recorded on the copy stream after the last input (CUDA only)
    device: Any = None
    owner: Stager | None = None  # whose resident bytes these inputs count in until they have run

    def behind(self) -> int:
        """Device bytes staged for the other calls (those behind this one): not this call's peak."""
        return 0 if self.owner is None else max(0, self.owner.resident_bytes - self.nbytes)

    def run(self, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """``compute`` on this thread's current stream, once the copies it reads have landed; then these
        inputs no longer count as resident (:meth:`Stager.ran`), whether compute answered or raised."""
        try:
            if self.ready is not None:
                stream = torch.cuda.current_stream(self.device)
                stream.wait_event(self.ready)
                for tensor in self.tensors:
                    tensor.record_stream(stream)
            return compute()
        finally:
            if self.owner is not None:
                self.owner.ran(self)


class Stager:
    """Makes ``to_device`` for the requests of one pipelined backend (see the module's doc)."""

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self._lock = threading.Lock()
        self._resident = 0
        self._copy_stream: Any = None
        self._ring: list[_PinnedBuffer] = []

    @property
    def resident_bytes(self) -> int:
        """Device bytes of inputs staged and not yet run (what a call's peak must not be charged)."""
        with self._lock:
            return self._resident

    def stage(
        self, stage: Callable[[ToDevice], Callable[[], dict[str, np.ndarray]]]
    ) -> tuple[Staged, Callable[[], dict[str, np.ndarray]]]:
        """Run ``stage(to_device)`` (the model's host part) now; its inputs copied as the module's doc says."""
        staged = Staged(device=self.device, owner=self)
        if not self.cuda:
            return staged, stage(host_tensors(self.device))
        with torch.cuda.device(self.device):
            if self._copy_stream is None:
                self._copy_stream = torch.cuda.Stream(self.device)
            used: list[_PinnedBuffer] = []

            def to_device(array: np.ndarray) -> torch.Tensor:
                source = torch.from_numpy(np.require(array, requirements=["C", "W"]))
                nbytes = source.numel() * source.element_size()
                with torch.cuda.stream(self._copy_stream):
                    target = torch.empty(source.shape, dtype=source.dtype, device=self.device)
                    if nbytes:
                        buffer = self._pinned(nbytes)
                        buffer.claimed = True  # not handed out again before this request's event is recorded
                        used.append(buffer)
                        pinned = buffer.host[:nbytes].view(source.dtype).view(source.shape)
                        pinned.copy_(source)
                        target.copy_(pinned, non_blocking=True)
                staged.tensors.append(target)
                staged.nbytes += _allocated(nbytes)
                return target

            try:
                compute = stage(to_device)
            finally:  # on a failure too: copies may be in flight from the buffers already used
                staged.ready = torch.cuda.Event()
                staged.ready.record(self._copy_stream)
                for buffer in used:
                    buffer.busy_until, buffer.claimed = staged.ready, False
        with self._lock:
            self._resident += staged.nbytes
        return staged, compute

    def ran(self, staged: Staged) -> None:
        """``staged``'s call has run: its inputs no longer count as resident for the calls after it."""
        with self._lock:
            self._resident -= staged.nbytes
        staged.tensors.clear()

    def _pinned(self, nbytes: int) -> _PinnedBuffer:
        """A pinned buffer of at least ``nbytes`` whose last copy has completed (waits for the oldest one
        when the ring is full and every buffer is in flight)."""
        for buffer in self._ring:
            if buffer.free() and buffer.host.numel() >= nbytes:
                return buffer
        idle = [b for b in self._ring if not b.claimed]  # oldest first
        if len(self._ring) >= PINNED_BUFFERS and idle:
            victim = ([b for b in idle if b.free()] or idle)[0]
            victim.wait()  # its copy has been read by the device: the memory can go
            self._ring.remove(victim)
        size = 1 << max(20, (nbytes - 1).bit_length())  # whole powers of two from 1 MiB: few reallocations
        buffer = _PinnedBuffer(self._allocate_pinned(size))
        self._ring.append(buffer)
        return buffer

    def _allocate_pinned(self, size: int) -> Any:
        return torch.empty(size, dtype=torch.uint8, pin_memory=True)


@dataclass
class _PinnedBuffer:
    host: Any  # a pinned uint8 tensor
    busy_until: Any = None  # the event after which its last copy has been read by the device
    claimed: bool = False  # taken by the request being staged (its event is not recorded yet)

    def free(self) -> bool:
        return not self.claimed and (self.busy_until is None or bool(self.busy_until.query()))

    def wait(self) -> None:
        if self.busy_until is not None:
            self.busy_until.synchronize()


def _allocated(nbytes: int) -> int:
    return -(-max(nbytes, 1) // _ALLOCATOR_ROUNDING) * _ALLOCATOR_ROUNDING
