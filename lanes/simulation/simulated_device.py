"""A simulated accelerator: the null network's answers, at a device's cost per call, leaving the host free.

On a GPU the question is not what the harness costs but whether the device ever waits for it: a
CUDA call returns to the host while the device computes, so host work (packing, masks, Parquet,
hashing) is free exactly when it overlaps a call in flight. This model measures that without a
GPU. A call has the two parts a team's model has, and no ``stage`` (as a team's model has none):

- the host part: the request checked and answered as :mod:`lanes.models.null_model` answers it (the same
  table look-ups, bitwise: its outputs and fingerprint are the null model's of the same geometry and
  seed), holding the GIL as a model's Python around its kernels does;
- the device part: ``C0 + C1 x windows`` of ``time.sleep``, which releases the GIL as a device call
  does: another thread of the harness runs meanwhile.

A simulated device is one device: the device parts of the calls on one device (``--device``, per
process) never overlap, one lock held around the sleep, the host part outside it. Two calls in flight
(:mod:`lanes.running.calls_in_flight`: it declares ``concurrent_calls``, True unless ``concurrent=false``)
overlap one call's host part with the other's device part, never two device parts, so the busy
fraction cannot pass 1 by construction.

    --model 'lanes.simulation.simulated_device:full?c0_ms=2&c1_ms=0.2'
    --model 'lanes.simulation.simulated_device:full?c0_ms=2&c1_ms=0.05&timeline=/tmp/busy.bin'
    --model 'lanes.simulation.simulated_device:full?c0_ms=2&c1_ms=0.05&concurrent=false'   # one call at a time

``timeline``: where to append, when the process exits, every call's device part as (start, end), two
float64 ``time.perf_counter`` values (CLOCK_MONOTONIC on Linux, so another process's clock reads
alike), in the order the device ran them: the device's busy intervals, from which
``benchmarks/bench_device_busy.py`` computes the busy fraction (busy time / the span from the first
call's start to the last call's end) and the lanes' share of the command's wall. The host part is not
in the interval: it is time the device waits unless another call's device part covers it. The file is
appended to, one write per model at exit, so every model a command builds (a Ray worker, a second
model in the same process) adds its calls instead of replacing another's: give each measurement a
fresh path. Its folder must exist when the model is built (refused at once, not at exit after the
work). A process killed by a signal writes nothing.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness.base.errors import ModelError
from harness.data import ops
from harness.data.geometry import Geometry
from lanes.models.null_model import NullModel, _config_geometry

_DEVICES: dict[str, threading.Lock] = {}  # one lock per simulated device (its name) in this process
_DEVICES_LOCK = threading.Lock()


def device_lock(device: str) -> threading.Lock:
    """The one lock of simulated device ``device`` in this process: whoever holds it is the device's call."""
    with _DEVICES_LOCK:
        return _DEVICES.setdefault(str(device), threading.Lock())


class SimulatedDevice(NullModel):
    """The null model's answer (the host part) plus a device's time per call: ``c0_s + c1_s * windows`` seconds of
    ``time.sleep`` (the device part), the GIL released, one device part at a time (the module doc)."""

    def __init__(
        self,
        geometry: Geometry,
        label: str,
        seed: int = 0,
        c0_ms: float = 2.0,
        c1_ms: float = 0.2,
        timeline: str | None = None,
        device: str = "cpu",
        concurrent: bool = True,
    ) -> None:
        super().__init__(geometry, label, seed)
        for name, value in (("c0_ms", c0_ms), ("c1_ms", c1_ms)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= float(value) <= 60_000:
                raise ModelError(
                    f"simulated device: {name} must be a number of milliseconds in [0, 60000], got {value!r}"
                )
        if not isinstance(concurrent, bool):
            raise ModelError(f"simulated device: concurrent must be true or false, got {concurrent!r}")
        self.c0_s, self.c1_s = float(c0_ms) / 1e3, float(c1_ms) / 1e3
        self.name = f"simulated-device-{label}-seed{self.seed}"
        self.concurrent_calls = concurrent  # lanes.running.calls_in_flight: two calls may be inside infer() at once
        self._device = device_lock(device)
        self._log = IntervalLog("simulated device", timeline)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "kind": "simulated-device",
            "seed": self.seed,
            "fingerprint": self.fingerprint,
            "c0_ms": self.c0_s * 1e3,
            "c1_ms": self.c1_s * 1e3,
        }

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().infer(request)  # the host part: checks and look-ups, holding the GIL
        cost = self.c0_s + self.c1_s * int(np.asarray(request[ops.OFFSETS]).shape[0])
        with self._device:  # the device part: one call's at a time
            start = time.perf_counter()
            if cost > 0:
                time.sleep(cost)  # the device computes; the host (another thread) is free
            end = time.perf_counter()
            self._log.add(start, end)
        return out

    def intervals(self) -> np.ndarray:
        """[calls, 2] float64: every call's (start, end), in call order."""
        return self._log.intervals()

    def write_timeline(self) -> None:
        self._log.write()


class IntervalLog:
    """Calls' (start, end) intervals, kept in memory and appended to a timeline file at exit: the one
    recorder of the simulated device and of the device-time wrapper (lanes.running.device_timeline)."""

    def __init__(self, owner: str, timeline: object) -> None:
        if timeline is not None and not isinstance(timeline, str):
            raise ModelError(f"{owner}: timeline must be a file path (a string), got {timeline!r}")
        self._path = Path(timeline) if timeline else None
        if self._path is not None and not self._path.parent.is_dir():
            raise ModelError(f"{owner}: timeline {timeline!r}: folder {str(self._path.parent)!r} does not exist")
        self._intervals: list[float] = []
        self._written = 0  # how many of _intervals are in the timeline file already
        self._lock = threading.Lock()
        if self._path is not None:
            atexit.register(self.write)

    def add(self, start: float, end: float) -> None:
        with self._lock:
            self._intervals += (start, end)

    def intervals(self) -> np.ndarray:
        with self._lock:
            return np.asarray(self._intervals, dtype=np.float64).reshape(-1, 2)

    def write(self) -> None:
        """Append the intervals not yet written (one write: O_APPEND keeps writers apart); called at
        exit, and safe to call before (nothing is written twice)."""
        if self._path is None:
            return
        with self._lock:
            data = np.asarray(self._intervals[self._written :], dtype=np.float64).tobytes()
            self._written = len(self._intervals)
        with open(self._path, "ab") as f:
            f.write(data)


def busy_fraction(intervals: np.ndarray) -> tuple[float, float, float]:
    """(busy seconds, span seconds, busy / span) of [calls, 2] (start, end) intervals; overlapping
    calls (requests in flight together on a server) count once, as one device is busy once."""
    if intervals.size == 0:
        return 0.0, 0.0, 0.0
    order = intervals[np.argsort(intervals[:, 0], kind="stable")]
    busy, cur_start, cur_end = 0.0, float(order[0, 0]), float(order[0, 1])
    for s, e in order[1:]:
        if s > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = float(s), float(e)
        else:
            cur_end = max(cur_end, float(e))
    busy += cur_end - cur_start
    span = float(order[:, 1].max() - order[0, 0])
    return busy, span, busy / span if span > 0 else 0.0


def read_timeline(path: str | Path) -> np.ndarray:
    """The [calls, 2] intervals a ``timeline=`` file holds."""
    data = np.fromfile(Path(path), dtype=np.float64)
    if data.size % 2:
        raise ModelError(f"{path}: a simulated device's timeline holds pairs of float64; this one is truncated")
    return data.reshape(-1, 2)


def full(
    seed: int = 0,
    device: str = "cpu",
    c0_ms: float = 2.0,
    c1_ms: float = 0.2,
    timeline: str | None = None,
    concurrent: bool = True,
) -> SimulatedDevice:
    """The simulated device at the reference model's full geometry (the release's)."""
    return SimulatedDevice(_config_geometry("full"), "full", seed, c0_ms, c1_ms, timeline, device, concurrent)


def small(
    seed: int = 0,
    device: str = "cpu",
    c0_ms: float = 2.0,
    c1_ms: float = 0.2,
    timeline: str | None = None,
    concurrent: bool = True,
) -> SimulatedDevice:
    """The simulated device at the small test geometry."""
    return SimulatedDevice(_config_geometry("small"), "small", seed, c0_ms, c1_ms, timeline, device, concurrent)
