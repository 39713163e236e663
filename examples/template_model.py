"""A model for the harness to copy and fill in (docs/models.md, "A blank model file").

``cp examples/template_model.py mymodel.py && harness model check --model mymodel:make_model`` passes as it is;
replace the placeholder network (a per-frame loudness "segmentation" and a weighted-statistics "voiceprint")
with yours, keeping every member the harness reads, and run ``harness model check`` after each change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from harness.data import ops
from harness.data.blocks import check_request
from harness.data.geometry import Geometry
from harness.data.isolation import cut_windows

VERSION = "1"  # change it with any change of code that can change an answer (the weights are hashed below)


class TemplateModel:
    def __init__(self, seed: int = 0) -> None:
        # required: the numbers the corpus is cut for and the answers are checked against (every key)
        self.geometry = Geometry(
            sample_rate=16_000,
            window_samples=16_000,
            frames_per_window=50,
            frame_step=320,
            speakers=3,
            max_simultaneous=2,
            embedding_dim=16,
            windows_per_block=8,
        )
        rng = np.random.RandomState(seed)
        self.projection = rng.standard_normal((3, self.geometry.embedding_dim)).astype(np.float32)  # the "weights"
        # required: changes whenever an answer could (code version, weights, configuration)
        self.fingerprint = hashlib.sha256(
            f"template_model/{VERSION}/seed={seed}".encode() + self.projection.tobytes()
        ).hexdigest()

    def describe(self) -> dict:
        # recorded in every golden and run: a name and the fingerprint are required
        return {"name": "template-model", "kind": "plugin", "fingerprint": self.fingerprint}

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # required: one block or k packed blocks, exactly one OP (docs/models.md, "The request contract")
        fields = check_request(request, self.geometry)
        g = self.geometry
        # each window's VALID samples from its offset, zeros after: never another block's audio (isolation)
        windows = cut_windows(fields[ops.SPAN], fields[ops.OFFSETS], fields[ops.VALID], g.window_samples)
        frames = windows[:, : g.frames_per_window * g.frame_step].reshape(len(windows), g.frames_per_window, -1)
        level = np.log1p(1e4 * np.square(frames).mean(axis=2))  # [N, F]: your network goes here
        if int(fields[ops.OP][0]) == 0:
            logits = np.full((*level.shape, g.classes), -4.0, dtype=np.float64)
            logits[..., 0] = 1.0 - level  # nobody speaks in the quiet frames, speaker 1 in the loud ones
            logits[..., 1] = level - 1.0
            logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
            return {ops.SEGMENTATION_OUTPUT: logp.astype(np.float32)}  # [N, F, C] log-probabilities
        weights, idx = fields[ops.WEIGHTS], fields[ops.IDX]  # one row per voiceprint: its window, its frames' weights
        mass = weights.sum(axis=1, keepdims=True) + 1e-6
        rows = level[idx]
        stats = np.concatenate(
            [(weights * rows).sum(axis=1, keepdims=True), mass, (weights * rows**2).sum(axis=1, keepdims=True)], axis=1
        )
        return {ops.EMBEDDING_OUTPUT: ((stats / mass) @ self.projection).astype(np.float32)}  # [R, D]


def make_model(seed: int = 0) -> TemplateModel:
    return TemplateModel(seed)
