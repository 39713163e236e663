"""A user's model as a TorchScript file, behind the same contract as the reference model.

The scripted module must provide:

    forward(span: Tensor[S] f32, offsets: Tensor[N] i64, valid: Tensor[N] i32, op: Tensor[1] i32,
            weights: Optional[Tensor[R, F] f32], idx: Optional[Tensor[R] i32]) -> Tensor
        OP 0 -> [N, F, C] log-probabilities; OP 1/2 -> [R, D] embeddings
    @torch.jit.export geometry() -> Dict[str, int]
        sample_rate, window_samples, frames_per_window, frame_step, speakers,
        max_simultaneous, embedding_dim, windows_per_block

The module receives the raw wire tensors (packed or not) and must itself honour isolation:
read VALID samples from each offset, zeros after (``examples/byo_torchscript.py`` shows it).
The fingerprint is the sha256 of the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch

from harness.base.errors import ModelError
from harness.data import ops
from harness.data.blocks import check_request
from harness.data.geometry import Geometry
from harness.data.ops import Op
from lanes.running.staging import ToDevice, host_tensors


class TorchScriptModel:
    def __init__(self, path: str | Path, device: str = "cpu") -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"TorchScript model {str(self.path)!r} not found")
        data = self.path.read_bytes()
        self.fingerprint = hashlib.sha256(data).hexdigest()
        self.device = torch.device(device)
        try:
            self.module = torch.jit.load(str(self.path), map_location=self.device).eval()
        except Exception as exc:  # torch raises RuntimeError/ValueError/pickle errors
            raise ModelError(
                f"{self.path}: not a loadable TorchScript module ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''})"
            ) from None
        if not hasattr(self.module, "geometry"):
            raise ModelError(f"{self.path}: TorchScript module has no exported geometry() method")
        try:
            self.geometry = Geometry.from_dict(dict(self.module.geometry()))
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ModelError(f"{self.path}: bad geometry(): {exc}") from None

    def describe(self) -> dict:
        return {
            "name": self.path.name,
            "kind": "torchscript",
            "path": str(self.path),
            "fingerprint": self.fingerprint,
            "device": str(self.device),
        }

    def torch_modules(self) -> dict[str, torch.nn.Module]:
        return {"model": self.module}

    @torch.inference_mode()
    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.stage(request, host_tensors(self.device))()

    def stage(self, request: Mapping[str, np.ndarray], to_device: ToDevice) -> Callable[[], dict[str, np.ndarray]]:
        """The wire tensors given to ``to_device`` now; the module's call returned (lanes/models/model_api.py)."""
        fields = check_request(request, self.geometry)
        op = Op(int(fields[ops.OP][0]))
        inputs = [
            None if fields[name] is None else to_device(fields[name])
            for name in (ops.SPAN, ops.OFFSETS, ops.VALID, ops.OP, ops.WEIGHTS, ops.IDX)
        ]

        @torch.inference_mode()
        def compute() -> dict[str, np.ndarray]:
            out = self.module(*inputs)
            return {op.output_name: np.ascontiguousarray(out.detach().to("cpu", torch.float32).numpy())}

        return compute
