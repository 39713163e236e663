"""A contract model that computes nothing: transport-only benchmarks (bench_triton_shm.py).

``full`` has the reference full model's geometry (10 s windows: a block's request is ~1.7 MB),
validates each request as the real model does, and answers zeros of the contract's shape. Served
by Triton (``--model transport_model:full`` with this folder on the stub's path), it shows what
the transport costs -- HTTP body vs shared memory, the Python backend's copies -- without the
network's compute hiding it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.data import ops
from harness.data.blocks import check_request
from harness.data.geometry import Geometry
from harness.data.ops import Op


class TransportModel:
    def __init__(self, geometry: Geometry, name: str) -> None:
        self.geometry = geometry
        self.fingerprint = f"transport-only-{name}"
        self.name = name

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        fields = check_request(request, self.geometry)
        op = Op(int(fields[ops.OP][0]))
        g = self.geometry
        if op is Op.SEGMENTATION:
            out = np.zeros((fields[ops.OFFSETS].shape[0], g.frames_per_window, g.classes), np.float32)
        else:
            out = np.zeros((fields[ops.IDX].shape[0], g.embedding_dim), np.float32)
        return {op.output_name: out}

    def describe(self) -> dict:
        return {"name": self.name, "kind": "transport-only", "fingerprint": self.fingerprint}


def full(seed: int = 0, device: str = "cpu") -> TransportModel:
    from lanes.models.diar_nn_g.config import CONFIGS

    return TransportModel(CONFIGS["full"].geometry(), "transport-only-full")
