"""The function every test vector's output is computed with: a packer's answers checked without a network.

Shared by the packing vectors (:mod:`harness.packers.vector_files`) and the session vectors
(:mod:`harness.packers.session_vectors`): each window's (or row's) answer is a few of its own request
values, so an output read back from the wrong window or row shows.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from harness.data.ops import Op
from harness.packers.packing import PackedRequest

FUNCTION_NAME: Final = "per-window-v1"
FUNCTION = (
    f"{FUNCTION_NAME}: OP 0, one output row per window w of the request: [VALID[w], the window's first "
    "valid sample SPAN[OFFSETS[w]] (0 if VALID[w] == 0), its last valid sample SPAN[OFFSETS[w] + VALID[w] - 1] "
    "(0 if VALID[w] == 0)], float32, shape [windows, 3]; OP 1/2, one row per voiceprint row r, w = IDX[r]: "
    "[VALID[w], first valid sample of w (0 if none), WEIGHTS[r][0], WEIGHTS[r][F-1]], float32, "
    "shape [rows, 4]. "
    "It depends on a window's own samples only, so a correct packer's unpacked answer equals it per block"
)


def window_function(request: PackedRequest) -> np.ndarray:
    """:data:`FUNCTION` of a request (a packed one, or one block packed alone)."""
    valid = request.valid.astype(np.int64)
    first = np.where(
        valid > 0,
        request.span[np.minimum(request.offsets, max(len(request.span) - 1, 0))] if len(request.span) else 0.0,
        0.0,
    )
    last_at = np.clip(request.offsets + valid - 1, 0, max(len(request.span) - 1, 0))
    last = np.where(valid > 0, request.span[last_at] if len(request.span) else 0.0, 0.0)
    if request.op is Op.SEGMENTATION:
        return np.stack([valid, first, last], axis=1).astype(np.float32)
    w = _voiceprint(request.idx, "IDX").astype(np.int64)
    weights = _voiceprint(request.weights, "WEIGHTS")
    return np.stack([valid[w], first[w], weights[:, 0], weights[:, -1]], axis=1).astype(np.float32).reshape(-1, 4)


def _voiceprint(tensor: np.ndarray | None, name: str) -> np.ndarray:
    """An OP 1/2 request's IDX/WEIGHTS (its packer's check_packed made sure they are there)."""
    assert tensor is not None, f"an OP 1/2 request without {name}"
    return tensor
