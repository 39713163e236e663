"""Cutting a recording into blocks of windows, the way the engine does.

Windows start every ``step`` samples; the last one may be short (VALID < window). Windows
are grouped 8 to a block; a block's SPAN is the audio from its first window's start to
its last window's end (clipped to the recording), and the final block is filled with
VALID = 0 padding windows placed at the end of its span.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from harness.base.errors import CorpusError
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.ops import Op

if TYPE_CHECKING:
    from pydantic import JsonValue


def window_starts(length: int, window: int, step: int) -> np.ndarray:
    """Start sample of every window needed to cover ``length`` samples."""
    if length <= 0:
        return np.zeros(0, dtype=np.int64)
    count = 1 if length <= window else math.ceil((length - window) / step) + 1
    starts = np.arange(count, dtype=np.int64) * step
    return starts[starts < length]  # a step longer than a window leaves gaps, never a window past the end


class Cut(NamedTuple):
    """One block of a recording and its provenance (start sample, windows, padding): the corpus's
    provenance JSON (corpus-provenance schema), which a source adds its own keys to."""

    block: Block
    provenance: dict[str, JsonValue]


def cut_blocks(audio: np.ndarray, geometry: Geometry, step: int, prefix: str) -> list[Cut]:
    """Blocks of one recording, each with its provenance, written per block as it is."""
    if step <= 0:
        raise CorpusError(f"{prefix}: window step must be positive, got {step}")
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1 or audio.size == 0:
        raise CorpusError(f"{prefix}: expected non-empty mono audio, got shape {list(audio.shape)}")
    window, per_block = geometry.window_samples, geometry.windows_per_block
    starts = window_starts(audio.shape[0], window, step)
    blocks = []
    for b, first in enumerate(range(0, len(starts), per_block)):
        own = starts[first : first + per_block]
        span_start = int(own[0])
        span_end = int(min(own[-1] + window, audio.shape[0]))
        span = audio[span_start:span_end]
        offsets = np.full(per_block, span.shape[0], dtype=np.int64)  # padding sits at the span end
        valid = np.zeros(per_block, dtype=np.int32)
        offsets[: len(own)] = own - span_start
        valid[: len(own)] = np.minimum(window, span.shape[0] - offsets[: len(own)])
        block_id = f"{prefix}-b{b:03d}"
        block = Block.create(block_id, Op.SEGMENTATION, span, offsets, valid, geometry)
        provenance: dict[str, JsonValue] = {
            "recording": prefix,
            "block": b,
            "start_sample": span_start,
            "windows": len(own),
            "padding_windows": per_block - len(own),
            "short_windows": int((valid[: len(own)] < window).sum()),
        }
        blocks.append(Cut(block, provenance))
    return blocks
