"""Any model, with every call's device time written to a timeline: the real device's busy fraction.

    --model 'lanes.running.device_timeline:wrap?inner=full&timeline=/tmp/busy.bin' --device cuda:0

The simulated device (:mod:`lanes.simulation.simulated_device`) says how busy the harness keeps a device that costs
``C0 + C1 x windows``; on a GPU the question is the same for the real network. This wrapper loads the
``inner`` model spec (``full``, ``small``, ``package.module:factory`` without its own ``?`` arguments, or a
TorchScript file) on the config's device and seed, answers exactly as it does (same outputs, same
fingerprint: a golden of the inner model is this model's golden), and measures each call:

- on CUDA: two ``torch.cuda.Event(enable_timing=True)`` recorded on the current stream around the
  call, their ``elapsed_time`` once the call returned (the model's answers are host arrays, so the
  call has synchronised). The events bracket everything the stream did inside the call: kernels and
  copies, and also any gap while the adapter prepared inputs on the host with the stream idle, so
  the figure is an upper bound of the device's busy time in that call;
- elsewhere (the CPU fallback): ``time.perf_counter`` around the call, the call's wall.

At exit it appends every call as ``(start, start + device seconds)``, two float64 on the host's
``time.perf_counter`` clock: the format of the simulated device's timeline, so
``benchmarks/bench_device_busy.py`` reads both alike (busy = the intervals' union, span = first start
to last end). Calls are synchronous, so the intervals do not overlap unless the harness has requests
in flight together. Optional attributes (``torch_modules``, ``describe``, the declared execution)
are the inner model's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from harness.base.errors import ModelError
from harness.data.geometry import geometry_of
from lanes.models.model_api import Model, load_model, staged_entry
from lanes.simulation.simulated_device import IntervalLog


class DeviceTimeline:
    """``inner``'s answers; each call's device time (CUDA events, or wall on the CPU) kept for a timeline.

    It stages exactly when ``inner`` does (:class:`StagedTimeline`, chosen on construction): a wrapper with a
    ``stage`` of its own would send a model that does not stage through the one-worker staged path, never the
    two calls in flight it gets unwrapped (lanes/running/calls_in_flight.py; its ``concurrent_calls`` is the inner
    model's)."""

    def __new__(cls, inner: Model, device: str, timeline: str | None) -> DeviceTimeline:
        if cls is DeviceTimeline and staged_entry(inner) is not None:
            cls = StagedTimeline
        return super().__new__(cls)

    def __init__(self, inner: Model, device: str, timeline: str | None) -> None:
        self._log = IntervalLog("device timeline", timeline)
        self._inner = inner
        self._timer = _cuda_timer(device) or _wall_timer
        self.clock = "cuda-events" if self._timer is not _wall_timer else "perf_counter"
        self.geometry = geometry_of(inner)
        self.fingerprint = inner.fingerprint

    def __getattr__(self, name: str) -> Any:  # only for what this class lacks: the inner model's extras
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._logged(lambda: self._inner.infer(request))

    def _logged(self, call: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """``call``'s answer; its device time appended to the timeline."""
        start = time.perf_counter()
        out, seconds = self._timer(call)
        self._log.add(start, start + seconds)
        return out

    def intervals(self) -> np.ndarray:
        """[calls, 2] float64: every call's (start, start + device seconds), in call order."""
        return self._log.intervals()

    def write_timeline(self) -> None:
        self._log.write()


class StagedTimeline(DeviceTimeline):
    """The wrapper of a model that stages: its host part at submission, its device part timed as ``infer`` is."""

    def stage(
        self, request: Mapping[str, np.ndarray], to_device: Callable[[np.ndarray], Any]
    ) -> Callable[[], dict[str, np.ndarray]]:
        """The inner model's host part now (lanes/models/model_api.py); the device's part timed as ``infer`` is."""
        inner = staged_entry(self._inner)
        if inner is None:  # the inner model lost its stage since (a patched instance): called whole
            return lambda: self.infer(request)
        compute = inner(request, to_device)
        return lambda: self._logged(compute)


Timer = Callable[[Callable[[], dict[str, np.ndarray]]], tuple[dict[str, np.ndarray], float]]


def _wall_timer(call: Callable[[], dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], float]:
    start = time.perf_counter()
    out = call()
    return out, time.perf_counter() - start


def _cuda_timer(device: str) -> Timer | None:
    """A timer of CUDA events on ``device``'s current stream; None off CUDA (or without torch's CUDA)."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    dev = torch.device(device)

    def timed(call: Callable[[], dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], float]:
        stream = torch.cuda.current_stream(dev)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record(stream)
        out = call()
        end.record(stream)
        end.synchronize()
        return out, float(begin.elapsed_time(end)) / 1e3  # ms -> s

    return timed


def wrap(inner: str = "full", timeline: str | None = None, seed: int = 0, device: str = "cpu") -> DeviceTimeline:
    """``inner`` (a model spec) on ``device``, its calls timed; ``timeline``: the file to append them to."""
    if not isinstance(inner, str) or not inner or "?" in inner:
        raise ModelError(f"device timeline: inner must be a model spec without '?' arguments, got {inner!r}")
    return DeviceTimeline(load_model(inner, seed=seed, device=device), device, timeline)
