"""Bring your own model, as a Python factory: ``harness ... --model examples.byo_factory:make_model``.

The smallest object the harness accepts: ``geometry``, ``fingerprint`` and
``infer(request) -> dict``. This one is a toy (a per-window energy "segmentation": speaker 1 in the
louder frames, and a weighted-mean "voiceprint"), but it follows the whole contract, including isolation: it
reads windows only through :func:`harness.data.isolation.cut_windows`.
"""

from __future__ import annotations

import hashlib

import numpy as np

from harness.data import ops
from harness.data.blocks import check_request
from harness.data.geometry import Geometry
from harness.data.isolation import cut_windows


class EnergyModel:
    def __init__(self, scale: float = 1.0) -> None:
        self.scale = float(scale)
        self.geometry = Geometry(window_samples=16_000, frames_per_window=50, frame_step=320, embedding_dim=4)
        self.fingerprint = hashlib.sha256(f"examples.byo_factory/EnergyModel/1/scale={self.scale}".encode()).hexdigest()

    def describe(self) -> dict:
        return {"name": "energy-toy", "kind": "plugin", "fingerprint": self.fingerprint}

    def infer(self, request):
        fields = check_request(request, self.geometry)  # the same input checks as the reference model
        g = self.geometry
        x = cut_windows(fields[ops.SPAN], fields[ops.OFFSETS], fields[ops.VALID], g.window_samples)
        frames = x[:, : g.frames_per_window * g.frame_step].reshape(x.shape[0], g.frames_per_window, g.frame_step)
        energy = np.log1p(self.scale * np.square(frames).mean(axis=2))  # [N, F]
        if int(fields[ops.OP][0]) == 0:
            # "speaker 1 speaks" in the frames louder than their window's mean, silence elsewhere: the masks then
            # give voiceprint rows (a segmentation that never marks a speaker is refused by golden record)
            level = energy / (energy.mean(axis=1, keepdims=True) + 1e-8)
            logits = np.stack([1.0 - level, level - 1.0, *(np.full_like(level, -3.0),) * (g.classes - 2)], axis=-1)
            logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
            return {ops.SEGMENTATION_OUTPUT: logp.astype(np.float32)}
        w = fields[ops.WEIGHTS]
        e = energy[fields[ops.IDX]]  # [R, F]
        denom = w.sum(axis=1, keepdims=True) + 1e-8
        mean = (w * e).sum(axis=1, keepdims=True) / denom
        emb = np.concatenate([mean, mean**2, denom / g.frames_per_window, np.ones_like(mean)], axis=1)
        return {ops.EMBEDDING_OUTPUT: emb.astype(np.float32)}


def make_model(scale: float = 1.0) -> EnergyModel:
    return EnergyModel(scale)
