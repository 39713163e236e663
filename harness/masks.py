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

from harness.geometry import Geometry
from harness.ops import Op


class MaskPolicy(BaseModel):
    """``[masks]``: how many active frames a speaker needs in a window to get a voiceprint row.

    ``min_active_fraction`` of the window's frames (rounded up, at least 1) unless
    ``min_active_frames`` is given explicitly.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    min_active_fraction: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        0.02, description="fraction of a window's frames a speaker needs to get a voiceprint row")
    min_active_frames: Annotated[int, Field(ge=1)] | None = Field(
        None, description="or an explicit count of frames (overrides the fraction)")

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


def speaker_activity(logprobs: np.ndarray, valid: np.ndarray, geometry: Geometry) -> np.ndarray:
    """[N, F, S] float32 0/1 activity: powerset argmax, zero where the frame holds no audio."""
    classes = np.argmax(logprobs, axis=-1)
    activity = geometry.powerset[classes]
    activity *= audio_frames(valid, geometry)[..., None]
    return activity


def voiceprint_rows(
    logprobs: np.ndarray, valid: np.ndarray, op: Op, geometry: Geometry, policy: MaskPolicy = MaskPolicy()
) -> VoiceprintRows:
    """The voiceprint request rows the engine derives from one block's OP 0 output."""
    if not op.is_voiceprint:
        raise ValueError("voiceprint rows exist for OP 1 and OP 2 only")
    activity = speaker_activity(logprobs, valid, geometry)  # [N, F, S]
    minimum = policy.threshold(geometry)
    active_count = activity.sum(axis=1)  # [N, S]
    weights = activity
    if op is Op.VOICEPRINT_CLEAN:
        clean = activity * (activity.sum(axis=2, keepdims=True) < 2)
        enough_clean = clean.sum(axis=1) >= minimum  # [N, S]
        weights = np.where(enough_clean[:, None, :], clean, activity)
    keep = (active_count >= minimum) & (np.asarray(valid)[:, None] > 0)
    windows, speakers = np.nonzero(keep)
    rows = weights[windows, :, speakers].astype(np.float32)
    return VoiceprintRows(
        weights=np.ascontiguousarray(rows.reshape(len(windows), geometry.frames_per_window)),
        idx=windows.astype(np.int32),
        speakers=speakers.astype(np.int32),
    )
