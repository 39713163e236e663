"""The backend seam's types: one call as the lanes hand it to a backend, its result, and what a backend is.

Apart from the backends themselves (:mod:`lanes.backends.backend`, :mod:`lanes.backends.triton.triton_backend`) so
that what
queues calls (:mod:`lanes.running.device_queue`) and what runs them can both name them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from harness.data.geometry import Geometry
from harness.data.ops import Op


@dataclass(frozen=True)
class CallResult:
    output: np.ndarray
    wall_s: float
    peak_device_bytes: int | None


class Call(NamedTuple):
    """One call as the lanes hand it to a backend."""

    op: Op
    request: Mapping[str, np.ndarray]  # the wire request: tensor name -> array
    windows: int
    rows: int
    where: str  # what the call is, for its errors: "exact lane k=1 OP 0 block 'b3'"


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
