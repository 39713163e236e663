"""The backend seam: what actually runs a request. Both lanes of a comparison share one.

A backend takes a wire request and returns the contract's output, timed. The in-process
backend runs the model object in this process (CPU or a CUDA device); the Triton backend
(:mod:`lanes.triton.backend`) sends the same request over HTTP. Numeric settings are applied
by the backend, before every call, from the release configuration: a run never inherits a
flag by accident.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from harness.data.errors import BackendError, HarnessError, check_interrupted
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.numerics import NumericSettings, in_force
from harness.response import check_response
from lanes.model_api import Model, describe


@dataclass(frozen=True)
class CallResult:
    output: np.ndarray
    wall_s: float
    peak_device_bytes: int | None


# One call as the lanes hand it to a backend: OP, wire request, windows, rows, where (for errors).
Call = tuple[Op, Mapping[str, np.ndarray], int, int, str]


class Backend(Protocol):
    geometry: Geometry
    fingerprint: str
    concurrency: int

    @property
    def device_kind(self) -> str: ...

    def call(self, op: Op, request: Mapping[str, np.ndarray], windows: int, rows: int, where: str) -> CallResult: ...

    def call_many(self, calls: Sequence[Call]) -> list[CallResult]: ...

    def environment(self) -> dict: ...

    def close(self) -> None: ...


class InProcessBackend:
    """Runs the model in this process. ``device`` is where the model lives (cpu, cuda:N)."""

    name = "in-process"
    concurrency = 1

    def __init__(self, model: Model, numerics: NumericSettings, device: str = "cpu") -> None:
        self.model = model
        self.numerics = numerics
        self.device = device
        self.geometry = model.geometry
        self.fingerprint = model.fingerprint
        self._cuda = device.startswith("cuda")
        numerics.apply()

    @property
    def device_kind(self) -> str:
        if self._cuda:
            return torch.cuda.get_device_name(torch.device(self.device))
        return "cpu"

    def call(self, op: Op, request: Mapping[str, np.ndarray], windows: int, rows: int, where: str) -> CallResult:
        check_interrupted()
        self.numerics.apply()
        if self._cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        start = time.perf_counter()
        try:
            outputs = self.model.infer(request)
        except HarnessError:
            raise
        except Exception as exc:  # a model may raise anything; name the request
            raise BackendError(f"{where}: model raised {type(exc).__name__}: {exc}") from exc
        if self._cuda:
            torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - start
        peak = int(torch.cuda.max_memory_allocated(self.device)) if self._cuda else None
        output = check_response(op, windows, rows, outputs, self.geometry, where)
        return CallResult(output, wall, peak)

    def call_many(self, calls: Sequence[Call]) -> list[CallResult]:
        """One after the other: one model in one process runs one request at a time."""
        return [self.call(*c) for c in calls]

    def environment(self) -> dict:
        return {"backend": self.name, "device": self.device, "device_kind": self.device_kind,
                "model": describe(self.model), "numerics_requested": self.numerics.to_dict(),
                "numerics_in_force": in_force(self.device, self.model)}

    def close(self) -> None:
        pass
