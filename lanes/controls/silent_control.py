"""A negative control for the golden's counts: a segmentation that never marks a speaker active.

Its voiceprint OPs get no row (the masks find no active speaker), so they can never be judged: ``golden
record`` must refuse it (exit 2, naming the OP and the mask settings) rather than record a golden whose
every nightly is refused for want of rows. The null model (``lanes.models.null_model``) with every window's
answer the silence class, confidently. Spec: ``lanes.controls.silent_control:small``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from harness.data import ops
from harness.data.ops import Op
from lanes.models.null_model import NullModel, _config_geometry


class SilentModel(NullModel):
    def __init__(self, label: str, seed: int) -> None:
        super().__init__(_config_geometry(label), label, seed)
        self.fingerprint = hashlib.sha256(f"{self.fingerprint}|control:silent".encode()).hexdigest()
        self.name = f"{self.name}-control-silent"

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().infer(request)
        op = Op(int(np.asarray(request[ops.OP]).reshape(-1)[0]))
        if op is not Op.SEGMENTATION:
            return out
        silence = np.full_like(out[op.output_name], -20.0)
        silence[..., 0] = -1e-6  # class 0 of the powerset: nobody speaks
        return {op.output_name: silence}


def small(seed: int = 0, device: str = "cpu") -> SilentModel:
    return SilentModel("small", seed)
