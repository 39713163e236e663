"""What window i of a request sees: the one definition both lanes, all models and tests use.

Where isolation is enforced (a window must never read audio of another block):

1. The packer guarantees that, for every block, ``OFFSETS + VALID`` lies inside the block's
   own segment of the packed SPAN (each block is validated against its own span length
   before it is packed, and rebasing shifts offsets and segment together).
2. The model reads a window *only* through :func:`window_view` / :func:`cut_windows`:
   ``VALID`` samples from ``OFFSETS``, then zeros up to ``window_samples``.

Together these make a window's input identical whether its block is sent alone or packed:
past VALID, and so past the end of its block's own span, it sees zeros, never the next
block's audio. A model that reads ``window_samples`` from the offset regardless of VALID
breaks (2); the harness's leak control (tests) is exactly such a model and must be caught.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.data import ops


def window_view(span: np.ndarray, offset: int, valid: int, window_samples: int) -> np.ndarray:
    """The ``window_samples`` float32 samples one window sees (a copy, zero-padded)."""
    out = np.zeros(window_samples, dtype=np.float32)
    n = int(min(valid, window_samples))
    if n > 0:
        start = int(offset)
        out[:n] = span[start : start + n]
    return out


def request_window(request: Mapping[str, np.ndarray], i: int, window_samples: int) -> np.ndarray:
    """The samples window ``i`` of a wire request (packed or not) sees."""
    return window_view(request[ops.SPAN], int(request[ops.OFFSETS][i]), int(request[ops.VALID][i]), window_samples)


def cut_windows(span: np.ndarray, offsets: np.ndarray, valid: np.ndarray, window_samples: int) -> np.ndarray:
    """[N, window_samples] float32: every window of a request, each as :func:`window_view` sees it."""
    out = np.empty((offsets.shape[0], window_samples), dtype=np.float32)
    for i, (start, n) in enumerate(zip(offsets.tolist(), valid.tolist(), strict=True)):
        out[i] = window_view(span, start, n, window_samples)
    return out
