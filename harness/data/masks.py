"""The engine's masks: from a segmentation output to the voiceprint requests of a block.

One function, shared by both lanes (isolated mode takes the exact lane's segmentation,
chained mode the fast lane's own) and by scoring (mask flips), so that "what the engine
would send" is defined once. It follows pyannote's diarization pipeline:

- argmax over powerset classes -> per-speaker 0/1 activity per frame;
- frames past a window's VALID audio carry no activity (they saw zeros);
- OP 1 weighs every active frame; OP 2 zeroes the frames where two speakers are active,
  falling back to the full mask when fewer than ``min_active_frames`` clean frames remain;
- one row per (window, speaker) with at least ``min_active_frames`` active frames, in
  window-major, speaker-minor order; IDX = that window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.data.geometry import Geometry
from harness.data.limits import MAX_FRAMES
from harness.data.ops import Op


class MaskPolicy(BaseModel):
    """``[masks]``: how many active frames a speaker needs in a window to get a voiceprint row.

    ``min_active_fraction`` of the window's frames (rounded up, at least 1) unless
    ``min_active_frames`` is given explicitly.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    min_active_fraction: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        default=0.02, description="fraction of a window's frames a speaker needs to get a voiceprint row"
    )
    min_active_frames: Annotated[int, Field(ge=1, le=MAX_FRAMES)] | None = Field(
        default=None, description="or an explicit count of frames (overrides the fraction)"
    )

    def threshold(self, geometry: Geometry) -> int:
        if self.min_active_frames is not None:
            return max(1, int(self.min_active_frames))
        return max(1, math.ceil(self.min_active_fraction * geometry.frames_per_window))


@dataclass(frozen=True, eq=False)
class VoiceprintRows:
    """The WEIGHTS/IDX of one block's voiceprint request, and which speaker each row is."""

    weights: np.ndarray  # float32 [R, F]
    idx: np.ndarray  # int32 [R]
    speakers: np.ndarray  # int32 [R]


def audio_frames(valid: np.ndarray, geometry: Geometry) -> np.ndarray:
    """[N, F] bool: the frames of each window that start inside its VALID audio."""
    starts = np.arange(geometry.frames_per_window, dtype=np.int64) * geometry.frame_step
    return starts[None, :] < np.asarray(valid, dtype=np.int64)[:, None]


def voiceprint_rows(
    logprobs: np.ndarray, valid: np.ndarray, op: Op, geometry: Geometry, policy: MaskPolicy = MaskPolicy()
) -> VoiceprintRows:
    """The voiceprint request rows the engine derives from one block's OP 0 output.

    Computed from each frame's class alone (a frame's activity, and whether it is clean, are
    functions of its powerset class): counts per window and class, then each kept row's weights
    looked up from its class table, instead of [windows, frames, speakers] float arrays."""
    if not op.is_voiceprint:
        raise ValueError("voiceprint rows exist for OP 1 and OP 2 only")
    power = geometry.powerset  # [C, S] 0/1
    n, frames, classes = logprobs.shape
    cls = np.argmax(logprobs, axis=-1)  # [N, F]
    audio = audio_frames(valid, geometry)  # [N, F]
    counted = np.where(audio, cls, classes)  # frames without audio fall into an extra, empty class
    counted += np.arange(n)[:, None] * (classes + 1)
    per_class = np.bincount(counted.reshape(-1), minlength=n * (classes + 1)).reshape(n, classes + 1)[:, :classes]
    minimum = policy.threshold(geometry)
    active_count = per_class @ power.astype(np.int64)  # [N, S] active frames per speaker
    lookup = np.broadcast_to(power.T, (n, *power.T.shape))  # [N, S, C]: speaker s active in class c
    if op is Op.VOICEPRINT_CLEAN:
        single = (power.sum(axis=1) < 2).astype(power.dtype)  # classes of at most one speaker: clean frames
        enough_clean = per_class @ (power * single[:, None]).astype(np.int64) >= minimum  # [N, S]
        lookup = np.where(enough_clean[:, :, None], power.T[None] * single[None, None, :], power.T[None])
    keep = (active_count >= minimum) & (np.asarray(valid)[:, None] > 0)
    windows, speakers = np.nonzero(keep)
    rows = np.take_along_axis(lookup[windows, speakers], cls[windows], axis=1) * audio[windows]
    return VoiceprintRows(
        weights=np.ascontiguousarray(rows, dtype=np.float32).reshape(len(windows), frames),
        idx=windows.astype(np.int32),
        speakers=speakers.astype(np.int32),
    )
