"""Negative controls: models with a known defect that the harness must catch.

Every check that can pass must also be shown to fail. These models are the reference
``small`` model with one defect each; the tests (and anyone doubting a green report) run
them through the harness and expect a rejection naming the right OP and metric. They are
importable model specs, so they also run inside Triton: ``--model lanes.controls:leaky``.

- ``leaky``: reads ``window_samples`` from each offset, ignoring VALID: alone, a short final
  window sees zeros past its block's span; packed, it reads the next block's audio.
- ``cross_window_norm``: scales every window by the RMS of the *whole request*, so a window's
  output depends on the other blocks packed with it.
- ``reads_past_end``: every window also reads the 64 samples just past its VALID end, faintly (an off-by-64
  read mixed in at 1e-6): alone, a block's last windows read zeros past the request's end; packed, the next
  block's first samples, moving its answers by about 1e-6, far inside every tolerance. A leak all the same,
  refused by the neighbour evidence in every mode.
- ``cut_late_when_packed``: in a request of more than one block, every window is cut one sample late (from
  OFFSETS + 1, VALID - 1: still inside its own block): its answers move with where it sits, not with its
  neighbours' audio, and localisation finds the difference at the network's input: a window-cutting bug,
  never numerics.
- ``count_dependent``: adds 1e-6 x (windows in the call) to every output.
- ``nan_window``: answers NaN for window 8 of a request (the first window of a second block:
  only a packed call has one).
- ``slot_dependent``: adds 1 ULP to the OP 0 answer of the last window of a packed request (more than
  one block): far inside every tolerance, invisible to one arrangement (the last slot always holds
  the same blocks), refused by ``--arrangements N`` (the same block answers differently in another slot).
- ``duplicate_dependent``: adds 1 ULP to the OP 0 answer of a window whose audio an earlier window of
  the same request already had (a cache keyed by content, gone wrong): only the duplicates see it.
- ``duplicate_shifted``: as ``duplicate_dependent``, but the repeated window answers +0.01 (the
  same cache gone worse): beyond the tolerances, so refused in every tolerance mode.
- ``invariant``: batch-invariant by construction (one window, one row at a time): must be
  promoted bitwise.
- ``wrong_shape``: answers one window (or row) short: a server answering another question.
- ``slow``: sleeps ``HARNESS_SLOW_SECONDS`` (default 2) per call carrying audio: a server that
  misses the client's timeout, or a recording to interrupt.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping

import numpy as np
import torch

from harness.data import ops
from harness.data.blocks import check_request
from harness.data.ops import Op
from lanes.models.diar_nn_g.model import DiarNNG

CONFIG = "small"


class LeakyModel(DiarNNG):
    def windows(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        span, w = fields[ops.SPAN], self.geometry.window_samples
        out = np.zeros((fields[ops.OFFSETS].shape[0], w), dtype=np.float32)
        for i, start in enumerate(fields[ops.OFFSETS].tolist()):
            if fields[ops.VALID][i] > 0:
                piece = span[start : start + w]  # BUG (deliberate): ignores VALID
                out[i, : piece.shape[0]] = piece
        return out


class CrossWindowNormModel(DiarNNG):
    def windows(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        x = super().windows(fields)
        rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) or 1.0
        return (x / np.float32(rms) * np.float32(0.05)).astype(np.float32)  # BUG: request-wide statistic


class ReadsPastEndModel(DiarNNG):
    TAIL = 64
    MIX = np.float32(1e-6)

    def windows(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        x = super().windows(fields)
        span, offsets, valid = fields[ops.SPAN], fields[ops.OFFSETS], fields[ops.VALID]
        for i, (start, n) in enumerate(zip(offsets.tolist(), valid.tolist(), strict=True)):
            if n <= 0:
                continue
            tail = np.zeros(self.TAIL, np.float32)
            past = span[start + n : start + n + self.TAIL]  # BUG: past VALID (past the block, when packed)
            tail[: past.shape[0]] = past
            m = min(n, self.TAIL)
            x[i, n - m : n] += self.MIX * tail[:m]
        return x


class CutLateWhenPackedModel(DiarNNG):
    def windows(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        if fields[ops.OFFSETS].shape[0] <= self.geometry.windows_per_block:
            return super().windows(fields)
        late = dict(fields)
        valid = fields[ops.VALID]
        late[ops.OFFSETS] = fields[ops.OFFSETS] + (valid > 1)  # BUG: one sample late when packed
        late[ops.VALID] = np.where(valid > 1, valid - 1, valid).astype(valid.dtype)
        return super().windows(late)


class CountDependentModel(DiarNNG):
    def finish(self, op: Op, output: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        return output + np.float32(1e-6 * fields[ops.OFFSETS].shape[0])  # BUG: depends on the call's size


class NanWindowModel(DiarNNG):
    WINDOW = 8

    def finish(self, op: Op, output: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        output = output.copy()
        if op is Op.SEGMENTATION and output.shape[0] > self.WINDOW:
            output[self.WINDOW] = np.nan
        elif op.is_voiceprint:
            output[fields[ops.IDX] == self.WINDOW] = np.nan
        return output


class SlotDependentModel(DiarNNG):
    def finish(self, op: Op, output: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        if op is not Op.SEGMENTATION or fields[ops.OFFSETS].shape[0] <= self.geometry.windows_per_block:
            return output
        output = output.copy()
        output[-1] = np.nextafter(output[-1], np.float32(np.inf))  # BUG: the last slot's last window, 1 ULP up
        return output


class DuplicateDependentModel(DiarNNG):
    def move(self, window: np.ndarray) -> np.ndarray:
        return np.nextafter(window, np.float32(np.inf))  # BUG (deliberate): a repeated window, 1 ULP up

    def finish(self, op: Op, output: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        if op is not Op.SEGMENTATION:
            return output
        x, valid, seen = self.windows(fields), fields[ops.VALID], set()
        output = output.copy()
        for i in range(x.shape[0]):
            key = (int(valid[i]), x[i].tobytes())
            if valid[i] > 0 and key in seen:
                output[i] = self.move(output[i])
            seen.add(key)
        return output


class DuplicateShiftedModel(DuplicateDependentModel):
    def move(self, window: np.ndarray) -> np.ndarray:
        return (window + np.float32(0.01)).astype(np.float32)  # BUG (deliberate): a repeated window, +0.01


class InvariantModel(DiarNNG):
    """Runs every window (and every voiceprint row) alone: no batch shape, no batch effect."""

    @torch.inference_mode()
    def infer(self, request):
        fields = check_request(request, self.geometry)
        op = Op(int(fields[ops.OP][0]))
        x = torch.from_numpy(self.windows(fields)).to(self.device)
        if op is Op.SEGMENTATION:
            out = torch.cat([self.segmentation(x[i : i + 1].unsqueeze(1)) for i in range(x.shape[0])])
        else:
            weights = torch.from_numpy(np.require(fields[ops.WEIGHTS], requirements="W")).to(self.device)
            idx = fields[ops.IDX].astype(np.int64)
            rows = []
            for r in range(weights.shape[0]):
                one = x[idx[r] : idx[r] + 1]
                rows.append(self.voiceprint(one, weights[r : r + 1], torch.zeros(1, dtype=torch.int64)))
            out = torch.cat(rows) if rows else x.new_zeros((0, self.geometry.embedding_dim))
        return {op.output_name: np.ascontiguousarray(out.cpu().numpy())}


class SlowModel(DiarNNG):
    """Sleeps before answering a request that carries audio (an all-padding probe is answered at once)."""

    def __init__(self, config: str, seed: int, device: str, seconds: float) -> None:
        super().__init__(config, seed, device)
        self.seconds = seconds

    def infer(self, request):
        if np.asarray(request.get(ops.VALID, 0)).any():
            time.sleep(self.seconds)
        return super().infer(request)


class WrongShapeModel(DiarNNG):
    def finish(self, op: Op, output: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        return output[:-1]


def leaky(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(LeakyModel(CONFIG, seed, device), "leaky")


def cross_window_norm(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(CrossWindowNormModel(CONFIG, seed, device), "cross_window_norm")


def reads_past_end(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(ReadsPastEndModel(CONFIG, seed, device), "reads_past_end")


def cut_late_when_packed(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(CutLateWhenPackedModel(CONFIG, seed, device), "cut_late_when_packed")


def count_dependent(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(CountDependentModel(CONFIG, seed, device), "count_dependent")


def nan_window(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(NanWindowModel(CONFIG, seed, device), "nan_window")


def slot_dependent(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(SlotDependentModel(CONFIG, seed, device), "slot_dependent")


def duplicate_dependent(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(DuplicateDependentModel(CONFIG, seed, device), "duplicate_dependent")


def duplicate_shifted(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(DuplicateShiftedModel(CONFIG, seed, device), "duplicate_shifted")


def invariant(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(InvariantModel(CONFIG, seed, device), "invariant")


def wrong_shape(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return _named(WrongShapeModel(CONFIG, seed, device), "wrong_shape")


def slow(seed: int = 0, device: str = "cpu") -> DiarNNG:
    seconds = float(os.environ.get("HARNESS_SLOW_SECONDS", "2"))  # an environment variable, by its name
    return _named(SlowModel(CONFIG, seed, device, seconds), "slow")


def _named(model: DiarNNG, defect: str) -> DiarNNG:
    """A control's fingerprint must differ from the reference's: its outputs do."""
    model.fingerprint = hashlib.sha256(f"{model.fingerprint}|control:{defect}".encode()).hexdigest()
    model.name = f"{model.name}-control-{defect}"
    return model
