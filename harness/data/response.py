"""The response half of the contract: names, shapes and dtypes a model must answer with.

Checked on every call, by every backend, before anything is unpacked or stored: a model or
server that answers another question is an error naming the request, never a silent
mismatch. Values are *not* judged here (a NaN is the scorer's to fail, loudly).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.base.errors import BackendError
from harness.data.geometry import Geometry
from harness.data.ops import Op


def expected_shape(op: Op, windows: int, rows: int, geometry: Geometry) -> tuple[int, ...]:
    if op is Op.SEGMENTATION:
        return (windows, geometry.frames_per_window, geometry.classes)
    return (rows, geometry.embedding_dim)


def check_response(
    op: Op, windows: int, rows: int, outputs: Mapping[str, object], geometry: Geometry, where: str
) -> np.ndarray:
    """The one output array of a response, or BackendError naming what is wrong and where."""
    name = op.output_name
    if name not in outputs:
        raise BackendError(f"{where}: response lacks output {name!r} for OP {int(op)} (got {sorted(outputs)})")
    out = np.asarray(outputs[name])
    if out.dtype != np.float32:
        raise BackendError(f"{where}: output {name} has dtype {out.dtype}, the contract says FP32")
    want = expected_shape(op, windows, rows, geometry)
    if tuple(out.shape) != want:
        raise BackendError(f"{where}: output {name} has shape {list(out.shape)}, expected {list(want)}")
    return out
